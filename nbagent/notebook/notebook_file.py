"""An ``.ipynb`` file as a ``NotebookBackend``: read with nbformat, written atomically, never over a
file that changed on disk since it was read.

``FileBackend(path).read()`` parses the file (nbformat 4, older versions converted) and remembers a
stamp of it (modification time, size and SHA-256 of its bytes). Each write (``set_source``,
``insert``, ``delete``) first checks that the file on disk still has that stamp -- else a
``ToolError`` saying to read the notebook again -- then writes the whole notebook to a temporary file
beside it and renames it over the file (``core/atomic_file.py``), and takes the new stamp.
A notebook opened through a symlink is written where the link points (the link stays; replacing
it would leave the real notebook with the old source), and ``read_notebook`` names both.
A file that is JSON but no notebook (a list, a cell that is a string, nesting too deep to read) is
a ``StorageError``, as a file that is not JSON is.
A read-only file (or folder) is a ``StorageError`` before anything is written. Notebooks older than
nbformat 4.5 have no cell ids: they are given ids by position (``cell-1``, ``cell-2``, ...;
``normalized`` says so) until the first write saves them. Outputs are handed over as stored; the
reader (``notebook_context.py``) caps them.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import os
import re
import stat
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.atomic_file import atomic_write
from ..core.errors import ConfigError, StorageError, ToolError
from .notebook_doc import NotebookCell, NotebookSnapshot, NotebookSource

_ID_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class FileStamp:
    """What a file was when it was read: a changed one is not written over."""

    mtime_ns: int
    size: int
    sha256: str


def file_stamp(path: Path) -> FileStamp:
    data = path.read_bytes()
    info = path.stat()
    return FileStamp(info.st_mtime_ns, len(data), hashlib.sha256(data).hexdigest())


def _nbformat() -> Any:
    try:
        import nbformat
    except ImportError:
        raise ConfigError("reading a notebook file needs nbformat: pip install nbformat "
                          "(JupyterLab and Notebook 7 install it)") from None
    return nbformat


class FileBackend:
    """One ``.ipynb`` on disk (see the module docstring)."""

    source = NotebookSource.FILE

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path).expanduser()
        self.normalized = False  # the file had no cell ids (nbformat < 4.5): they were given by position
        self._nb: Any = None
        self._stamp: FileStamp | None = None

    def __repr__(self) -> str:
        return f"FileBackend({str(self.path)!r})"

    @property
    def label(self) -> str:
        """Where the cells come from, as ``read_notebook`` names it (a link: also where edits go)."""
        target = self.target()
        return f"file: {self.path}" + (f" (a link to {target})" if target != self.path else "")

    def target(self) -> Path:
        """The file edits are written to: ``path``, or the file a symlink at ``path`` points to (the
        link stays a link; replacing it would leave the real notebook unedited)."""
        return Path(os.path.realpath(self.path)) if self.path.is_symlink() else self.path

    async def read(self) -> NotebookSnapshot:
        return await asyncio.to_thread(self._read)

    def _read(self) -> NotebookSnapshot:
        nbformat = _nbformat()
        if not self.path.is_file():
            raise StorageError(f"no notebook file at {self.path}")
        try:
            raw = self.path.read_bytes()
            info = self.path.stat()
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # nbformat warns about what it repairs
                nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
            problem = _not_a_notebook(nb)
        except RecursionError:
            problem = "its JSON is nested too deeply"
        except Exception as exc:  # nbformat fails on bad JSON in many ways (a list, a str cell)
            problem = f"nbformat cannot read it ({type(exc).__name__}: {exc})"
        if problem:
            raise StorageError(f"{self.path} is not a notebook: {problem}") from None
        self.normalized = _give_ids(nb)
        self._nb = nb
        self._stamp = FileStamp(info.st_mtime_ns, len(raw), hashlib.sha256(raw).hexdigest())
        return self._snapshot()

    def cached(self) -> NotebookSnapshot | None:
        """The cells as last read (None before the first read): what a write checks against."""
        return self._snapshot() if self._nb is not None else None

    def changed_on_disk(self) -> bool:
        """Whether the file is no longer what was last read (a write would be refused)."""
        if self._stamp is None:
            return False
        try:
            return file_stamp(self.path) != self._stamp
        except OSError:
            return True

    def _snapshot(self) -> NotebookSnapshot:
        cells = tuple(_cell(c, i) for i, c in enumerate(self._nb.cells))
        return NotebookSnapshot(NotebookSource.FILE, cells, path=str(self.path))

    async def set_source(self, cell_id: str, source: str, *, expected_source: str,
                         metadata: dict[str, Any] | None = None) -> NotebookCell:
        return await asyncio.to_thread(self._set_source, cell_id, source, expected_source, metadata)

    def _set_source(self, cell_id: str, source: str, expected: str, metadata: dict[str, Any] | None) -> NotebookCell:
        nb, target = self._writable()
        index, cell = self._find(nb, cell_id, expected)
        cell.source = source
        if metadata is not None:
            cell.metadata = _nbformat().from_dict(copy.deepcopy(metadata))
        self._write(nb, target)
        return _cell(cell, index)

    async def insert(self, source: str, *, after: str | None = None, cell_type: str = "code",
                     metadata: dict[str, Any] | None = None) -> NotebookCell:
        return await asyncio.to_thread(self._insert, source, after, cell_type, metadata)

    def _insert(self, source: str, after: str | None, cell_type: str, metadata: dict[str, Any] | None) -> NotebookCell:
        v4 = _nbformat().v4
        nb, target = self._writable()
        makers = {"code": v4.new_code_cell, "markdown": v4.new_markdown_cell, "raw": v4.new_raw_cell}
        if cell_type not in makers:
            raise ToolError(f"unknown cell type {cell_type!r}: use code, markdown or raw")
        cell = makers[cell_type](source=source, metadata=copy.deepcopy(metadata or {}))
        cell.id = _new_id({c.id for c in nb.cells})
        if after is None:
            index = len(nb.cells)
        else:
            index = next((i + 1 for i, c in enumerate(nb.cells) if c.id == after), -1)
            if index < 0:
                raise ToolError(f"no cell with id {after!r} in {self.path} to insert after; "
                                "call read_notebook for the cells' ids")
        nb.cells.insert(index, cell)
        self._write(nb, target)
        return _cell(cell, index)

    async def delete(self, cell_id: str, *, expected_source: str) -> None:
        await asyncio.to_thread(self._delete, cell_id, expected_source)

    def _delete(self, cell_id: str, expected: str) -> None:
        nb, target = self._writable()
        index, _ = self._find(nb, cell_id, expected)
        del nb.cells[index]
        self._write(nb, target)

    # --- the checks before a write ----------------------------------------------------------

    def _writable(self) -> tuple[Any, Path]:
        """The notebook as last read and the file to write, if that file is still the one read and may be written."""
        if self._nb is None or self._stamp is None:
            raise ToolError(f"{self.path} was not read yet: call read_notebook first")
        target = self.target()
        try:
            now = file_stamp(target)
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc.strerror or exc}; nothing was changed") from None
        if now != self._stamp:
            raise ToolError(f"{self.path} changed on disk since it was read (saved by the notebook's "
                            "front end or another program); nothing was changed: call read_notebook "
                            "again, then retry")
        if _read_only(target):
            raise StorageError(f"{target} is read-only; nothing was changed (make it writable, or "
                               "work on a copy: notebook_tools(notebook='copy.ipynb'))")
        return copy.deepcopy(self._nb), target  # a failed write leaves the notebook as read

    def _find(self, nb: Any, cell_id: str, expected: str) -> tuple[int, Any]:
        for i, c in enumerate(nb.cells):
            if c.id == cell_id:
                if c.source != expected:
                    raise ToolError(f"cell {cell_id} changed since it was read; nothing was changed: "
                                    "call read_notebook again")
                return i, c
        raise ToolError(f"no cell with id {cell_id!r} in {self.path} (deleted?); nothing was changed: "
                        "call read_notebook for the cells' ids")

    def _write(self, nb: Any, target: Path) -> None:
        nbformat = _nbformat()
        nb.nbformat, nb.nbformat_minor = 4, max(int(nb.get("nbformat_minor", 5)), 5)  # ids need 4.5
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text = nbformat.writes(nb)
        text = text if text.endswith("\n") else text + "\n"
        mode = stat.S_IMODE(target.stat().st_mode)

        def write(tmp: Path) -> None:
            tmp.write_text(text, encoding="utf-8")
            os.chmod(tmp, mode)  # the file keeps its permissions (a temporary file starts at 0600)

        atomic_write(target, write)
        self._nb, self._stamp, self.normalized = nb, file_stamp(target), False


def _not_a_notebook(nb: Any) -> str:
    """What keeps nbformat's reading of a file from being a notebook the tools can use ("": nothing)."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return f"its cells are {type(cells).__name__}, not a list"
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            return f"cell {i + 1} is a JSON {type(cell).__name__}, not a cell"
        if cell.get("cell_type") not in ("code", "markdown", "raw") or not isinstance(cell.get("source"), str):
            return f"cell {i + 1} has no cell_type code, markdown or raw, or no source"
    json.dumps(nb)  # RecursionError for metadata nested too deeply to write back
    return ""


def _read_only(path: Path) -> bool:
    """The file or its folder cannot be written (no write bit counts, even for root)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    folder = path.parent
    return (not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK)
            or not os.access(folder, os.W_OK | os.X_OK))


def _give_ids(nb: Any) -> bool:
    """Give cells without a valid, unique id one by position; True when any was given."""
    seen: set[str] = set()
    given = False
    for i, cell in enumerate(nb.cells):
        cid = cell.get("id")
        if not isinstance(cid, str) or not _ID_RE.match(cid) or cid in seen:
            base = f"cell-{i + 1}"
            cid, n = base, 2
            while cid in seen:
                cid, n = f"{base}-{n}", n + 1
            cell["id"] = cid
            given = True
        seen.add(cid)
    return given


def _new_id(taken: set[str]) -> str:
    while True:
        cid = uuid.uuid4().hex[:8]
        if cid not in taken:
            return cid


def _cell(cell: Any, index: int) -> NotebookCell:
    count = cell.get("execution_count") if cell.cell_type == "code" else None
    outputs = tuple(cell.get("outputs") or ()) if cell.cell_type == "code" else ()
    metadata = json.loads(json.dumps(cell.get("metadata") or {}, default=str))
    return NotebookCell(id=str(cell.id), index=index, cell_type=str(cell.cell_type), source=str(cell.source),
                        execution_count=count if isinstance(count, int) else None, outputs=outputs,
                        metadata=metadata)
