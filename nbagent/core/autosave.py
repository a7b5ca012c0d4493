"""The file a conversation autosaves to, held by one writer, and whether its saves succeed.

``Autosave.claim(path)`` takes the session file's lock (``session_lock.py``). When another process
(or another agent of this one) already has it open, ``if_open`` chooses, never a silent loss:

- ``"branch"`` (the default): this writer saves to ``<name>.branch-2.json`` (the first free
  number), a branch of the session holding its history and the turns that follow, and says so once;
- ``"read_only"``: nothing is saved (the status says so);
- ``"raise"``: a ``StorageError`` naming who holds the file.

Within one process the newest claim takes the file over (re-running ``agent = Agent.load(path)``
in a notebook keeps saving to ``path``): the earlier holder, if it saves again, goes to a branch.

``Autosave.write`` records each save's outcome in ``status`` (:class:`AutosaveStatus`): a failing
save stays visible (the chat widget shows ``status.line()``) until one succeeds. ``save_state``
saves through the holder's :class:`~nbagent.core.session_journal.JournalWriter`: a turn is a line
appended to the file's journal; the journal is folded into the file when the holder lets the file
go (another file, ``release``, the end of the process).
"""

from __future__ import annotations

import atexit
import enum
import os
import re
import time
import warnings
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from collections.abc import Callable

from .conversation_state import ConversationState
from .errors import ConfigError, NbagentError, StorageError
from .session_file import save_document
from .session_journal import JournalWriter
from .session_lock import SessionLock, Unlockable, lock_holder

__all__ = ["Autosave", "AutosaveStatus", "IfOpen", "branch_name"]

MAX_BRANCHES = 99


class IfOpen(str, enum.Enum):
    """What an agent does with a session file another writer has open."""

    BRANCH = "branch"
    READ_ONLY = "read_only"
    RAISE = "raise"

    @classmethod
    def of(cls, value: str | IfOpen) -> IfOpen:
        try:
            return cls(value)
        except ValueError:
            choices = ", ".join(repr(c.value) for c in cls)
            raise ConfigError(f"if_open must be one of {choices}, not {value!r}") from None


@dataclass(frozen=True)
class AutosaveStatus:
    """Where the turns go and whether the last save worked."""

    path: Path | None = None  # the file saved to (a branch when the session was open elsewhere)
    error: str = ""  # the last save's failure; "" once a save succeeds
    failures: int = 0  # failed saves in a row
    failing_since: float | None = None  # when the first of them failed
    read_only: bool = False  # open elsewhere and ``if_open="read_only"``: nothing is saved
    note: str = ""  # how the file was claimed: a branch, read-only, no lock on this file system

    @property
    def saving(self) -> bool:
        """Whether the turns are being saved (the last save worked, or none was tried yet)."""
        return not self.error and not self.read_only

    def line(self) -> str:
        """One line for the chat: why turns are not saved, or where they go; "" when all is well."""
        if self.error:
            since = time.strftime("%H:%M:%S", time.localtime(self.failing_since or time.time()))
            tries = f"{self.failures} saves failed" if self.failures > 1 else "the save failed"
            return (f"Not saved since {since} ({tries}): {self.error}. The turns are kept in memory; "
                    "nbagent saves again after each turn.")
        return self.note


_HOLDERS: weakref.WeakValueDictionary[str, Autosave] = weakref.WeakValueDictionary()  # this process's, by real path


def _key(path: Path) -> str:
    return os.path.realpath(path)


_BRANCH = re.compile(r"\.branch-\d+$")


def branch_name(path: Path, n: int) -> Path:
    """``name.branch-<n>.json`` beside ``path`` (a branch of a branch numbers the original's)."""
    return path.with_name(f"{_BRANCH.sub('', path.stem)}.branch-{n}{path.suffix}")


class Autosave:
    """The one session file a conversation saves to, its lock, and the last save's outcome."""

    def __init__(self) -> None:
        self._lock: SessionLock | None = None
        self._displaced = False  # another claim of this process took the file over
        self.status = AutosaveStatus()
        self.journal = JournalWriter(save_document)  # how the claimed file is written: a journal line per save

    @property
    def path(self) -> Path | None:
        return self.status.path

    def claim(self, path: Path | None, if_open: IfOpen | str = IfOpen.BRANCH, *, take_over: bool = True) -> None:
        """Save to ``path`` from now on (None: nowhere yet); see the module's docstring.

        ``take_over``: an earlier claim of this process on ``path`` gives it up (else: a branch).
        """
        if path is not None and self._lock is not None and self._lock.path == Path(path):
            return
        self.release()
        if path is None:
            return
        path = Path(path)
        try:
            lock = SessionLock.acquire(path)
        except Unlockable as exc:
            self.status = AutosaveStatus(path, note=f"Saving {path.name} without a lock ({exc.strerror}): another "
                                                    "process saving it too would overwrite its turns.")
            return
        if lock is None and take_over:
            lock = self._take_over(path)
        if lock is not None:
            self._hold(lock, AutosaveStatus(path))
            return
        self._open_elsewhere(path, IfOpen.of(if_open))

    def _hold(self, lock: SessionLock, status: AutosaveStatus) -> None:
        self._lock, self.status, self._displaced = lock, status, False
        _HOLDERS[_key(lock.path)] = self

    def _take_over(self, path: Path) -> SessionLock | None:
        """The lock of ``path`` from an earlier claim in this process (None: another process holds it)."""
        old = _HOLDERS.get(_key(path))
        if old is None or old is self or old._lock is None:
            return None
        lock, old._lock, old._displaced = old._lock, None, True
        old.journal.forget()  # its journal is ours now: the new holder rewrites the file at its first save
        return lock

    def _open_elsewhere(self, path: Path, if_open: IfOpen) -> None:
        found = lock_holder(path)
        holder = "another agent of this process" if found.pid == os.getpid() else found.describe()
        if if_open is IfOpen.RAISE:
            raise StorageError(f"{path} is open in {holder}; load it with if_open='branch' (save to a branch "
                               "of the session) or if_open='read_only' (save nothing)")
        if if_open is IfOpen.READ_ONLY:
            self.status = AutosaveStatus(path, read_only=True,
                                         note=f"Read-only: {path.name} is open in {holder}; nothing is saved.")
            return
        for n in range(2, MAX_BRANCHES + 1):
            branch = branch_name(path, n)
            lock = SessionLock.acquire(branch)
            if lock is None:
                continue
            if branch.exists():  # an earlier branch, not being written now: keep it whole
                lock.release()
                continue
            note = (f"{path.name} is open in {holder}: this chat saves to {branch.name}, a branch of the "
                    "session, so neither loses a turn.")
            self._hold(lock, AutosaveStatus(branch, note=note))
            warnings.warn(f"nbagent: {note} (Agent.load(path, if_open='read_only') saves nothing; "
                          "if_open='raise' refuses)", RuntimeWarning, stacklevel=5)
            return
        raise StorageError(f"{path} is open in {holder} and its {MAX_BRANCHES - 1} branch names are taken")

    def write(self, save: Callable[[Path], Path]) -> Path:
        """``save(path)`` into the claimed file, recording the outcome in ``status``."""
        if self._displaced and self.status.path is not None:  # the file was taken over: keep these turns apart
            self.claim(self.status.path, IfOpen.BRANCH, take_over=False)
        status = self.status
        if status.path is None:
            raise ConfigError("autosave has no file to write yet")
        if status.read_only:
            raise StorageError(f"not saved: {status.note}")
        try:
            written = save(status.path)
        except NbagentError as exc:
            self.status = replace(status, error=exc.message, failures=status.failures + 1,
                                  failing_since=status.failing_since or time.time())
            raise
        self.status = replace(status, error="", failures=0, failing_since=None)
        return written

    def save_state(self, state: ConversationState, settings: Any = None, frames: dict | None = None, *,
                   current: Callable[[], tuple[ConversationState, Any]] | None = None) -> Path:
        """:meth:`write` ``state`` (and ``settings``, ``frames``) through the journal writer;
        ``current()`` gives them afresh when the journal is folded in later."""
        return self.write(lambda path: self.journal.save(path, state, settings, frames, current=current))

    def compact(self) -> None:
        """Fold the journal into the file while this holder still holds it; a failure leaves the
        journal (every reader applies it) and says so in ``status``."""
        if self._lock is None or self._displaced or self.status.read_only:
            return
        try:
            self.journal.compact()
        except NbagentError as exc:
            self.status = replace(self.status, error=exc.message)

    def release(self) -> None:
        """Fold the journal into the file and let go of it (another writer may take it)."""
        self.compact()
        self.journal.forget()
        lock, self._lock = self._lock, None
        if lock is not None:
            if _HOLDERS.get(_key(lock.path)) is self:
                del _HOLDERS[_key(lock.path)]
            lock.release()
        self.status, self._displaced = AutosaveStatus(), False


@atexit.register
def _compact_all() -> None:
    """At the end of the process, fold every held file's journal into its file."""
    for holder in list(_HOLDERS.values()):
        try:
            holder.compact()
        except Exception:  # noqa: BLE001 - at exit a failure leaves the journal, which every reader applies
            pass
