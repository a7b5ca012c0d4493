"""The rows of ``list_sessions`` kept in a small index file in each folder, so a warm listing of
10,000 sessions reads one file instead of 10,000.

``.nbagent-sessions.index`` (JSON) in a folder holds, per session file name, the file's and its autosave
journal's (mtime, size) when its row was made, and the row. A listing stats every file (one
directory scan), takes the rows of unchanged files from the index and reads only the heads of
new or changed ones; files gone from the folder leave the index when it is written again. The
index is a cache, never the truth: a missing, damaged or foreign index (another format version,
or one made with other prices) is rebuilt from the files, and a folder that cannot be written is
listed without one. A link, a FIFO, a device or a file over ``MAX_INDEX_BYTES`` at the index's name
is not read (opened without blocking, checked first). Rows are
kept for listings at the sessions' own prices (``pricing=None``); other prices read every head.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import astuple, fields
from pathlib import Path
from typing import Any
from collections.abc import Callable

from ..core.chat_session import atomic_write_json, read_small_file
from ..core.errors import NbagentError

__all__ = ["INDEX_NAME", "FileStat", "SessionIndex", "folder_stats"]

INDEX_NAME = ".nbagent-sessions.index"  # not a *.json: never listed as a session
INDEX_FORMAT = "nbagent.session_index"
INDEX_VERSION = 2  # 2: entries are lists
MAX_INDEX_BYTES = 64 * 2**20  # ~150,000 sessions' rows; a larger index is not read (the files are)

FileStat = tuple[int, int, int, int]  # the file's mtime_ns and size, its journal's (0, 0 when none)


def folder_stats(folder: Path) -> dict[str, FileStat]:
    """Each ``*.json`` of ``folder`` by name, with its and its journal's (mtime_ns, size): one scan."""
    seen: dict[str, tuple[int, int]] = {}
    try:
        with os.scandir(folder) as it:
            for entry in it:
                name = entry.name
                if name.endswith(".json") or name.endswith(".journal"):
                    try:
                        st = entry.stat()
                    except OSError:
                        continue
                    seen[name] = (st.st_mtime_ns, st.st_size)
    except OSError:
        return {}
    out: dict[str, FileStat] = {}
    for name, (mtime, size) in seen.items():
        if name.endswith(".json"):
            journal = seen.get(f".{name}.journal", (0, 0))
            out[name] = (mtime, size, *journal)
    return out


class SessionIndex:
    """One folder's index: rows by file name, valid while the file's stat is unchanged."""

    def __init__(self, folder: Path, version: str) -> None:  # version: the prices the costs come from
        self.folder = folder
        self.version = version
        self.entries: dict[str, list] = {}
        self.changed = False
        self._load()

    def _load(self) -> None:
        try:  # a planted FIFO, device or huge file is never waited on or read whole: no index
            data, _ = read_small_file(self.folder / INDEX_NAME, MAX_INDEX_BYTES, follow=False)
            doc = json.loads(data)
        except (OSError, ValueError, RecursionError, NbagentError):
            return
        if (not isinstance(doc, dict) or doc.get("format") != INDEX_FORMAT or doc.get("version") != INDEX_VERSION
                or doc.get("prices") != self.version or not isinstance(doc.get("entries"), dict)):
            return  # another version's or a damaged index: rebuilt from the files
        self.entries = doc["entries"]

    def row(self, name: str, stat: FileStat, make: Callable[[list], Any]) -> Any:
        """The indexed row of ``name`` made with ``make(values)`` (the row's fields in order), or
        None when ``stat`` differs (or the entry does not read back)."""
        entry = self.entries.get(name)  # [mtime_ns, size, journal mtime_ns, journal size, *values]
        if not isinstance(entry, list) or tuple(entry[:4]) != stat:
            return None
        try:
            return make(entry[4:])
        except (TypeError, ValueError, KeyError):
            return None

    def put(self, name: str, stat: FileStat, row: Any) -> None:
        """Index ``row`` (a dataclass) for ``name`` at ``stat``."""
        self.entries[name] = [*stat, *astuple(row)]
        self.changed = True

    def keep_only(self, names: set[str]) -> None:
        """Drop the entries of files no longer in the folder."""
        gone = [n for n in self.entries if n not in names]
        for n in gone:
            del self.entries[n]
        self.changed = self.changed or bool(gone)

    def save(self) -> None:
        """Write the index if it changed; a folder that cannot be written keeps none (no error)."""
        if not self.changed:
            return
        try:
            atomic_write_json(self.folder / INDEX_NAME, {"format": INDEX_FORMAT, "version": INDEX_VERSION,
                                                        "prices": self.version, "entries": self.entries})
        except NbagentError:  # a cache that cannot be written is only slower next time
            return
        self.changed = False


def row_from(cls: type, values: list, path: str) -> Any:
    """An indexed row as ``cls`` (a dataclass whose first field is ``path``), listed at ``path`` now."""
    if len(values) != _field_count(cls):
        raise ValueError("the indexed row has other fields")
    values[0] = path
    return cls(*values)


@functools.cache
def _field_count(cls: type) -> int:
    return len(fields(cls))
