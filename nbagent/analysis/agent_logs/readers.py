"""The registry of agent log readers, and reading log files through it (safely, each file once).

A reader is one module with ``SOURCE``, ``recognises(first_record) -> bool`` and
``read(path, records) -> AgentLog``, and optionally ``dedupe(logs) -> set`` (the calls counted
once with another); adding an agent is adding its module to :data:`READERS`. A file is given to
the reader that recognises its first JSON record, whatever its name.

Only a regular file is read (a FIFO or device is refused without blocking), up to the size it had
when opened (a file being appended is read to that point); a last line without its newline that is
not whole JSON is skipped as torn. Logs read are kept in memory by file identity and stat, so a
second read reads only the files that changed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ...core.errors import StorageError
from ...core.session_file import fast_loads
from . import claude_code, codex
from .log import TORN, AgentLog

READERS: tuple[ModuleType, ...] = (codex, claude_code)
SNIFF_LINES = 20  # records looked at to recognise a log
_CACHE: dict[str, tuple[tuple[int, ...], AgentLog | None]] = {}


def read_logs(paths: Sequence[Path]) -> list[AgentLog | None]:
    """The log of each path (None: no reader recognises it), duplicates counted once across them
    (each reader's ``dedupe``). ``StorageError`` for a file that cannot be read, naming it."""
    logs = [read_log(p) for p in paths]
    for reader in READERS:
        dedupe = getattr(reader, "dedupe", None)
        own = [log for log in logs if log is not None and log.source == reader.SOURCE]
        dropped = dedupe(own) if dedupe is not None and own else set()
        if dropped:
            logs = [log if log is None or log.source != reader.SOURCE
                    else dataclasses.replace(log, calls=[c for c in log.calls if id(c) not in dropped], turns=None)
                    for log in logs]
    return logs


def read_log(path: Path) -> AgentLog | None:
    """One file's log as its reader reads it (before duplicates across files are dropped)."""
    data, key = _read_bytes(path)
    cached = _CACHE.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]
    log = parse_log(path, data)
    _CACHE[str(path)] = (key, log)
    return log


def parse_log(path: Path, data: bytes) -> AgentLog | None:
    """The log in ``data`` (a file's bytes), by the reader that recognises its first record."""
    loads = fast_loads() or json.loads
    reader = _reader_of(_lines(data, loads, SNIFF_LINES))
    if reader is None:
        return None
    log = reader.read(path, _lines(data, loads))
    return log


def _reader_of(records: Iterator[tuple[bytes, Any]]) -> ModuleType | None:
    for _, record in records:
        if isinstance(record, dict):
            return next((r for r in READERS if r.recognises(record)), None)
    return None


def _lines(data: bytes, loads: Any, limit: int | None = None) -> Iterator[tuple[bytes, Any]]:
    """Each non-blank line and its parsed value (None when it is not JSON; :data:`TORN` for a last
    line without its newline that is not whole JSON: a writer may be finishing it)."""
    lines = data.split(b"\n")
    last = len(lines) - 1
    for n, line in enumerate(lines if limit is None else lines[:limit]):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except (ValueError, RecursionError):
            record = TORN if n == last else None
        yield line, record


def _key(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


def _read_bytes(path: Path) -> tuple[bytes, tuple[int, ...]]:
    """A regular file's bytes up to its size when opened, and its identity and stat."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StorageError(f"{path} is not a regular file")
        cached = _CACHE.get(str(path))
        if cached is not None and cached[0] == _key(info):
            return b"", _key(info)
        chunks, left = [], info.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), _key(info)
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
