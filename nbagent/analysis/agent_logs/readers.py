"""The registry of agent log readers, and reading log files through it (safely, each file once).

A reader is one module with ``SOURCE``, ``recognises(first_record) -> bool`` and
``read(path, records) -> AgentLog``, and optionally ``dedupe(logs) -> set`` (the calls counted
once with another); adding an agent is adding its module to :data:`READERS`. A file is given to
the reader that recognises its first JSON record, whatever its name.

Only a regular file is read (a FIFO or device is refused without blocking), up to the size it had
when opened (a file being appended is read to that point); a last line without its newline that is
not whole JSON is skipped as torn; a line over :data:`MAX_LINE_BYTES` is skipped and counted
without being copied or parsed (a file is read into one buffer, its lines parsed one at a time). Logs read are kept in memory by file identity and stat, so a
second read reads only the files that changed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ...core.errors import StorageError
from ...core.session_file import fast_loads
from . import claude_code, codex, gemini_cli
from .log import MAX_LINE_BYTES, TOO_LONG, TORN, AgentLog

READERS: tuple[ModuleType, ...] = (codex, claude_code, gemini_cli)
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


def parse_log(path: Path, data: bytes | bytearray) -> AgentLog | None:
    """The log in ``data`` (a file's bytes), by the reader that recognises its first record."""
    loads = fast_loads() or json.loads
    reader = _reader_of(_lines(data, loads, SNIFF_LINES))
    if reader is None:
        return None
    log = reader.read(path, _lines(data, loads))
    return log


def log_records(path: Path) -> Iterator[tuple[bytes, Any]]:
    """Each line of a log file with its parsed value, as the readers get them (``StorageError`` when
    it cannot be read)."""
    data, _ = _read_bytes(path, cached=False)
    return _lines(data, fast_loads() or json.loads)


def _reader_of(records: Iterator[tuple[bytes, Any]]) -> ModuleType | None:
    for _, record in records:
        if isinstance(record, dict):
            return next((r for r in READERS if r.recognises(record)), None)
    return None


def _lines(data: bytes | bytearray, loads: Any, limit: int | None = None) -> Iterator[tuple[bytes, Any]]:
    """Each non-blank line and its parsed value (None when it is not JSON; :data:`TORN` for a last
    line without its newline that is not whole JSON: a writer may be finishing it; :data:`TOO_LONG`
    for a line over :data:`MAX_LINE_BYTES`, never copied nor parsed)."""
    if len(data) <= MAX_LINE_BYTES:  # no line can be too long: split at once (in C)
        lines = data.split(b"\n")
        last = len(lines) - 1
        yield from _parsed(enumerate(lines if limit is None else lines[:limit]), last, loads)
        return
    yield from _parsed(_long_lines(data, limit), -1, loads)


def _parsed(lines: Iterable[tuple[int, Any]], last: int, loads: Any) -> Iterator[tuple[bytes, Any]]:
    for n, line in lines:
        if line is TOO_LONG:
            yield b"", TOO_LONG
            continue
        if not line.strip():
            continue
        try:
            record = loads(line)
        except (ValueError, RecursionError):
            record = TORN if n == last or n < 0 else None
        yield line, record


def _long_lines(data: bytes | bytearray, limit: int | None) -> Iterator[tuple[int, Any]]:
    """A big file's lines one at a time (each copied alone, one over the bound not at all); the
    last line's number is -1 when it has no newline."""
    start, n = 0, 0
    while start < len(data) and (limit is None or n < limit):
        end = data.find(b"\n", start)
        stop = len(data) if end < 0 else end
        yield (-1 if end < 0 else n), TOO_LONG if stop - start > MAX_LINE_BYTES else data[start:stop]
        start, n = stop + 1, n + 1


def _key(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


def _read_bytes(path: Path, cached: bool = True) -> tuple[bytes | bytearray, tuple[int, ...]]:
    """A regular file's bytes up to its size when opened, and its identity and stat."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StorageError(f"{path} is not a regular file")
        known = _CACHE.get(str(path)) if cached else None
        if known is not None and known[0] == _key(info):
            return b"", _key(info)
        data = bytearray(info.st_size)  # read into one buffer: a big file is never held twice
        with open(fd, "rb", buffering=0, closefd=False) as f:
            view, got = memoryview(data), 0
            while got < len(data):
                n = f.readinto(view[got:])
                if not n:
                    break
                got += n
            view.release()
        del data[got:]
        return data, _key(info)
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
