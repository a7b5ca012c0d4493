"""Whole-session files: steps, the turn ledger and the ChatSession in one JSON.

This module is the one reader and writer of session files (``Conversation.save``
/ ``load``, ``Agent(save_to=...)``, ``nbagent.load_sessions`` and ``list_sessions`` all come
here); every read applies the autosave journal beside the file, if any (``session_journal.py``). Version 3 adds the agent's ``settings`` (:class:`AgentSettings`, or null) before the
turn ledger and stops storing each step's ``cascade_id`` (the conversation's id),
``is_complete_response`` (derived on load) and ``trajectory_id`` (unused); version 2 stores the typed
step fields; version 1 files (``Step.metadata`` dicts,
cache writes beside the usage) are migrated on read. Older versions stay readable.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import re
import time
from dataclasses import dataclass
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator, Sequence

from .chat_session import ChatSession, atomic_write_json, open_session_fd
from .conversation_state import DEFAULT_MAX_HISTORY, ConversationState
from .errors import NbagentError, StorageError
from .ledger import TurnRecord
from .session_journal import apply_journal, journal_path, read_journal
from .session_settings import AgentSettings
from .steps import Step, UsageMetadata
from .turn_columns import NotPlain, TurnColumns, decode_turns, decode_turns_arrow

SESSION_FORMAT = "nbagent.session"
SESSION_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)


def save_conversation(state: ConversationState, path: str | Path, *, frames: dict | None = None,
                      settings: AgentSettings | None = None) -> Path:
    """Write ``state`` to ``path`` atomically. Holds no keys: history, usage and ``settings``.

    ``frames`` (the analysis layer's JSON export of the DataFrames) is embedded when given.
    """
    return save_document(state, path, frames=frames, settings=settings)[0]


def save_document(state: ConversationState, path: str | Path, *, frames: dict | None = None,
                  settings: AgentSettings | None = None) -> tuple[Path, float, int]:
    """:func:`save_conversation`, returning the path, the document's ``saved_at`` and its size in
    bytes. A journal beside the file (``session_journal.py``) is folded in, so it is removed."""
    with gc_paused():
        doc = _document(state, frames, settings)
        written = atomic_write_json(path, doc)
    try:
        size = written.stat().st_size
        journal_path(written).unlink(missing_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot remove the journal of {written}: {exc.strerror or exc}") from None
    return written, doc["saved_at"], size


def _document(state: ConversationState, frames: dict | None, settings: AgentSettings | None = None) -> dict:
    turns = state.turns
    # the turn ledger comes before the steps: read_session_head stops reading there
    doc: dict[str, Any] = {
        "format": SESSION_FORMAT,
        "version": SESSION_VERSION,
        "conversation_id": state.conversation_id,
        "saved_at": time.time(),
        "model": turns[-1].model if turns else "",
        "provider": turns[-1].provider if turns else "",
        "max_history_size": state.max_history_size,
        "trimmed": state.trimmed,
        "turn_starts": list(state.turn_starts),
        "compactions": list(state.compactions),
        "total_usage": state.total_usage.to_dict(),
        "last_response": state.last_response,
        "settings": None if settings is None else settings.to_dict(),
        "turns": [t.to_dict(compact=True) for t in turns],
        "steps": [s.to_dict(compact=True) for s in state.steps],
        "chat_session": None if state.chat_session is None else state.chat_session.to_dict(),
    }
    if frames is not None:
        doc["frames"] = frames
    return doc


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building or reading thousands of objects (it
    would rescan every live object several times over); restores its previous state."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_session_document(path: str | Path) -> dict:
    """Read a session file and check its format and version (``StorageError``, kind ``io``).

    A top-level key written twice (two ``"turns"`` ledgers: JSON would keep the last one silently)
    is refused too: nbagent writes each key once.
    """
    return _journaled(_checked(read_head(path, None), path), path)


def _journaled(doc: dict, path: str | Path) -> dict:
    """``doc`` with the turns its autosave journal holds since the file was written (if any)."""
    entries = read_journal(path, doc.get("saved_at"))
    return apply_journal(doc, entries) if entries else doc


def _checked(doc: Any, path: str | Path) -> dict:
    if not isinstance(doc, dict) or doc.get("format") != SESSION_FORMAT:
        raise StorageError(f"{path} is not an nbagent session file (no \"format\": \"{SESSION_FORMAT}\")")
    if doc.get("version") not in READABLE_VERSIONS:
        raise StorageError(
            f"{path} has session version {doc.get('version')!r}; this nbagent reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}",
        )
    if doc["version"] == 1:
        try:
            doc = migrate_v1(doc)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
            raise StorageError(f"{path} is damaged: {exc!s:.300}") from None
    return doc


def _skip_space(text: str, i: int) -> int:
    """The index of the first character at or after ``i`` that is not white space."""
    m = _SPACE.match(text, i)
    return m.end() if m else i


def _ledger(doc: dict, path: str | Path) -> list:
    turns = doc.get("turns")
    if not isinstance(turns, list):
        raise StorageError(f"session file {path} has no turn ledger (\"turns\")")
    return turns


def _conversation_id(doc: dict, path: str | Path) -> str:
    return str(doc.get("conversation_id") or Path(path).stem)


def _turn_records(turns: list, path: str | Path) -> list[TurnRecord]:
    try:
        with gc_paused():
            return [TurnRecord.from_dict(t) for t in turns]
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
        raise StorageError(f"session file {path} has a corrupt turn ledger: {exc!s:.300}") from None


@dataclass
class SessionHead:
    """What a session file says before its steps: enough to list it or resume its settings."""

    path: Path
    conversation_id: str
    saved_at: float | None
    settings: AgentSettings | None  # None: saved by ``Conversation.save`` or before version 3
    turns: list[TurnRecord]
    model: str = ""  # "provider:model" of the last turn (version 2 files have no settings)

    @property
    def user(self) -> str:
        return self.settings.user if self.settings is not None else ""


def read_session_head(path: str | Path) -> SessionHead:
    """The settings and the turn ledger of a saved session, without parsing its steps."""
    ledger = read_session_ledger(path)
    return SessionHead(ledger.path, ledger.conversation_id, ledger.saved_at, ledger.settings,
                       _turn_records(ledger.turns, path), ledger.model)


@dataclass
class SessionLedger:
    """A :class:`SessionHead` whose turn ledger is still the parsed JSON (the journal's turns
    applied): :func:`ledger_columns` decodes the ledgers of many sessions at once."""

    path: Path
    conversation_id: str
    saved_at: float | None
    settings: AgentSettings | None
    turns: list  # the ledger's dicts as parsed
    model: str = ""

    @property
    def user(self) -> str:
        return self.settings.user if self.settings is not None else ""


def read_session_ledger(path: str | Path) -> SessionLedger:
    """The settings and the undecoded turn ledger of a saved session, without parsing its steps."""
    doc = _journaled(_checked(read_head(path, _TURN_KEYS), path), path)
    turns = _ledger(doc, path)
    try:
        raw = doc.get("settings")
        settings = None if raw is None else AgentSettings.from_dict(raw)
        saved = doc.get("saved_at")
        saved_at = None if saved is None else float(saved)
    except (TypeError, ValueError, OverflowError) as exc:
        raise StorageError(f"session file {path} has corrupt settings: {exc!s:.300}") from None
    model = settings.model if settings is not None and settings.model else _model_of(doc)
    return SessionLedger(path if isinstance(path, Path) else Path(path), _conversation_id(doc, path), saved_at,
                         settings, turns, model)


def ledger_columns(ledgers: Sequence[SessionLedger]) -> TurnColumns:
    """The turns of ``ledgers``, one after the other, as columns (``turn_columns.py``): decoded at
    once, or file by file when some ledger holds values to read as ``TurnRecord.from_dict`` does
    (``NbagentError(kind="io")`` naming the first file whose ledger is damaged)."""
    with gc_paused():
        try:
            return decode_turns([t for ledger in ledgers for t in ledger.turns])
        except NotPlain:
            pass
        parts = []
        for ledger in ledgers:
            try:
                parts.append(decode_turns(ledger.turns))
            except NotPlain:
                parts.append(TurnColumns.of_records(_turn_records(ledger.turns, ledger.path)))
        return TurnColumns.concat(parts)


def ledger_arrays(ledgers: Sequence[SessionLedger]) -> dict[str, Any] | None:
    """The turns of ``ledgers`` as Arrow arrays (``turn_columns.decode_turns_arrow``), decoded at
    once; None when some ledger holds values to read as ``TurnRecord.from_dict`` does (then
    :func:`ledger_columns` reads them, and names a damaged file)."""
    with gc_paused():
        try:
            return decode_turns_arrow([t for ledger in ledgers for t in ledger.turns])
        except NotPlain:
            return None


def _model_of(doc: dict) -> str:
    model, provider = str(doc.get("model") or ""), str(doc.get("provider") or "")
    return f"{provider}:{model}" if provider and model else model


def read_steps(path: str | Path) -> tuple[str, list[Step]]:
    """The conversation id and the steps of a saved session, without its ChatSession."""
    doc = _journaled(_checked(read_head(path, _STEP_KEYS), path), path)
    steps = doc.get("steps")
    try:
        if not isinstance(steps, list):
            raise TypeError("no \"steps\" list")
        return str(doc.get("conversation_id") or Path(path).stem), _step_list(doc, steps)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
        raise StorageError(f"{path} is damaged: {exc!s:.300}") from None


_TURN_KEYS = frozenset(("format", "version", "conversation_id", "saved_at", "turns"))
_STEP_KEYS = frozenset(("format", "version", "conversation_id", "saved_at", "trimmed", "steps"))
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def read_head(path: str | Path, keys: frozenset[str] | None) -> dict:
    """The top-level entries of a JSON object file up to the last of ``keys`` (all of them if
    some are absent, or ``keys`` is None); ``NbagentError(kind="io")`` naming the file when it is
    not one, or when a key it parsed comes twice.

    Reads the file's first ``_HEAD_BYTES`` and its end (it must close the object) and parses
    those entries; when they run past that prefix it reads eight times as much, up to the whole file.
    """
    try:
        fd, length = open_session_fd(path)
        try:
            return _head_of(fd, length, keys)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise StorageError(f"no such session file: {path}") from None
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except DuplicateKey as exc:
        raise StorageError(f"{path} has the key {json.dumps(exc.key)} twice (a damaged or edited file: nbagent writes "
                           "each key once, and JSON would keep the last one silently)") from None
    except (ValueError, IndexError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise StorageError(f"{path} is not valid JSON (corrupt or truncated): {exc}") from None


def _head_of(fd: int, length: int, keys: frozenset[str] | None) -> dict:
    """:func:`read_head` of an open file of ``length`` bytes (read by descriptor: no file object)."""
    size = _HEAD_BYTES if keys is not None else 0  # 0: the whole file at once
    data = _read_at(fd, 0, size)
    end = _read_at(fd, max(length - 64, 0), 64) if size and len(data) == size else data
    if not end.rstrip(b" \t\n\r").endswith(b"}"):
        raise ValueError("the file does not end with '}' (cut short?)")
    head, data = _head_in(fd, data, size, keys)
    if keys is not None and "turns" in keys:  # the ledger read; the rest of the file may hold another
        _one_ledger(data + _read_at(fd, len(data), 0) if len(data) < length else data)
    return head


def _head_in(fd: int, data: bytes, size: int, keys: frozenset[str] | None) -> tuple[dict, bytes]:
    """The head and the file's start read for it."""
    if keys is not None and "turns" in keys and data.isascii():  # ASCII: the bytes are the text, valid UTF-8
        head = _ascii_head(data, keys)
        if head is not None:
            return head, data
    while size and len(data) == size:
        try:  # the prefix up to its last ',' (never inside a multi-byte character)
            return _object_head(data[: data.rfind(b",") + 1].decode("utf-8"), keys, prefix=True), data
        except (ValueError, IndexError):  # the entries run past the prefix: read more
            data += _read_at(fd, size, size * 7)
            size *= 8
    return _object_head(data.decode("utf-8"), keys), data


def _one_ledger(data: bytes) -> None:
    """:class:`DuplicateKey` when the file ``data`` has a second top-level ``turns`` key past the ledger read
    (``Conversation.load`` refuses such a file; a head read alone would never see it). The file is
    searched, not parsed: a key ``turns`` is written ``"turns"`` or with ``\\u`` escapes of its
    letters (``\\u006…`` / ``\\u007…``, which nbagent never writes); only when ``"turns"`` comes
    twice or a letter is escaped is the whole file parsed, to tell a nested ``turns`` from a second ledger."""
    first = data.find(b'"turns"')
    if data.find(b'"turns"', first + 1) < 0 and all(data.find(n) < 0 for n in _ESCAPED_LETTERS):
        return
    _unique_head(data.decode("utf-8", "replace"))


_ESCAPED_LETTERS = (b"\\u006", b"\\u007")  # "\\u0061"…"\\u007a": letters written as escapes


def _read_at(fd: int, offset: int, size: int) -> bytes:
    """``size`` bytes of an open file from ``offset`` (fewer at its end; 0: up to its end)."""
    os.lseek(fd, offset, os.SEEK_SET)
    parts: list[bytes] = []
    left = size if size > 0 else -1
    while left:
        part = os.read(fd, left if left > 0 else 1 << 20)
        if not part:
            break
        parts.append(part)
        left -= len(part) if left > 0 else 0
    return b"".join(parts)


_HEAD_BYTES = 1 << 14  # a 30-turn ledger fits (a larger one is read in a second read, of 128 KB)


class DuplicateKey(ValueError):
    """A top-level key came twice in one JSON object."""

    def __init__(self, key: str) -> None:
        super().__init__(f"the key {key!r} comes twice")
        self.key = key


def _object_head(text: str, keys: frozenset[str] | None, prefix: bool = False) -> dict:
    """Parse ``{"key": value, ...`` entry by entry; stop once every key of ``keys`` is in (``None``:
    parse to the object's end, and nothing but white space may follow it). ``prefix``: ``text`` is
    the start of a file, given up on as soon as the ledger does not end in it.

    Raises :class:`DuplicateKey` for a key seen twice, ValueError / IndexError when the text ends
    first (or is not an object's start).
    """
    if keys is not None and "turns" in keys:
        head = _head_before_ledger(text, keys, prefix)
        if head is not None:
            return head
    decode = _DECODER.raw_decode
    i = _skip_space(text, 0)
    if text[i] != "{":
        return _DECODER.decode(text)  # not an object: whatever it is, the caller refuses it
    out: dict[str, Any] = {}
    i = _skip_space(text, i + 1)
    if text[i] == "}":
        return _ended(text, i, out) if keys is None else out
    while True:
        m = _SIMPLE_KEY.match(text, i)
        if m is not None:  # a key without escapes, and its ':'
            key, i = m.group(1), m.end()
        else:
            key, i = decode(text, i)
            i = _skip_space(text, i)
            if not isinstance(key, str) or text[i] != ":":
                raise ValueError(f"expected a key and ':' at character {i}")
            i = _skip_space(text, i + 1)
        value, i = _ledger_value(text, i, prefix) if key == "turns" else decode(text, i)
        m = _AFTER_VALUE.match(text, i)
        if m is None:  # also proves a number was not cut by the end of a prefix
            raise ValueError(f"expected ',' or '}}' at character {_skip_space(text, i)}")
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
        if m.group(1) == "}":
            return _ended(text, m.start(1), out) if keys is None else out
        if keys is not None and keys.issubset(out):
            return out
        i = m.end()


def _head_before_ledger(text: str, keys: frozenset[str], prefix: bool) -> dict | None:
    """The entries up to and with the ledger in two parses, for a file laid out as this version
    writes it (``{...,"turns":[...],"steps":...``); None when it is not (then they are parsed one
    by one). What comes before ``,"turns":`` parses as one object only when that is the top
    level's key (inside a string the quotes would be escaped; a nested ``turns`` leaves a bracket
    open); only the top level's keys must be unique, as in the entry-by-entry parse."""
    cut = text.find(_LEDGER_KEY)
    if cut < 0:
        return None
    head = _unique_head(text[:cut] + "}")
    if head is None:
        return None
    if "turns" in head:
        raise DuplicateKey("turns")
    head["turns"], i = _ledger_value(text, cut + len(_LEDGER_KEY), prefix)
    if _AFTER_VALUE.match(text, i) is None:
        raise ValueError(f"expected ',' or '}}' at character {_skip_space(text, i)}")
    return head if keys.issubset(head) else None


def _unique_head(text: str | bytes) -> dict | None:
    """``text`` (a file's head closed with ``}``) parsed as an object whose keys are each there
    once (:class:`DuplicateKey` for the first one twice; nested objects keep the last, as JSON
    does); None when it is not an object."""
    if isinstance(text, bytes) and (head := _head_as_written(text)) is not None:
        return head
    twice: list[str | None] = []  # per object closed, in order: its first key seen twice

    def unique(pairs: list[tuple[str, Any]]) -> dict:
        obj = dict(pairs)
        twice.append(None if len(obj) == len(pairs) else _twice(pairs))
        return obj
    try:
        head = json.loads(text, object_pairs_hook=unique)
    except (ValueError, RecursionError):
        return None
    if not isinstance(head, dict):
        return None
    if twice and twice[-1] is not None:  # the top level closes last
        raise DuplicateKey(twice[-1])
    return head


def _head_as_written(text: bytes) -> dict | None:
    """``text`` parsed by orjson when serializing the result gives ``text`` back, byte for byte
    (as this version writes a head: compact, not ASCII-escaped): then no key comes twice, at any
    level (orjson keeps one of each; its output would be shorter), and the parse is json's.
    None otherwise, or without orjson."""
    loads, dumps = fast_loads(), fast_dumps()
    if loads is None or dumps is None:
        return None
    try:
        head = loads(text)
    except ValueError:  # orjson.JSONDecodeError
        return None
    return head if isinstance(head, dict) and dumps(head) == text else None


def _ascii_head(data: bytes, keys: frozenset[str]) -> dict | None:
    """:func:`_head_before_ledger` of a file start that is ASCII (as text it holds the same
    characters at the same places), parsed from the bytes without decoding them: the head, and a
    ledger orjson parses up to the steps' key. None for anything else (the text is parsed then,
    and says what is wrong)."""
    loads = fast_loads()
    cut = data.find(_LEDGER_KEY_BYTES)
    start = cut + len(_LEDGER_KEY_BYTES)
    end = data.find(_STEPS_NEXT_BYTES, start) if cut >= 0 else -1
    if loads is None or end < 0:
        return None
    head = _unique_head(data[:cut] + b"}")
    if head is None or "turns" in head:  # the key twice: the text's parse says so
        return None
    try:
        head["turns"] = loads(data[start:end])
    except ValueError:  # orjson.JSONDecodeError: json parses it from the text
        return None
    return head if keys.issubset(head) else None


def _twice(pairs: list[tuple[str, Any]]) -> str | None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None


_LEDGER_KEY = ',"turns":'
_SIMPLE_KEY = re.compile(r'[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')
_AFTER_VALUE = re.compile(r"[ \t\n\r]*([,}])[ \t\n\r]*")
_STEPS_NEXT = ',"steps":'  # what this version writes after the ledger
_LEDGER_KEY_BYTES, _STEPS_NEXT_BYTES = _LEDGER_KEY.encode(), _STEPS_NEXT.encode()


def _ledger_value(text: str, i: int, prefix: bool) -> tuple[Any, int]:
    """The turn ledger starting at ``i`` and the index after it: parsed by orjson when installed
    (several times faster than ``json``) if it ends where the steps begin, else by ``json``. In a
    ``prefix`` of the file without the steps' start, ValueError at once (read more first).

    orjson refuses what ``json`` would parse differently or not at all (NaN, integers past 64
    bits, lone surrogates) and any text after the value, so a wrong guess of the end only falls
    back to ``json``: the result is what ``json`` would give.
    """
    end = text.find(_STEPS_NEXT, i)
    if end < 0 and prefix:
        raise ValueError("the ledger runs past the prefix read")
    loads = fast_loads()
    if loads is not None and end >= 0:
        try:
            return loads(text[i:end]), end
        except ValueError:  # orjson.JSONDecodeError
            pass
    return _DECODER.raw_decode(text, i)


@functools.cache
def fast_dumps() -> Callable[[Any], bytes] | None:
    """``orjson.dumps`` when orjson is installed (the ``frames`` extra), else None."""
    try:
        import orjson
    except ImportError:
        return None
    return orjson.dumps


@functools.cache
def fast_loads() -> Callable[[str | bytes], Any] | None:
    """``orjson.loads`` when orjson is installed (the ``frames`` extra), else None."""
    try:
        import orjson
    except ImportError:
        return None
    return orjson.loads


def _ended(text: str, close: int, out: dict) -> dict:
    """``out``, once nothing but white space follows the object's closing brace at ``close``."""
    end = _skip_space(text, close + 1)
    if end != len(text):
        raise ValueError(f"extra data after the object at character {end}")
    return out


def read_session(path: str | Path) -> ConversationState:
    """A saved session as a ConversationState (``NbagentError(kind="io")`` when unusable)."""
    with gc_paused():
        return _state(read_session_document(path), path)


def _state(doc: dict, path: str | Path) -> ConversationState:
    try:
        chat = doc.get("chat_session")
        return ConversationState(
            conversation_id=str(doc.get("conversation_id") or ""),
            max_history_size=_history_size(doc.get("max_history_size", DEFAULT_MAX_HISTORY)),
            steps=_step_list(doc, doc["steps"]),
            trimmed=int(doc.get("trimmed", 0)),
            turn_starts=[int(i) for i in doc.get("turn_starts", [])],
            compactions=[int(i) for i in doc.get("compactions", [])],
            turns=[TurnRecord.from_dict(t) for t in doc["turns"]],
            total_usage=UsageMetadata.from_dict(doc.get("total_usage")) or UsageMetadata(),
            last_response=str(doc.get("last_response") or ""),
            chat_session=ChatSession.from_dict(chat, source=str(path)) if chat else None,
        )
    except NbagentError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as exc:
        raise StorageError(f"{path} is damaged: {exc!r:.300}") from None


def _history_size(value: Any) -> int:
    size = int(value)
    if size < 0:
        raise ValueError(f"max_history_size must be >= 0, got {size}")
    return size


def _step_list(doc: dict, raw: list) -> list[Step]:
    """The steps of a session document. From version 3 on a step stores no ``cascade_id`` and
    no ``is_complete_response``: they are derived here (older files keep what they stored)."""
    steps = [Step.from_dict(s) for s in raw]
    if doc.get("version") not in (1, 2):
        conversation_id = str(doc.get("conversation_id") or "")
        for step, d in zip(steps, raw):
            if "cascade_id" not in d:  # a file written before format 3 dropped the key keeps its value
                step.derive(conversation_id)
    return steps


# --- version 1 ---------------------------------------------------------------------------

_V1_STEP_KEYS = {"finish_reason": "finish_reason", "model": "model", "approval": "approval",
                 "duration": "run_seconds", "preparing_tool": "preparing_tool", "raw_usage": "raw_usage"}


def migrate_v1(doc: dict) -> dict:
    """A version 1 document in version 2 shape: step metadata becomes typed fields."""
    doc = dict(doc, version=2)
    steps = doc.get("steps")
    if isinstance(steps, list):
        doc["steps"] = [_step_v1(s) if isinstance(s, dict) else s for s in steps]
    turns = doc.get("turns")
    if isinstance(turns, list):
        writes = sum(int(t.get("cache_write_tokens") or 0) for t in turns if isinstance(t, dict))
        doc["turns"] = [_turn_v1(t) if isinstance(t, dict) else t for t in turns]
        if writes and isinstance(doc.get("total_usage"), dict):
            doc["total_usage"] = dict(doc["total_usage"], cache_write_token_count=writes)
    return doc


def _step_v1(d: dict) -> dict:
    d = dict(d)
    extra = d.pop("metadata", None) or {}
    if not isinstance(extra, dict):
        raise TypeError("a version 1 step's metadata is not an object")
    for old, new in _V1_STEP_KEYS.items():
        if extra.get(old) is not None:
            d[new] = extra[old]
    if "tokens_before" in extra:
        d["compaction"] = {"tokens_before": int(extra["tokens_before"]),
                           "tokens_after": int(extra.get("tokens_after") or 0),
                           "budget": int(extra.get("budget") or 0)}
    if extra.get("cache_write_tokens") and isinstance(d.get("usage_metadata"), dict):
        d["usage_metadata"] = dict(d["usage_metadata"], cache_write_token_count=int(extra["cache_write_tokens"]))
    return d


def _turn_v1(d: dict) -> dict:
    d = dict(d)
    writes = d.pop("cache_write_tokens", 0)
    if writes and isinstance(d.get("usage"), dict):
        d["usage"] = dict(d["usage"], cache_write_token_count=int(writes))
    return d


# --- names of autosaved files ----------------------------------------------------------

_SLUG_DROP = re.compile(r"[^a-z0-9]+")


def session_file_name(started_at: float, title: str, conversation_id: str) -> str:
    """``2026-12-01-explain-monads-1a2b3c4d.json``: the local date, a slug of the title and the
    conversation id's first 8 characters (two kernels saving into one folder never collide)."""
    date = time.strftime("%Y-%m-%d", time.localtime(started_at or time.time()))
    slug = _SLUG_DROP.sub("-", title.lower())[:40].strip("-") or "chat"
    short = _SLUG_DROP.sub("", conversation_id.lower())[:8] or "session"
    return f"{date}-{slug}-{short}.json"
