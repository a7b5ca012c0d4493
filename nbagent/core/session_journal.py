"""The autosave journal: each turn appended beside the session file, not the whole file rewritten.

``Agent(save_to=...)`` saves after every turn. Rewriting the whole session file each time costs
in proportion to the history; instead :class:`JournalWriter` appends one line to
``.<name>.journal`` beside the file, holding only what changed since the last save (the new
steps, ledger rows and model-history messages, from the first that changed, plus the few small fields),
and ``fsync``-s it. The file itself is rewritten whole (atomically, which removes the journal) on
the first save, when the history changed somewhere a journal entry cannot say (a compaction, a
cleared conversation, a step edited far back), when the journal has grown past the file's size,
and when the writer lets the file go (``compact``).

The journal's first line names the file state it extends (``base``: the file's ``saved_at``):
a journal left over from a rewrite that crashed before removing it no longer matches and is
ignored (its turns are in the file). Every entry places its lists by absolute position, so reading
``file + journal`` (:func:`apply_journal`) gives the same document a whole save would have written.
A last line cut short by a crash is dropped with a warning; the entries before it load. An entry
that goes back before the last turn saved (no writer makes one) is dropped with a warning, never
applied: it would roll the session back.
"""

from __future__ import annotations

import bisect
import json
import os
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

from . import chat_session
from .chat_session import CHAT_SESSION_FORMAT, CHAT_SESSION_VERSION, read_small_file
from .conversation_state import ConversationEvent, ConversationState
from .errors import NbagentError, StorageError
from .messages import edit_count

__all__ = ["JOURNAL_FORMAT", "JournalWriter", "apply_journal", "journal_path", "read_journal"]

JOURNAL_FORMAT = "nbagent.journal"
JOURNAL_VERSION = 1
MIN_COMPACT_BYTES = 1 << 20  # a journal is folded into its file once past this and the file's size
_SMALL = ("conversation_id", "saved_at", "model", "provider", "max_history_size", "total_usage", "last_response",
          "settings")


def journal_path(path: str | os.PathLike) -> Path:
    """``.<name>.journal`` beside session file ``path`` (hidden, not a ``*.json``: never listed)."""
    folder, name = os.path.split(os.fspath(path))  # string work: read once per file of a listing
    return Path(os.path.join(folder, f".{name}.journal"))


# --- reading ------------------------------------------------------------------------------


def read_journal(path: str | os.PathLike, base_saved_at: Any) -> list[dict]:
    """The complete entries of ``path``'s journal that extend a file saved at ``base_saved_at``.

    No journal, or one written for another state of the file: ``[]``. A line that does not parse
    (a crash cut the last one short) ends the entries read, with a ``RuntimeWarning``. A journal
    nbagent did not write — a link, a FIFO, a device, a directory, one over the session size limit,
    or one owned by another user than the session file (someone else's file in a shared folder) —
    is ignored with a ``RuntimeWarning``: opened without blocking and checked before it is read.
    """
    folder, name = os.path.split(os.fspath(path))
    journal = os.path.join(folder, f".{name}.journal")
    if not os.path.lexists(journal):  # most files have none: cheaper than an open that fails
        return []
    why = ""
    try:
        data, info = read_small_file(journal, chat_session.MAX_FILE_BYTES, follow=False)
        if info.st_uid != os.stat(path).st_uid:  # (0 for both where there are no owners)
            why = f"it belongs to uid {info.st_uid}, not to the session file's owner"
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StorageError(f"cannot read {journal_path(path)}: {exc.strerror or exc}") from None
    except StorageError as exc:
        why = str(exc)
    if why:  # nbagent writes journals as plain files of the session's owner, never as links
        warnings.warn(f"nbagent: the journal beside {path} is ignored, the file is read without it: {why}",
                      RuntimeWarning, stacklevel=4)
        return []
    jpath = journal_path(path)
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: b"" unless the last write was cut short
    entries: list[dict] = []
    header: Any = None
    bad = ""
    for n, line in enumerate(lines):
        try:
            value = json.loads(line)
            if not isinstance(value, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError) as exc:
            bad = f"line {n + 1} is damaged ({exc!s:.80}); it and the {len(lines) - n - 1} after it were dropped"
            break
        if header is None:
            header = value
            if header.get("format") != JOURNAL_FORMAT or header.get("base") != base_saved_at:
                return []  # another file state's journal (a rewrite crashed before removing it)
            continue
        entries.append(value)
    if tail.strip() and not bad:
        bad = "its last entry was cut short (a crash while saving); it was dropped"
    if bad and header is not None:
        warnings.warn(f"nbagent: {jpath.name}: {bad}; the {len(entries)} complete entries before it are loaded",
                      RuntimeWarning, stacklevel=4)
    return entries


def apply_journal(doc: dict, entries: list[dict]) -> dict:
    """``doc`` (a session document) with the journal's ``entries`` applied, in place.

    Only the lists ``doc`` holds are patched: a head read without ``steps`` gets the ledger and
    the small fields. An entry that does not fit (a gap in the positions) ends the patching with
    a ``RuntimeWarning``: the entries before it stay applied.
    """
    if not entries:
        return doc
    has_steps = isinstance(doc.get("steps"), list)
    base = int(doc.get("trimmed") or 0)  # the absolute position of the list's first step
    steps: list = doc["steps"] if has_steps else []
    starts = [i + base for i in doc.get("turn_starts") or []]
    compactions = [i + base for i in doc.get("compactions") or []]
    trimmed = base
    end: int | None = base + len(steps) if has_steps else None  # where the steps end (absolute), when known
    for n, e in enumerate(entries):
        try:  # check the whole entry first: one that does not fit changes nothing
            turns = doc.get("turns")  # (a read of the steps alone has no ledger to patch)
            turns_at, new_turns = int(e["turns_at"]), _list(e["turns"])
            if isinstance(turns, list) and turns_at > len(turns):
                raise ValueError(f"its ledger starts at turn {turns_at} of {len(turns)}")
            steps_at, new_steps = int(e["steps_at"]), _list(e["steps"])
            new_starts, new_compactions, new_trimmed = _list(e["turn_starts"]), _list(e["compactions"]), int(e["trimmed"])
            if end is not None and not base <= steps_at <= end:
                raise ValueError(f"its steps start at {steps_at}, outside {base}..{end}")
            _check_forward(turns, turns_at, starts, steps_at)
            chat = doc.get("chat_session")
            if "chat_session" in e and "chat_session" in doc:  # (a head read has no model-history messages)
                chat = _chat_session(chat, e["chat_session"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            warnings.warn(f"nbagent: a journal entry does not fit its session ({exc!s:.120}); it and the "
                          f"{len(entries) - n - 1} after it were dropped", RuntimeWarning, stacklevel=3)
            break
        for key in _SMALL:
            if key in e:
                doc[key] = e[key]
        if isinstance(turns, list):
            del turns[turns_at:]
            turns.extend(new_turns)
        if has_steps:
            del steps[steps_at - base:]
            steps.extend(new_steps)
        end = steps_at + len(new_steps)
        del starts[bisect.bisect_left(starts, steps_at):]
        starts.extend(new_starts)
        del compactions[bisect.bisect_left(compactions, steps_at):]
        compactions.extend(new_compactions)
        trimmed = new_trimmed
        if "chat_session" in doc:
            if chat is not None and "new_messages" in chat:
                chat["messages"][chat.pop("messages_at"):] = chat.pop("new_messages")
            doc["chat_session"] = chat
    if has_steps:
        del steps[: trimmed - base]
    doc["trimmed"] = trimmed
    doc["turn_starts"] = [i - trimmed for i in starts[bisect.bisect_left(starts, trimmed):]]
    doc["compactions"] = [i - trimmed for i in compactions[bisect.bisect_left(compactions, trimmed):]]
    return doc


def _check_forward(turns: Any, turns_at: int, starts: list[int], steps_at: int) -> None:
    """A ``ValueError`` when an entry starts before the last turn saved (a writer's entry rewrites only
    that turn and what follows it): applying it would roll the session back."""
    if isinstance(turns, list) and turns_at < len(turns) - 1 or starts and steps_at < starts[-1]:
        raise ValueError("it goes back before the last turn saved: it would roll the session back")


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, not {type(value).__name__}")
    return value


def _chat_session(old: Any, patch: Any) -> Any:
    """The ChatSession dict ``patch`` makes of ``old``: ``old``'s messages list is reused (patched
    after the checks, in :func:`apply_journal`), never copied."""
    if patch is None:
        return None
    messages = old["messages"] if isinstance(old, dict) and isinstance(old.get("messages"), list) else []
    at = int(patch["messages_at"])
    if at > len(messages):
        raise ValueError(f"its model-history messages start at {at} of {len(messages)}")
    out = {k: v for k, v in patch.items() if k not in ("messages_at", "messages")}
    out["messages"] = messages
    out["messages_at"], out["new_messages"] = at, _list(patch["messages"])
    return out


# --- writing ------------------------------------------------------------------------------


@dataclass
class _Saved:
    """Where the file + journal stand: positions and the few newest values, to say what changed.

    Nothing here walks or copies the history: what an entry writes again (the last saved turn's
    steps and ledger row, the last two model-history messages) covers what changes in place at a turn's end,
    and an older step that changes is reported by :meth:`JournalWriter.note` (it forces a rewrite).
    """

    path: Path
    stat: tuple[int, int]  # the file's (mtime_ns, size) after its rewrite: anyone else's write shows
    base: float  # the file's saved_at: the journal's header names it
    file_bytes: int
    journal_bytes: int = 0
    trimmed: int = 0
    last_start: int = 0  # where the last saved turn's steps start (absolute)
    last_turn: int = -1  # that turn's number: a change to an older step needs a rewrite
    turns: int = 0
    compactions: int = 0  # compaction points kept: a new one rebuilt the model history
    chat: Any = None  # the ChatSession object and its messages list, by identity
    messages: Any = None
    message_count: int = 0
    window: tuple = ()  # the saved messages just before those an entry writes again
    message_changes: int | None = None  # the model history's count of changes other than growth
    chat_head: tuple | None = None
    edits: int = 0
    stale: bool = False  # something older than the last turn changed: rewrite the file


_WINDOW = 8  # model-history messages checked by identity before the two an entry writes again


class JournalWriter:
    """Saves one conversation to one session file: a journal line per save, the file rewritten
    when needed (see the module docstring). Used by autosave, which holds the file's lock."""

    def __init__(self, write_whole: Callable[..., tuple[Path, float, int]]) -> None:
        self._write_whole = write_whole  # session_file.save_document: (path, saved_at, size)
        self._saved: _Saved | None = None
        self._current: Callable[[], tuple[ConversationState, Any]] | None = None  # what compact() writes whole
        self.rewrites = 0  # whole-file writes, for tests and benchmarks
        self.appends = 0

    def note(self, event: ConversationEvent, payload: Any) -> None:
        """Hear the conversation's events: a step of an older turn updated (a manual tool result
        for an old call) or a cleared history makes the next save a rewrite."""
        saved = self._saved
        if saved is None:
            return
        if event is ConversationEvent.CLEARED or (
                event is ConversationEvent.STEP and getattr(payload, "turn", saved.last_turn) < saved.last_turn):
            saved.stale = True

    def save(self, path: Path, state: ConversationState, settings: Any = None, frames: dict | None = None, *,
             current: Callable[[], tuple[ConversationState, Any]] | None = None) -> Path:
        """Save ``state`` (with ``settings``, an AgentSettings) to ``path``: a journal line when it
        can say what changed, else the whole file. Returns ``path``. ``current`` gives the state and
        settings as they are then, for :meth:`compact` (the state itself is not kept: it holds copies
        of the whole history)."""
        self._current = current
        saved = self._saved
        entry = None
        if frames is None and saved is not None and saved.path == path and _stat(path) == saved.stat:
            entry = self._entry(saved, state, settings)
        if entry is None or saved is None or saved.journal_bytes > max(saved.file_bytes, MIN_COMPACT_BYTES):
            return self._rewrite(path, state, settings, frames)
        line = (json.dumps(entry, ensure_ascii=False, separators=(",", ":"), allow_nan=True) + "\n").encode()
        header = b""
        if not saved.journal_bytes:
            header = (json.dumps({"format": JOURNAL_FORMAT, "version": JOURNAL_VERSION, "base": saved.base})
                      + "\n").encode()
        try:
            _append(journal_path(path), header + line)
        except NbagentError:
            self._saved = None  # the journal may end in a torn line: the next save rewrites the file
            raise
        self.appends += 1
        saved.journal_bytes += len(header) + len(line)
        self._remember(saved, state)
        return path

    def compact(self) -> Path | None:
        """Fold the journal into the file (a whole rewrite), if there is one; returns the path."""
        saved, current = self._saved, self._current
        if saved is None or current is None or not saved.journal_bytes:
            return None
        return self._rewrite(saved.path, *current(), None)

    def forget(self) -> None:
        """Start afresh: the next save rewrites the whole file."""
        self._saved, self._current = None, None

    def _rewrite(self, path: Path, state: ConversationState, settings: Any, frames: dict | None) -> Path:
        self._saved = None
        written, doc_saved_at, size = self._write_whole(state, path, settings=settings, frames=frames)
        self.rewrites += 1
        saved = _Saved(path=path, stat=_stat(path), base=doc_saved_at, file_bytes=size)
        self._remember(saved, state)
        self._saved = saved
        return written

    @staticmethod
    def _remember(saved: _Saved, state: ConversationState) -> None:
        saved.trimmed = state.trimmed
        saved.last_start = state.trimmed + (state.turn_starts[-1] if state.turn_starts else 0)
        saved.last_turn = state.turns[-1].turn if state.turns else -1
        saved.turns = len(state.turns)
        saved.compactions = len(state.compactions)
        chat = state.chat_session
        saved.chat = chat
        saved.chat_head = None if chat is None else (chat.session_id, chat.system, chat.cache_strategy)
        saved.messages = None if chat is None else chat.messages
        saved.message_count = 0 if chat is None else len(chat.messages)
        at = max(0, saved.message_count - 2)
        saved.window = () if chat is None else tuple(chat.messages[max(0, at - _WINDOW): at])
        saved.message_changes = None if chat is None else getattr(chat.messages, "changes", None)
        saved.edits = edit_count()

    def _entry(self, saved: _Saved, state: ConversationState, settings: Any) -> dict | None:
        """The journal entry taking the saved state to ``state``; None when only a rewrite can."""
        if (saved.stale or state.trimmed < saved.trimmed or len(state.turns) < saved.turns
                or state.trimmed + len(state.steps) < saved.last_start or edit_count() != saved.edits
                or len(state.compactions) != saved.compactions):
            return None  # a cleared or rebuilt history, a message edited in place, a compaction
        at = max(saved.last_start, state.trimmed)  # the last saved turn and what came after it
        at_rel = at - state.trimmed
        turns_at = max(0, saved.turns - 1)
        entry: dict[str, Any] = {
            "conversation_id": state.conversation_id,
            "saved_at": _now(),
            "model": state.turns[-1].model if state.turns else "",
            "provider": state.turns[-1].provider if state.turns else "",
            "max_history_size": state.max_history_size,
            "total_usage": state.total_usage.to_dict(),
            "last_response": state.last_response,
            "settings": None if settings is None else settings.to_dict(),
            "turns_at": turns_at,
            "turns": [t.to_dict(compact=True) for t in state.turns[turns_at:]],
            "steps_at": at,
            "steps": [s.to_dict(compact=True) for s in state.steps[at_rel:]],
            "trimmed": state.trimmed,
            "turn_starts": _absolute_from(state.turn_starts, at_rel, state.trimmed),
            "compactions": _absolute_from(state.compactions, at_rel, state.trimmed),
        }
        chat = state.chat_session
        if chat is None:
            if saved.chat is not None:
                entry["chat_session"] = None
            return entry
        if saved.chat is not None and (chat is not saved.chat or chat.messages is not saved.messages
                                       or getattr(chat.messages, "changes", None) != saved.message_changes):
            return None  # another model history (switching models rewrites it), or a message replaced in it
        m_at = max(0, saved.message_count - 2)  # a user message may have grown in place
        if saved.chat is None or (chat.session_id, chat.system, chat.cache_strategy) != saved.chat_head:
            m_at = 0
        elif len(chat.messages) < m_at or tuple(chat.messages[max(0, m_at - _WINDOW): m_at]) != saved.window:
            return None  # messages before the last two changed: rewrite
        entry["chat_session"] = {
            "format": CHAT_SESSION_FORMAT, "version": CHAT_SESSION_VERSION, "session_id": chat.session_id,
            "system": chat.system, "cache_strategy": chat.cache_strategy,
            "messages_at": m_at, "messages": [m.to_dict() for m in chat.messages[m_at:]],
        }
        return entry


def _absolute_from(positions: Sequence[int], at: int, trimmed: int) -> list[int]:
    """The ``positions`` (into the kept steps) from ``at`` on, as absolute positions."""
    return [i + trimmed for i in positions[bisect.bisect_left(positions, at):]]


def _stat(path: Path) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def _now() -> float:
    import time

    return time.time()


_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a link planted at the journal's name is refused, never written through
_NON_BLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO without a reader fails at once, never waits


def _append(path: Path, data: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NO_FOLLOW | _NON_BLOCK, 0o644)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or a device planted at its name
                raise StorageError(f"cannot write {path}: it is not a regular file")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
