"""One writer per session file: an advisory lock on a hidden sidecar file.

``SessionLock.acquire(path)`` takes an exclusive ``flock`` (``msvcrt.locking`` on Windows) on
``.<name>.lock`` beside ``path`` and writes the holder (pid, host, since) into it. The lock belongs
to the open file, so it ends with the process however that ends (a killed kernel leaves no stale
lock: the next opener gets it). A process that finds it held reads the holder
(:func:`lock_holder`) to say who has the file open. A file system that cannot lock (some network
mounts) gives :class:`Unlockable`: the caller goes on unlocked and says so.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from .chat_session import read_small_file
from .errors import NbagentError

__all__ = ["LockHolder", "SessionLock", "Unlockable", "lock_holder", "lock_path"]

HOLDER_BYTES = 4096  # a lock file holds one small JSON object: nothing past this is read
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a link planted at the lock's name is refused, never written through
_NON_BLOCK = getattr(os, "O_NONBLOCK", 0)

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


class Unlockable(OSError):
    """The lock file cannot be made or locked here (a read-only folder, a file system without locks)."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a session file's lock, as it wrote itself into the lock file."""

    pid: int = 0
    host: str = ""
    since: float = 0.0

    def describe(self) -> str:
        """``pid 123 on host lab-7 since 01:02``, or ``another process`` when unknown."""
        if not self.pid:
            return "another process"
        when = time.strftime(" since %H:%M", time.localtime(self.since)) if self.since else ""
        return f"pid {self.pid} on {self.host or 'this machine'}{when}"


def lock_path(path: str | os.PathLike) -> Path:
    """The sidecar lock file of a session file: ``.<name>.lock`` beside it (not listed as a session)."""
    p = Path(path)
    return p.with_name(f".{p.name}.lock")


class SessionLock:
    """An exclusive lock on one session file, held until :meth:`release` (or the process ends)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path  # the session file
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: str | os.PathLike) -> SessionLock | None:
        """The lock of ``path``, or None when another open file (this process's too) holds it.

        Raises :class:`Unlockable` when no lock can be taken here.
        """
        path = Path(path)
        lock = lock_path(path)
        for _ in range(10):  # the lock file replaced between open and lock: open it again
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | _NO_FOLLOW | _NON_BLOCK, 0o644)
            except OSError as exc:
                raise Unlockable(exc.errno, f"cannot make {lock}: {exc.strerror or exc}") from None
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device planted at its name: never written
                    raise OSError(0, "it is not a regular file")
                if not _try_lock(fd):
                    os.close(fd)
                    return None
                if _same_file(fd, lock):
                    _write_holder(fd)
                    return cls(path, fd)
            except OSError as exc:
                os.close(fd)
                raise Unlockable(exc.errno, f"cannot lock {lock}: {exc.strerror or exc}") from None
            os.close(fd)  # released and removed by its holder meanwhile: that file is gone
        raise Unlockable(0, f"cannot lock {lock}: it keeps being replaced")

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file and let go (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            lock_path(self.path).unlink(missing_ok=True)  # while still holding it: no one else's file
        except OSError:
            pass
        finally:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - at interpreter exit modules may be gone; the OS lets go anyway
            pass

    def __repr__(self) -> str:
        return f"<SessionLock {self.path.name} {'held' if self.held else 'released'}>"


def lock_holder(path: str | os.PathLike) -> LockHolder:
    """Who holds the lock of session file ``path`` (an empty holder when unknown)."""
    try:  # a planted FIFO, device or huge file is never waited on or read whole
        data, _ = read_small_file(lock_path(path), HOLDER_BYTES, follow=False)
        raw = json.loads(data.decode("utf-8") or "{}")
        return LockHolder(int(raw.get("pid") or 0), str(raw.get("host") or ""), float(raw.get("since") or 0))
    except (OSError, ValueError, TypeError, AttributeError, NbagentError):
        return LockHolder()


def _try_lock(fd: int) -> bool:
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    import msvcrt

    try:
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except PermissionError:
        return False
    return True


def _same_file(fd: int, lock: Path) -> bool:
    """Whether ``fd`` is still the file at ``lock`` (its holder may have removed it before we locked)."""
    try:
        st = os.stat(lock)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _write_holder(fd: int) -> None:
    data = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode()
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, data)
