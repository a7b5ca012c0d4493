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
from dataclasses import MISSING, dataclass, fields
from enum import Enum
from itertools import repeat
from typing import Any, get_args, get_type_hints
from collections.abc import Callable, Sequence

from .ledger import ColumnRule, TurnRecord
from .usage import MAX_COUNT, TOKEN_COUNTS, UsageMetadata

__all__ = ["NotPlain", "TurnColumns", "decode_turns", "decode_turns_arrow"]

USAGE_FIELDS = tuple(t.field for t in TOKEN_COUNTS)


class NotPlain(ValueError):
    """A ledger holds a value this version does not write as such: decode it with ``TurnRecord.from_dict``."""


@dataclass
class TurnColumns:
    """The fields of many turn records as lists by field name (``usage``: each token count by its
    field name), with the values ``TurnRecord.from_dict`` gives them."""

    lists: dict[str, list]  # every TurnRecord field but ``usage``, in its order
    usage: dict[str, list[int]]

    def __len__(self) -> int:
        return len(self.lists["turn"])

    def values(self, name: str) -> list:
        """The column of a record attribute: ``"prompt"``, ``"usage.prompt_token_count"``..."""
        if name.startswith("usage."):
            return self.usage[name[6:]]
        if name in self.lists:
            return self.lists[name]
        raise KeyError(f"a turn record has no column {name!r}")

    @classmethod
    def of_records(cls, records: Sequence[TurnRecord]) -> TurnColumns:
        """The columns of records already built."""
        usages = [r.usage for r in records]
        return cls({c.name: [getattr(r, c.name) for r in records] for c in _LISTS},
                   {f: [getattr(u, f) for u in usages] for f in USAGE_FIELDS})

    @classmethod
    def concat(cls, parts: Sequence[TurnColumns]) -> TurnColumns:
        """The columns of ``parts`` one after the other."""
        lists: dict[str, list] = {c.name: [] for c in _LISTS}
        usage: dict[str, list[int]] = {f: [] for f in USAGE_FIELDS}
        for part in parts:
            for name, column in lists.items():
                column += part.lists[name]
            for f, column in usage.items():
                column += part.usage[f]
        return cls(lists, usage)


_NONE = type(None)
_INT = frozenset((int,))
_NUMBER = frozenset((int, float))
_TEXT = frozenset((str,))
_DICT = frozenset((dict,))
_USAGE = frozenset((dict, _NONE))


def _members(enum_cls: type[Enum], if_missing: Any) -> dict:
    """An enum's members by value, and what null (and "", when it has a default) reads as."""
    table: dict[Any, Any] = {m.value: m for m in enum_cls}
    table[None] = if_missing
    if if_missing is not None:
        table[""] = if_missing
    return table


@dataclass(frozen=True)
class _Column:
    """How one ``TurnRecord`` field is decoded, from its type and its metadata (``core/ledger.py``)."""

    name: str
    kind: type  # int (a count), float (a time), str, an Enum, or UsageMetadata
    optional: bool  # typed ``X | None``: null stays None (else it reads as the field's zero)
    required: bool  # no default: a ledger without it is refused (``turn``)
    members: dict | None  # an Enum's members by value (see _members)
    distinct: bool  # a text whose values rarely repeat: read as a list, not once per value


def _record_columns() -> tuple[_Column, ...]:
    """Each ``TurnRecord`` field as a column: by its type (``X | None``: optional) and its metadata."""
    out = []
    for f in fields(TurnRecord):
        hint = get_type_hints(TurnRecord)[f.name]
        kinds = [k for k in get_args(hint) or (hint,) if k is not _NONE]
        kind = kinds[0]
        if len(kinds) != 1 or not (kind in (int, float, str, UsageMetadata) or issubclass(kind, Enum)):
            raise TypeError(f"TurnRecord.{f.name}: turn_columns.py decodes no {hint}")
        out.append(_Column(
            f.name, kind, optional=_NONE in get_args(hint),
            required=f.default is MISSING and f.default_factory is MISSING,
            members=_members(kind, ColumnRule().of(f).if_missing) if issubclass(kind, Enum) else None,
            distinct=ColumnRule().of(f).distinct))
    return tuple(out)


_COLUMNS = _record_columns()
_LISTS = tuple(c for c in _COLUMNS if c.kind is not UsageMetadata)  # the usage's counts are columns apiece
_ENUMS = tuple(c for c in _COLUMNS if c.members is not None)


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
    return TurnColumns({c.name: _python_values(c, _column(turns, c.name, None)) for c in _LISTS},
                       {f: _counts(_column(usages, f, 0)) for f in USAGE_FIELDS})


def _python_values(c: _Column, values: list) -> list:
    """One field's values (null where a dict lacks it) as :func:`_decode_in_python` reads them."""
    if c.members is not None:
        return _enums(c.members, values)
    if c.kind is int:
        return _counts(values, optional=c.optional, missing=not c.required)
    if c.kind is float:
        return _floats(values, optional=c.optional)
    return _texts(values)


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
    return TurnColumns({c.name: _arrow_values(c, a[c.name]) for c in _LISTS},
                       {f: a["usage." + f].to_numpy().tolist() for f in USAGE_FIELDS})


def _arrow_values(c: _Column, values: Any) -> list:
    """One field's Arrow array as the list :func:`_decode_in_python` gives."""
    if c.members is not None:
        return _arrow_by_value(values, c.members.__getitem__)
    if c.kind is str:
        return values.to_pylist() if c.distinct else _arrow_by_value(values, _text)
    return _arrow_list(values) if c.optional else values.to_numpy().tolist()


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
        fields = dict(zip([c.name for c in _COLUMNS], pa.array(turns, type=_arrow_type(pa)).flatten()))
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        raise NotPlain("a value is not of its field's JSON type") from None
    usage = dict(zip(USAGE_FIELDS, fields.pop("usage").flatten()))  # a null usage: null counts
    out: dict[str, Any] = {}
    for c in _LISTS:
        values = fields[c.name]
        if c.kind is int:
            out[c.name] = _checked_counts(values, optional=c.optional, missing=not c.required)
        elif c.optional:
            out[c.name] = values
        else:
            out[c.name] = _filled(values, 0.0 if c.kind is float else "")
    out.update({"usage." + f: _checked_counts(usage[f]) for f in USAGE_FIELDS})
    for c in _ENUMS:
        assert c.members is not None
        if not set(out[c.name].unique().to_pylist()) <= c.members.keys():
            raise NotPlain("an enum value is not one of its members")
        if c.members[None] is not None:
            out[c.name] = _if_missing(pa, out[c.name], c.members[None].value)
    return out


def _filled(values: Any, default: Any) -> Any:
    return values.fill_null(default) if values.null_count else values


def _if_missing(pa: Any, values: Any, value: str) -> Any:
    """An enum column's values, ``value`` where a ledger has none (null was filled with ""), as
    ``from_dict`` reads it (a saved turn without a status ended)."""
    import pyarrow.compute as pc

    empty = pc.equal(values, "")
    return pc.if_else(empty, pa.scalar(value), values) if pc.any(empty).as_py() else values


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


@functools.cache
def _arrow_type(pa: Any) -> Any:
    """The Arrow struct of a turn dict: each field as the JSON type this version writes it."""
    kinds = {int: pa.int64(), float: pa.float64(), str: pa.string(),
             UsageMetadata: pa.struct([(f, pa.int64()) for f in USAGE_FIELDS])}
    return pa.struct([(c.name, kinds.get(c.kind, pa.string())) for c in _COLUMNS])  # an enum: its value


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
