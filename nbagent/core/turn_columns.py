"""Turn ledgers decoded into columns: one list per :class:`TurnRecord` field, no object per turn.

``nbagent.load_sessions`` and ``to_parquet`` read the ledgers of thousands of saved sessions;
building a ``TurnRecord`` and a ``UsageMetadata`` for each of their turns cost more than reading the
files. :func:`decode_turns` reads the parsed JSON dicts field by field instead, accepting only the
values this version writes (an int count, a float time, a known enum value...): each field is one
pass over the list plus a type check of the whole column. Anything else (a hand-edited count
``"3"``, a bool, an unknown status) raises :class:`NotPlain`, and the caller decodes those dicts
with ``TurnRecord.from_dict``, which accepts or refuses them exactly as it always did
(:meth:`TurnColumns.of_records`): the columns are always what the records would hold.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from itertools import repeat
from typing import Any
from collections.abc import Sequence

from .ledger import TurnRecord
from .steps import FinishReason, PrefixChange, TurnStatus
from .usage import MAX_COUNT, TOKEN_COUNTS

__all__ = ["NotPlain", "TurnColumns", "decode_turns"]

USAGE_FIELDS = tuple(t.field for t in TOKEN_COUNTS)


class NotPlain(ValueError):
    """A ledger holds a value this version does not write as such: decode it with ``TurnRecord.from_dict``."""


@dataclass
class TurnColumns:
    """The fields of many turn records as lists (``usage``: each token count by its field name),
    with the values ``TurnRecord.from_dict`` gives them."""

    turn: list[int]
    prompt: list[str]
    model: list[str]
    provider: list[str]
    started_at: list[float]
    finished_at: list[float | None]
    first_token_at: list[float | None]
    usage: dict[str, list[int]]
    model_calls: list[int]
    tool_calls: list[int]
    finish_reason: list[FinishReason | None]
    status: list[TurnStatus]
    error: list[str]
    http_code: list[int]
    prefix_change: list[PrefixChange | None]
    context_tokens: list[int]
    context_window: list[int | None]

    def __len__(self) -> int:
        return len(self.turn)

    def values(self, name: str) -> list:
        """The column of a record attribute: ``"prompt"``, ``"usage.prompt_token_count"``..."""
        if name.startswith("usage."):
            return self.usage[name[6:]]
        if name in _LIST_FIELDS:
            return getattr(self, name)
        raise KeyError(f"a turn record has no column {name!r}")

    @classmethod
    def of_records(cls, records: Sequence[TurnRecord]) -> TurnColumns:
        """The columns of records already built."""
        usages = [r.usage for r in records]
        values = {name: [getattr(r, name) for r in records] for name in _LIST_FIELDS}
        return cls(usage={f: [getattr(u, f) for u in usages] for f in USAGE_FIELDS}, **values)

    @classmethod
    def concat(cls, parts: Sequence[TurnColumns]) -> TurnColumns:
        """The columns of ``parts`` one after the other."""
        values: dict[str, list] = {name: [] for name in _LIST_FIELDS}
        usage: dict[str, list[int]] = {f: [] for f in USAGE_FIELDS}
        for part in parts:
            for name, column in values.items():
                column += getattr(part, name)
            for f, column in usage.items():
                column += part.usage[f]
        return cls(usage=usage, **values)


_LIST_FIELDS = tuple(f.name for f in fields(TurnColumns) if f.name != "usage")
_NONE = type(None)
_INT = frozenset((int,))
_NUMBER = frozenset((int, float))
_TEXT = frozenset((str,))
_DICT = frozenset((dict,))
_USAGE = frozenset((dict, _NONE))


def _members(enum_cls: type[Enum], none: Any = None) -> dict:
    table: dict[Any, Any] = {m.value: m for m in enum_cls}
    table[None] = none
    return table


_FINISH = _members(FinishReason)
_CHANGE = _members(PrefixChange)
_STATUS = _members(TurnStatus, TurnStatus.DONE)  # a ledger without a status: the turn ended
_STATUS[""] = TurnStatus.DONE


def decode_turns(turns: list) -> TurnColumns:
    """The columns of a list of turn dicts as this version writes them (see the module
    docstring); :class:`NotPlain` for anything else."""
    if not turns:
        return TurnColumns.of_records([])
    if not set(map(type, turns)) <= _DICT:
        raise NotPlain("a turn is not a JSON object")
    usages = _column(turns, "usage", _EMPTY)
    if not set(map(type, usages)) <= _DICT:
        if not set(map(type, usages)) <= _USAGE:
            raise NotPlain("a usage is not an object")
        usages = [_EMPTY if u is None else u for u in usages]
    return TurnColumns(
        turn=_counts(_column(turns, "turn", None), missing=False),
        prompt=_texts(_column(turns, "prompt", "")),
        model=_texts(_column(turns, "model", "")),
        provider=_texts(_column(turns, "provider", "")),
        started_at=_floats(_column(turns, "started_at", 0.0)),
        finished_at=_floats(_column(turns, "finished_at", None), optional=True),
        first_token_at=_floats(_column(turns, "first_token_at", None), optional=True),
        usage={f: _counts(_column(usages, f, 0)) for f in USAGE_FIELDS},
        model_calls=_counts(_column(turns, "model_calls", 0)),
        tool_calls=_counts(_column(turns, "tool_calls", 0)),
        finish_reason=_enums(_FINISH, _column(turns, "finish_reason", None)),
        status=_enums(_STATUS, _column(turns, "status", None)),
        error=_texts(_column(turns, "error", "")),
        http_code=_counts(_column(turns, "http_code", 0)),
        prefix_change=_enums(_CHANGE, _column(turns, "prefix_change", None)),
        context_tokens=_counts(_column(turns, "context_tokens", 0)),
        context_window=_counts(_column(turns, "context_window", None), optional=True),
    )


_EMPTY: dict = {}


def _column(dicts: list, key: str, default: Any) -> list:
    """``d.get(key, default)`` of every dict, in one pass at C speed (no loop in Python)."""
    return list(map(dict.get, dicts, repeat(key), repeat(default)))


def _counts(values: list, optional: bool = False, missing: bool = True) -> list:
    """Ints from 0 to MAX_COUNT as ``usage.count`` reads them: null as 0 when ``missing``
    (``optional``: null stays None)."""
    kinds = set(map(type, values))
    present = values
    if _NONE in kinds:
        if optional:
            present = [v for v in values if v is not None]
        elif missing:
            values = present = [0 if v is None else v for v in values]
        else:
            raise NotPlain("a count is missing")
        kinds.discard(_NONE)
    if not kinds <= _INT or (present and not (min(present) >= 0 and max(present) <= MAX_COUNT)):
        raise NotPlain("a count is not an int in range")
    return values


def _texts(values: list) -> list:
    """Strings, null as ""."""
    kinds = set(map(type, values))
    if _NONE in kinds:
        values = ["" if v is None else v for v in values]
        kinds.discard(_NONE)
    if not kinds <= _TEXT:
        raise NotPlain("a text is not a string")
    return values


def _floats(values: list, optional: bool = False) -> list:
    """Floats (``optional``: or None; else null is 0.0); ints become floats, as ``float()`` makes them."""
    kinds = set(map(type, values))
    if _NONE in kinds and not optional:
        values = [0.0 if v is None else v for v in values]
    kinds.discard(_NONE)
    if not kinds <= _NUMBER:
        raise NotPlain("a time is not a number")
    if int in kinds:
        try:
            return [v if v is None else float(v) for v in values]
        except OverflowError:
            raise NotPlain("a time is out of range") from None
    return values


def _enums(members: dict, values: list) -> list:
    try:
        return list(map(members.__getitem__, values))
    except (KeyError, TypeError):  # unknown, or not hashable
        raise NotPlain("an enum value is not one of its members") from None
