"""Turn ledgers decoded into columns: one list per :class:`TurnRecord` field, no object per turn.

``nbagent.load_sessions`` and ``to_parquet`` read the ledgers of thousands of saved sessions;
building a ``TurnRecord`` and a ``UsageMetadata`` for each of their turns cost more than reading the
files. :func:`decode_turns` reads the parsed JSON dicts in columns instead, accepting only values
it reads as ``from_dict`` does (an int count, a float time, a known enum value...): with pyarrow,
one Arrow conversion of all the dicts (a C pass, about four times faster); without, one pass over
the list per field plus a type check of the whole column. Anything else (a hand-edited count
``"3"``, an unknown status) raises :class:`NotPlain`, and the caller decodes those dicts with
``TurnRecord.from_dict``, which accepts or refuses them exactly as it always did
(:meth:`TurnColumns.of_records`): the columns are always what the records would hold.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from enum import Enum
from itertools import repeat
from typing import Any
from collections.abc import Callable, Sequence

from .ledger import TurnRecord
from .steps import FinishReason, PrefixChange, TurnStatus
from .usage import MAX_COUNT, TOKEN_COUNTS

__all__ = ["NotPlain", "TurnColumns", "decode_turns", "decode_turns_arrow"]

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
    docstring); :class:`NotPlain` for anything else. Converted by Arrow when pyarrow is installed
    (the ``frames`` extra), else field by field in Python; both give the same columns."""
    if not turns:
        return TurnColumns.of_records([])
    if not set(map(type, turns)) <= _DICT:  # Arrow would also take a list of pairs for an object
        raise NotPlain("a turn is not a JSON object")
    usages = _column(turns, "usage", None)
    if not set(map(type, usages)) <= _USAGE:
        raise NotPlain("a usage is not an object")
    try:
        import pyarrow
    except ImportError:
        return _decode_in_python(turns, usages)
    return _decode_in_arrow(pyarrow, turns)


def _decode_in_python(turns: list, usages: list) -> TurnColumns:
    """:func:`decode_turns` one field at a time: a pass over the dicts and a type check per field."""
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


# --- the same columns through Arrow --------------------------------------------------------
#
# ``pyarrow.array(turns, type=...)`` reads every field of every dict in one C pass: missing keys
# and nulls become nulls, and a value of another JSON type than its field's is refused (a bool or
# a string for a number, a number for a text), as are ints past 64 bits and ints a float cannot
# hold exactly. It takes a float for an int field, truncated as ``int()`` truncates it: the value
# ``count`` gives. The columns then get what ``TurnRecord.from_dict`` gives (nulls as its
# defaults, counts in range, known enum values) or :class:`NotPlain`.


def _decode_in_arrow(pa: Any, turns: list) -> TurnColumns:
    """:func:`decode_turns` by one Arrow conversion of the dicts (:func:`_arrow_arrays`), then lists."""
    a = _arrow_arrays(pa, turns)
    return TurnColumns(
        turn=a["turn"].to_numpy().tolist(),
        prompt=a["prompt"].to_pylist(),
        model=_arrow_by_value(a["model"], _text),
        provider=_arrow_by_value(a["provider"], _text),
        started_at=a["started_at"].to_numpy().tolist(),
        finished_at=_arrow_list(a["finished_at"]),
        first_token_at=_arrow_list(a["first_token_at"]),
        usage={f: a["usage." + f].to_numpy().tolist() for f in USAGE_FIELDS},
        model_calls=a["model_calls"].to_numpy().tolist(),
        tool_calls=a["tool_calls"].to_numpy().tolist(),
        finish_reason=_arrow_by_value(a["finish_reason"], _FINISH.__getitem__),
        status=_arrow_by_value(a["status"], _STATUS.__getitem__),
        error=_arrow_by_value(a["error"], _text),
        http_code=a["http_code"].to_numpy().tolist(),
        prefix_change=_arrow_by_value(a["prefix_change"], _CHANGE.__getitem__),
        context_tokens=a["context_tokens"].to_numpy().tolist(),
        context_window=_arrow_list(a["context_window"]),
    )


def decode_turns_arrow(turns: list) -> dict[str, Any]:
    """:func:`decode_turns` as Arrow arrays by column name (``"usage.<field>"`` for the token
    counts), for a caller that wants Arrow (``to_parquet``): no Python object per value. The values
    the lists would hold, nulls as ``TurnRecord.from_dict``'s defaults, but the optional fields
    (``finished_at``, ``first_token_at``, ``finish_reason``, ``prefix_change``, ``context_window``)
    null where the lists hold None, and the enum fields as their values (strings). Needs pyarrow;
    :class:`NotPlain` as :func:`decode_turns`."""
    import pyarrow as pa

    if not set(map(type, turns)) <= _DICT:
        raise NotPlain("a turn is not a JSON object")
    if not set(map(type, _column(turns, "usage", None))) <= _USAGE:
        raise NotPlain("a usage is not an object")
    return _arrow_arrays(pa, turns)


def _arrow_arrays(pa: Any, turns: list) -> dict[str, Any]:
    """The fields of ``turns`` (dicts with dict or null usages) converted by Arrow in one pass and
    checked as ``TurnRecord.from_dict`` reads them: nulls as its defaults, counts in range, known
    enum values (see :func:`decode_turns_arrow`)."""
    try:
        fields = dict(zip(_ARROW_FIELDS, pa.array(turns, type=_arrow_type(pa)).flatten()))
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        raise NotPlain("a value is not of its field's JSON type") from None
    usage = dict(zip(USAGE_FIELDS, fields.pop("usage").flatten()))  # a null usage: null counts
    out: dict[str, Any] = {}
    for name, values in fields.items():
        if name in _OPTIONAL:
            out[name] = _checked_counts(values, optional=True) if name == "context_window" else values
        elif name in _ARROW_COUNTS:
            out[name] = _checked_counts(values, missing=name != "turn")
        else:
            out[name] = _filled(values, 0.0 if name == "started_at" else "")
    out.update({"usage." + f: _checked_counts(usage[f]) for f in USAGE_FIELDS})
    for name, members in (("finish_reason", _FINISH), ("prefix_change", _CHANGE), ("status", _STATUS)):
        if not set(out[name].unique().to_pylist()) <= members.keys():
            raise NotPlain("an enum value is not one of its members")
    out["status"] = _default_status(pa, out["status"])
    return out


_OPTIONAL = frozenset(("finished_at", "first_token_at", "finish_reason", "prefix_change", "context_window"))
_ARROW_COUNTS = frozenset(("turn", "model_calls", "tool_calls", "http_code", "context_tokens"))


def _filled(values: Any, default: Any) -> Any:
    return values.fill_null(default) if values.null_count else values


def _default_status(pa: Any, status: Any) -> Any:
    """A ledger's status, "" where it has none (null was filled with ""): "done", as ``from_dict`` reads it."""
    import pyarrow.compute as pc

    empty = pc.equal(status, "")
    return pc.if_else(empty, pa.scalar(TurnStatus.DONE.value), status) if pc.any(empty).as_py() else status


def _checked_counts(values: Any, optional: bool = False, missing: bool = True) -> Any:
    """An Arrow int64 array of counts checked as :func:`_counts` checks them: null is 0 when
    ``missing`` (filled), stays null when ``optional``; :class:`NotPlain` out of range."""
    nulls = values.null_count
    if nulls and not (optional or missing):
        raise NotPlain("a count is missing")
    if nulls and not optional:
        values = values.fill_null(0)
    data = (values.fill_null(0) if nulls else values).to_numpy()
    if len(data) and not (data.min() >= 0 and data.max() <= MAX_COUNT):
        raise NotPlain("a count is not an int in range")
    return values


def _arrow_list(values: Any) -> list:
    """An Arrow array as a list, None where null (numbers through numpy: faster than ``to_pylist``)."""
    if not values.null_count:
        return values.to_numpy().tolist()
    return _with_nones(values.fill_null(0).to_numpy().tolist(), values)


_ARROW_FIELDS = ("turn", "prompt", "model", "provider", "started_at", "finished_at", "first_token_at", "usage",
                 "model_calls", "tool_calls", "finish_reason", "status", "error", "http_code", "prefix_change",
                 "context_tokens", "context_window")


@functools.cache
def _arrow_type(pa: Any) -> Any:
    """The Arrow struct of a turn dict: each field as the JSON type this version writes it."""
    count, time, text = pa.int64(), pa.float64(), pa.string()
    kinds = {"prompt": text, "model": text, "provider": text, "started_at": time, "finished_at": time,
             "first_token_at": time, "usage": pa.struct([(f, count) for f in USAGE_FIELDS]),
             "finish_reason": text, "status": text, "error": text, "prefix_change": text}
    return pa.struct([(name, kinds.get(name, count)) for name in _ARROW_FIELDS])


def _text(value: str | None) -> str:
    return "" if value is None else value


def _with_nones(data: list, values: Any) -> list:
    """``data`` with None where ``values`` (an Arrow array) is null."""
    import numpy as np

    for i in np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False)).tolist():
        data[i] = None
    return data


def _arrow_by_value(values: Any, read: Callable[[str | None], Any]) -> list:
    """``read`` of each value of an Arrow string array (null: None), called once per distinct value
    (rows share the result); :class:`NotPlain` when it raises KeyError."""
    import numpy as np

    coded = values.dictionary_encode()
    try:
        distinct = [read(v) for v in coded.dictionary.to_pylist()] + [read(None)]
    except KeyError:
        raise NotPlain("an enum value is not one of its members") from None
    table = np.empty(len(distinct), dtype=object)
    table[:] = distinct
    codes = coded.indices
    return table[(codes.fill_null(len(distinct) - 1) if codes.null_count else codes).to_numpy()].tolist()
