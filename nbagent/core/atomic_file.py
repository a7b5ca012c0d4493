"""Atomic file writes: a temporary file beside the target, then a rename over it.

The previous file stays whole until the new one is complete (a full disk or a failing
writer leaves it as it was), and a symlink planted at the target is replaced, never
written through.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Callable, Iterator

from .errors import StorageError

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_text", "staged_file", "sync_directory"]


def atomic_write(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` to fill a new temporary file beside ``path``, then rename it over ``path``.

    An ``OSError`` becomes ``NbagentError(kind="io")`` naming ``path``; any failure removes the
    temporary file and leaves ``path`` untouched.
    """
    path = Path(path)
    try:
        fd, name = _temp_beside(path)
        os.close(fd)
        tmp = Path(name)
        try:
            write(tmp)
            _fsync(tmp)
            os.replace(tmp, path)  # replaces a link at ``path`` itself, never its target
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


@contextmanager
def staged_file(path: str | os.PathLike) -> Iterator[Path]:
    """:func:`atomic_write` for a file written over time: yields the temporary file beside ``path``,
    renamed over ``path`` when the block ends, removed when it raises (``NbagentError`` for an ``OSError``)."""
    path = Path(path)
    try:
        fd, name = _temp_beside(path)
        os.close(fd)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
    tmp = Path(name)
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write`)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes | memoryview, sync: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (as :func:`atomic_write`), through the one descriptor
    the temporary file is created with: one ``open`` a file, not three (creating, writing and
    syncing by name), which counts when a folder of small files is written.

    ``sync=False`` leaves the data to the system's write-back (no ``fsync``, a third of a small
    file's cost): for files that can be written again, whose folder is synced once at the end
    (:func:`sync_directory`). The file is still whole or absent for any reader, and after a
    failure of the writer; only a crash of the machine soon after can lose it or leave it empty."""
    path = Path(path)
    try:
        fd, name = _temp_beside(path)
        try:
            with open(fd, "wb", closefd=True) as file:
                file.write(data)
                file.flush()
                if sync:
                    os.fsync(fd)
            os.replace(name, path)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new hidden temporary file in ``path``'s folder (created if missing): its descriptor and name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)


def _fsync(path: str | os.PathLike, flags: int = 0) -> None:
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_directory(path: str | os.PathLike) -> None:
    """``fsync`` a folder: the names created or renamed in it are on disk (``NbagentError`` for an ``OSError``)."""
    try:
        _fsync(path, getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise StorageError(f"cannot sync {path}: {exc.strerror or exc}") from None
