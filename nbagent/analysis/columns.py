"""Every analysis column, defined once.

A :class:`Column` names a column, its kind and how to read it from the
objects of a table (steps, turn records, tool calls). The same definition
yields the pandas column (:meth:`Column.to_pandas`, for the DataFrames) and
the JSON values (:meth:`Column.to_json`, for the rows a saved session can
embed). Extractors are vectorized: they take every object at once and return
the column in its kind's plain form:

=========  ===================  ==========================================
kind       plain form           pandas dtype / JSON value
=========  ===================  ==========================================
INT        int64 array          ``int64`` / int
COUNT      float64, NaN = NA    ``Int64`` / int or null
FLOAT      float64, NaN         ``float64`` / float or null
TEXT       list of str | None   ``string`` / str or null
CATEGORY   list of str | None   ``category`` (known values first) / str or null
TIME       epoch s, NaN         ``datetime64[ns, UTC]`` / ISO 8601 or null
BOOL       bool array           ``bool`` / true or false
=========  ===================  ==========================================
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta, UTC
from enum import Enum
from itertools import chain, compress, repeat
from operator import attrgetter, is_not
from typing import Any
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..core.ledger import tokens_per_second
from ..core.turn_columns import TurnColumns
from ..core.usage import TOKEN_COUNTS
from .cache import EXPIRED, UNKNOWN
from .coded import Coded
from ..core.steps import (ApprovalDecision, FinishReason, PrefixChange, StepSource, StepStatus, StepTarget, StepType,
                          TurnStatus, changes_line)

PROMPT_CHARS = 80
PREVIEW_CHARS = 200


class Kind(Enum):
    INT = "int64"
    COUNT = "Int64"
    FLOAT = "float64"
    TEXT = "string"
    CATEGORY = "category"
    TIME = "datetime64[ns, UTC]"
    BOOL = "bool"


class Form(Enum):
    """The plain form a planned read keeps a path's values in (see :class:`Table`)."""

    OBJECTS = "objects"  # a list of the values
    INTS = "ints"  # int64 array
    FLOATS = "floats"  # float64 array, NaN for None (or for a None on the way)
    TEXTS = "texts"  # Arrow strings when pyarrow is installed (else a list): str or None
    CODED = "coded"  # few distinct values: the CODED paths are coded together (see Table.coded)


class Table:
    """The objects of one table plus what its columns share (pricing, cached arrays).

    Reading an attribute of a million objects costs more than the rest of a column's work, most
    of it fetching each object's memory. So the attributes the columns read (``reads``: names, or
    dotted paths such as "usage.prompt_token_count", each with the :class:`Form` its columns want it
    in; a sequence of paths wants lists) are read together on first use, ``READ_CHUNK`` objects at a
    time (:func:`read_planned`), each chunk turned into its forms while its objects are still in cache;
    a path read in another form, or outside ``reads``, is read alone (and noted in ``unplanned``).
    Few-valued attributes are coded once (:meth:`coded`).
    """

    def __init__(self, objs: Sequence[Any], pricing: Any = None,
                 reads: Mapping[str, Form] | Sequence[str] = ()) -> None:
        self.objs = list(objs)
        self.pricing = pricing
        self.plan: dict[str, Form] = dict(reads) if isinstance(reads, Mapping) else dict.fromkeys(reads, Form.OBJECTS)
        self.reads = tuple(self.plan)
        self.unplanned: set[str] = set()  # paths read alone, outside ``reads``
        self._cache: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self.objs)

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def values(self, path: str) -> Any:
        """The value at ``path`` of every object (None where an attribute on the way is None), read once:
        a list, or Arrow strings for a path planned as ``Form.TEXTS``."""
        def make() -> Any:
            parent, _, name = path.rpartition(".")
            if self.plan.get(path) in (Form.OBJECTS, Form.TEXTS):
                return self._planned(path)
            self.unplanned.add(path)
            if not parent:
                return list(map(attrgetter(name), self.objs))
            get, parents = attrgetter(name), self.values(parent)
            try:
                return list(map(get, parents))
            except AttributeError:  # None on the way
                return [None if p is None else get(p) for p in parents]
        return self.cached(("values", path), make)

    def floats(self, path: str) -> Any:
        """The value at ``path`` of every object as float64, NaN where it (or an attribute on the way) is None."""
        def make() -> Any:
            if self.plan.get(path) is Form.FLOATS:
                return self._planned(path)
            direct = self._direct(path, "float64")
            return _float_array(self.values(path)) if direct is None else direct
        return self.cached(("floats", path), make)

    def ints(self, path: str) -> Any:
        """The int value at ``path`` of every object as int64, read once."""
        def make() -> Any:
            import numpy as np

            if self.plan.get(path) is Form.INTS:
                return self._planned(path)
            direct = self._direct(path, "int64")
            return np.fromiter(self.values(path), dtype=np.int64, count=len(self)) if direct is None else direct
        return self.cached(("ints", path), make)

    def _direct(self, path: str, dtype: str) -> Any:
        """The numbers at ``path`` (not planned in this form) read straight from the objects into an array:
        no list of a million references to build and free. None when a value (or one on the way) is not a
        number: read them with :meth:`values` then."""
        import numpy as np

        if ("values", path) in self._cache or self.plan.get(path) in (Form.OBJECTS, Form.TEXTS):
            return None
        parent, _, name = path.rpartition(".")
        try:
            parents = self.values(parent) if parent else self.objs
            array = np.fromiter(map(attrgetter(name), parents), dtype=dtype, count=len(parents))
        except (TypeError, AttributeError):  # None here or on the way
            return None
        self.unplanned.add(path)
        return array

    def coded(self, paths: tuple[str, ...]) -> tuple[Any, list[tuple]]:
        """The few-valued attributes at ``paths``, coded together: each object's code (int64) into the
        distinct combinations (numbered by first appearance), and the combinations (read in one pass, or
        coded in the planned read when ``paths`` are its ``Form.CODED`` paths)."""
        def make() -> tuple[Any, list[tuple]]:
            import numpy as np

            if paths == tuple(p for p, form in self.plan.items() if form is Form.CODED):
                return self._planned(CODED)
            index = _Index()
            rows: Iterable[tuple]
            if all(self.plan.get(p) is Form.OBJECTS for p in paths):
                rows = zip(*map(self.values, paths))
            else:
                get = attrgetter(*paths)
                rows = map(get, self.objs) if len(paths) > 1 else zip(map(get, self.objs))
            codes = np.fromiter(map(index.__getitem__, rows), dtype=np.int64, count=len(self.objs))
            return codes, list(index)
        return self.cached(("coded", paths), make)

    def _planned(self, path: str) -> Any:
        """The planned form of a path in ``reads`` (or of ``CODED``: the codes and combinations)."""
        return self.cached("planned", lambda: read_planned(self.objs, self.plan))[path]


CODED = "coded"  # read_planned's key of the codes and combinations of the Form.CODED paths
READ_CHUNK = 4096  # objects read per pass of read_columns: its rows stay in cache while sliced into columns


def read_columns(objs: Sequence[Any], names: Sequence[str]) -> list[list]:
    """The attributes ``names`` of every object, one list per name, read in one pass over the objects.

    One ``attrgetter`` of every name fetches each object's memory once (reading attribute by attribute
    fetches it once per name). A chunk of rows at a time is flattened into one list (its tuples freed
    at once: a million kept tuples would wake the garbage collector) and sliced into the columns while
    it is still in cache."""
    if len(names) <= 1:
        return [list(map(attrgetter(name), objs)) for name in names]
    get, k = attrgetter(*names), len(names)
    columns: list[list] = [[] for _ in names]
    for start in range(0, len(objs), READ_CHUNK):
        flat = list(chain.from_iterable(map(get, objs[start:start + READ_CHUNK])))
        for j, column in enumerate(columns):
            column.extend(flat[j::k])
    return columns


def read_planned(objs: Sequence[Any], plan: Mapping[str, Form]) -> dict[str, Any]:
    """Each path of ``plan`` of every object in its form, and under ``CODED`` the codes and combinations
    of its ``Form.CODED`` paths, read ``READ_CHUNK`` objects at a time: a chunk's attributes in one pass
    (:func:`read_columns`), a dotted path's from the chunk's objects that have its parent, each turned
    into its form at once. No list of a million references is built (each would be fresh memory)
    unless a path wants one (``Form.OBJECTS``)."""
    children: dict[str, list[str]] = {}
    for p in plan:
        parent, _, name = p.rpartition(".")
        if parent:
            children.setdefault(parent, []).append(name)
    top = list(dict.fromkeys([p for p in plan if "." not in p] + list(children)))
    forms = _Forms(len(objs), plan)
    for start in range(0, len(objs), READ_CHUNK):
        chunk = dict(zip(top, read_columns(objs[start:start + READ_CHUNK], top)))
        for parent, names in children.items():
            chunk.update(_read_children(chunk[parent], parent, names))
        forms.add(start, len(chunk[top[0]]), chunk)
    return forms.done()


def _read_children(parents: list, parent: str, names: list[str]) -> dict[str, Any]:
    """``parent.name`` of each of ``parents`` for ``names``: a list, or (where the parent is, the values)
    when some parent is None."""
    import numpy as np

    present = np.fromiter(map(is_not, parents, repeat(None)), dtype=bool, count=len(parents))
    if present.all():
        return {f"{parent}.{n}": v for n, v in zip(names, read_columns(parents, names))}
    some = read_columns(list(compress(parents, present)), names)
    return {f"{parent}.{n}": _Some(present, v) for n, v in zip(names, some)}


@dataclass(frozen=True)
class _Some:
    """A chunk's values of a dotted path where its parent is not None (``present``)."""

    present: Any
    values: list

    def full(self) -> list:
        return _scatter(self.present, self.values, None)


def _numbers(values: list, dtype: Any) -> Any:
    """Numbers (None: NaN, for float64) as an array of ``dtype``, read as :meth:`Table.floats` and
    :meth:`Table.ints` read them (``np.fromiter``: a third faster than numpy's list conversion)."""
    import numpy as np

    return np.fromiter(values, dtype=dtype, count=len(values))


class _Forms:
    """The planned forms filled a chunk at a time (see :func:`read_planned`)."""

    def __init__(self, n: int, plan: Mapping[str, Form]) -> None:
        import numpy as np

        self.pa: Any = None
        try:
            import pyarrow

            self.pa = pyarrow
        except ImportError:  # pragma: no cover - pyarrow comes with the frames extra
            pass
        self.coded = tuple(p for p, form in plan.items() if form is Form.CODED)
        self.index, self.codes = _Index(), np.zeros(n, dtype=np.int64)
        self.arrays = {p: np.zeros(n, dtype=np.int64 if form is Form.INTS else np.float64)
                       for p, form in plan.items() if form in (Form.INTS, Form.FLOATS)}
        self.lists: dict[str, list] = {p: [] for p, form in plan.items() if form in (Form.OBJECTS, Form.TEXTS)}
        self.texts: dict[str, list] = {p: [] for p, form in plan.items() if form is Form.TEXTS}
        self.pending = 0  # texts rows not yet converted to Arrow

    def add(self, start: int, n: int, chunk: Mapping[str, Any]) -> None:
        import numpy as np

        for p, array in self.arrays.items():
            values = chunk[p]
            if isinstance(values, _Some):
                part = array[start:start + n]
                part[~values.present] = math.nan  # an INTS path cannot hold None: a ValueError
                part[values.present] = _numbers(values.values, array.dtype)
            else:
                array[start:start + n] = _numbers(values, array.dtype)
        for p, values in self.lists.items():
            values.extend(chunk[p].full() if isinstance(chunk[p], _Some) else chunk[p])
        if self.coded:
            rows = zip(*(chunk[p].full() if isinstance(chunk[p], _Some) else chunk[p] for p in self.coded))
            self.codes[start:start + n] = np.fromiter(map(self.index.__getitem__, rows), dtype=np.int64, count=n)
        self.pending += n
        if self.pending >= ARROW_CHUNK:
            self._convert_texts()

    def _convert_texts(self) -> None:
        """The texts read since the last call as one Arrow chunk each (see :func:`arrow_strings`)."""
        if self.pa is None:  # pragma: no cover - without pyarrow texts stay a list
            return
        for p, chunks in self.texts.items():
            chunks.append(arrow_strings(self.lists[p], large=True))
            self.lists[p] = []
        self.pending = 0

    def done(self) -> dict[str, Any]:
        self._convert_texts()
        out: dict[str, Any] = {**self.arrays, **self.lists, CODED: (self.codes, list(self.index))}
        for p, chunks in self.texts.items():
            if self.pa is not None:
                out[p] = chunks[0] if len(chunks) == 1 else self.pa.chunked_array(
                    [c for part in chunks for c in getattr(part, "chunks", (part,))], type=self.pa.large_string())
        return out


def _scatter(present: Any, values: Any, missing: Any) -> Any:
    """``values`` where ``present``, ``missing`` elsewhere (a float array for NaN, else a list)."""
    import numpy as np

    if isinstance(missing, float):
        out = np.full(len(present), missing)
        out[present] = values
        return out
    obj = np.full(len(present), missing, dtype=object)
    obj[present] = np.fromiter(values, dtype=object, count=len(values))
    return obj.tolist()


class TurnTable(Table):
    """The usage table over decoded turn ledgers (``core/turn_columns.py``) instead of
    ``TurnRecord`` objects: each attribute is already a list, so nothing is read per object."""

    def __init__(self, columns: TurnColumns, pricing: Any = None) -> None:
        super().__init__((), pricing)
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns)

    def values(self, path: str) -> list:
        return self.columns.values(path)

    def _direct(self, path: str, dtype: str) -> Any:
        return None  # no objects: the columns are lists already

    def coded(self, paths: tuple[str, ...]) -> tuple[Any, list[tuple]]:
        def make() -> tuple[Any, list[tuple]]:
            import numpy as np

            index = _Index()
            rows = zip(*(self.values(p) for p in paths))
            codes = np.fromiter(map(index.__getitem__, rows), dtype=np.int64, count=len(self))
            return codes, list(index)
        return self.cached(("coded", paths), make)


class ArrowTurnTable(TurnTable):
    """:class:`TurnTable` over decoded ledgers as Arrow arrays (``turn_columns.decode_turns_arrow``):
    numbers straight to numpy, a list only for the texts and few-valued columns read as values
    (the enum fields as their values, which categorize as the members do)."""

    def __init__(self, arrays: Mapping[str, Any], pricing: Any = None) -> None:
        Table.__init__(self, (), pricing)
        self.arrays = arrays
        self.length = len(arrays["turn"])

    def __len__(self) -> int:
        return self.length

    def values(self, path: str) -> list:
        return self.cached(("values", path), lambda: self._array(path).to_pylist())

    def floats(self, path: str) -> Any:
        def make() -> Any:
            import pyarrow as pa

            values = self._array(path).cast(pa.float64())
            return (values.fill_null(math.nan) if values.null_count else values).to_numpy()
        return self.cached(("floats", path), make)

    def ints(self, path: str) -> Any:
        return self.cached(("ints", path), lambda: self._array(path).to_numpy())

    def coded(self, paths: tuple[str, ...]) -> tuple[Any, list[tuple]]:
        def make() -> tuple[Any, list[tuple]]:
            import numpy as np

            encoded = [self._array(path).dictionary_encode() for path in paths]
            if math.prod(len(e.dictionary) + 1 for e in encoded) >= 2**62:  # too many to number: row by row
                return TurnTable.coded(self, paths)
            key = np.zeros(len(self), dtype=np.int64)
            distinct: list[list] = []
            for coded in encoded:  # each row's combination of dictionary codes as one number
                values = coded.dictionary.to_pylist() + [None]
                codes = coded.indices.fill_null(len(values) - 1) if coded.indices.null_count else coded.indices
                key = key * len(values) + codes.to_numpy()
                distinct.append(values)
            keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            order = np.argsort(first, kind="stable")  # numbered by first appearance, as TurnTable does
            renumber = np.empty(len(order), dtype=np.int64)
            renumber[order] = np.arange(len(order))
            rows = [_row_of(int(k), distinct) for k in keys[order]]
            return renumber[inverse.reshape(-1)], rows
        return self.cached(("coded", paths), make)

    def _array(self, path: str) -> Any:
        try:
            return self.arrays[path]
        except KeyError:
            raise KeyError(f"a turn record has no column {path!r}") from None


def _row_of(key: int, distinct: list[list]) -> tuple:
    """The values a mixed-radix ``key`` of :meth:`ArrowTurnTable.coded` stands for."""
    row = []
    for values in reversed(distinct):
        key, code = divmod(key, len(values))
        row.append(values[code])
    return tuple(reversed(row))


class _Index(dict):
    """Numbers each new key as it is first looked up."""

    def __missing__(self, key: Any) -> int:
        self[key] = code = len(self)
        return code


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    extract: Callable[[Table], Any]
    doc: str = ""
    categories: tuple[str, ...] = ()  # CATEGORY: the known values, in order
    limit: int = 0  # TEXT: cut to this many characters (see ``shorten``); None reads ""

    def to_pandas(self, values: Any) -> Any:
        """The plain form as a pandas array of this column's dtype."""
        import numpy as np
        import pandas as pd

        if self.kind is Kind.INT:
            return np.ascontiguousarray(values, dtype=np.int64)
        if isinstance(values, Coded) and self.kind is not Kind.CATEGORY:
            values = values.floats() if self.kind is Kind.COUNT else values.tolist()
        if self.kind is Kind.COUNT:
            return pd.arrays.IntegerArray(*count_ints(values))
        if self.kind is Kind.FLOAT:
            return np.asarray(values, dtype=np.float64)
        if self.kind is Kind.TEXT:
            return shorten_column(values, self.limit) if self.limit else text_array(values)
        if self.kind is Kind.CATEGORY:
            return categorical(values, self.categories)
        if self.kind is Kind.BOOL:
            return np.asarray(values, dtype=bool)
        return utc_times(values)

    def to_json(self, values: Any) -> list:
        """The plain form as JSON-ready values (missing -> None)."""
        if isinstance(values, Coded):
            values = values.tolist()
        if self.kind is Kind.INT:
            return [int(v) for v in values]
        if self.kind is Kind.COUNT:
            return [None if math.isnan(v) else int(v) for v in values]
        if self.kind is Kind.FLOAT:
            return [None if math.isnan(v) else float(v) for v in values]
        if self.kind is Kind.TEXT:
            return shorten([v or "" for v in values], self.limit) if self.limit else list(values)
        if self.kind is Kind.CATEGORY:
            return [enum_value(v) for v in values]
        if self.kind is Kind.BOOL:
            return [bool(v) for v in values]
        return [iso(v) for v in values]


# --- plain-form helpers -------------------------------------------------------------------


def enum_value(v: Any) -> Any:
    """A str-Enum member's value; "" -> None; anything else as it is."""
    if v is None or v == "":
        return None
    return v.value if isinstance(v, Enum) else v


def count_ints(values: Any) -> tuple[Any, Any]:
    """A COUNT column's plain form as int64 values and the NA mask (NaN, and counts int64 cannot
    hold: NA, never wrapped negative), with no float temporaries (each is fresh memory at scale)."""
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # NaN compares False and casts to garbage, masked below
        mask = (data > -2.0**63) & (data < 2.0**63)
        ints = data.astype(np.int64)
    np.logical_not(mask, out=mask)
    if mask.any():
        ints[mask] = 0
    return ints, mask


def text_array(values: Any) -> Any:
    """Texts (str or None) as a pandas ``string`` array, Arrow-backed when pyarrow is
    installed (a copy of the characters, without a Python object per row)."""
    import numpy as np
    import pandas as pd

    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow comes with the frames extra
        pa = None
    if pa is not None:
        try:
            arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else arrow_strings(values, large=True)
            return pd.arrays.ArrowStringArray(arr)
        except (TypeError, ValueError, pa.ArrowException):  # non-str values: let pandas convert them
            return pd.array(list(values), dtype=pd.StringDtype())
    obj = np.empty(len(values), dtype=object)  # pragma: no cover
    obj[:] = values  # pragma: no cover
    try:  # pragma: no cover
        return pd.arrays.StringArray(obj)
    except (TypeError, ValueError):  # pragma: no cover
        return pd.array(obj, dtype="string")


def categorical(values: Any, known: Sequence[str] = ()) -> Any:
    """A pandas Categorical from str / str-Enum values ("" and None are NA), a list or :class:`Coded`.

    Categories are ``known`` (in order) then any other value seen, sorted.
    """
    import pandas as pd

    codes, cats = category_codes(values, known)
    return pd.Categorical.from_codes(codes, categories=cats)


def category_codes(values: Any, known: Sequence[str] = ()) -> tuple[Any, list[str]]:
    """The codes (int32, -1 for NA) and categories of :func:`categorical`, without pandas."""
    import numpy as np

    if isinstance(values, Coded):  # categorize the few distinct values, then index by code
        few, cats = category_codes(values.values, known)
        return (few[values.codes] if len(values.values) else np.zeros(len(values), np.int32)), cats
    cats = [str(c) for c in known]
    code: dict = {c: i for i, c in enumerate(cats)}
    seen = set(values)
    seen.discard(None)
    seen.discard("")
    missing = [v for v in seen if v not in code]  # str-Enum members hash like their value
    if missing:
        names = {v: str(enum_value(v)) for v in missing}
        for name in sorted(set(names.values()).difference(code)):
            code[name] = len(cats)
            cats.append(name)
        for v, name in names.items():
            code[v] = code[name]
    return np.fromiter(map(code.get, values, repeat(-1)), dtype=np.int32, count=len(values)), cats


def utc_times(seconds: Any) -> Any:
    """Epoch seconds (NaN = unknown) as tz-aware UTC timestamps, rounded to the
    microsecond (a float epoch carries no more, and 1.1 should not read 1.0999999)."""
    import numpy as np
    import pandas as pd

    us, nat = epoch_us(seconds)
    values = (us * 1000).view("datetime64[ns]")
    if nat.any():
        values[nat] = np.datetime64("NaT")
    return pd.DatetimeIndex(values).tz_localize("UTC")


def epoch_us(seconds: Any) -> tuple[Any, Any]:
    """Epoch seconds as int64 microseconds, and where they are unknown (NaN, inf, or beyond what
    ``datetime64[ns]`` holds: year 2255), those set to 0."""
    import numpy as np

    us = np.round(np.asarray(seconds, dtype=np.float64) * 1e6)
    with np.errstate(invalid="ignore"):
        nat = ~(np.abs(us) < 9e15)
    return np.where(nat, 0.0, us).astype(np.int64), nat


def iso(ts: float) -> str | None:
    """Epoch seconds as ISO 8601 UTC, rounded to the microsecond exactly as ``utc_times``."""
    if ts is None or math.isnan(ts):
        return None
    try:
        return (_EPOCH + timedelta(microseconds=round(ts * 1e6))).isoformat()
    except (OverflowError, OSError, ValueError):  # a nonsense time: leave it out
        return None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def shorten(texts: list, limit: int) -> list:
    """Cut each text to ``limit`` characters (the last one an ellipsis)."""
    cut = limit - 1
    return [t if len(t) <= limit else t[:cut] + "…" for t in texts]


def shorten_column(texts: list, limit: int) -> Any:
    """:func:`shorten` over a whole column ("" for None) as a pandas ``string`` array, cut in
    Arrow when pyarrow is installed."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:  # pragma: no cover - pyarrow comes with the frames extra
        return text_array(shorten([t or "" for t in texts], limit))
    return text_array(shortened_arrow(texts, limit))


ARROW_CHUNK = 32768  # texts converted to Arrow at a time (see arrow_strings)


def arrow_strings(texts: Any, convert: Callable[[Any, Any], Any] | None = None, large: bool = False) -> Any:
    """Texts (str or None) as Arrow strings (``convert(texts, pool)``: a list of them to an Arrow array,
    by default ``pa.array``; ``large``: of ``large_string``, what a pandas ``string`` column holds, so
    pandas need not cast them, a second offsets buffer from Arrow's default pool), ``ARROW_CHUNK`` rows
    at a time: an Array, or a ChunkedArray of more than one chunk; their memory comes from the system
    allocator (``malloc``), not Arrow's default pool.

    Converting a million 150-character prompts takes 0.2 s; in one piece from Arrow's default pool
    (mimalloc) paging its memory in took 0.4-0.9 s of system time more, a chunk at a time from it
    still 0.2 s (each chunk kept is fresh memory there), from ``malloc`` next to nothing (it reuses
    what the process freed). The chunks are kept as they are: joining them would take the whole
    column's memory once more."""
    import pyarrow as pa

    pool = pa.system_memory_pool()
    if convert is None:
        def convert(chunk: Any, pool: Any) -> Any:
            return pa.array(chunk, type=pa.large_string() if large else pa.string(), memory_pool=pool)
    if not isinstance(texts, list) or len(texts) <= ARROW_CHUNK:
        return convert(texts, pool)
    parts = [convert(texts[i:i + ARROW_CHUNK], pool) for i in range(0, len(texts), ARROW_CHUNK)]
    return pa.chunked_array([c for part in parts for c in (part.chunks if isinstance(part, pa.ChunkedArray)
                                                           else (part,))], type=parts[0].type)


def shortened_arrow(texts: Any, limit: int) -> Any:
    """:func:`shorten` over a whole column ("" for None) as Arrow strings (see :func:`arrow_strings`);
    ``texts`` may be an Arrow string array already."""
    if isinstance(texts, Coded):
        texts = texts.tolist()
    return arrow_strings(texts, lambda chunk, pool: _shortened(chunk, limit, pool))


def _shortened(texts: Any, limit: int, pool: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        arr = texts if isinstance(texts, pa.StringArray) else pa.array(texts, type=pa.string(), memory_pool=pool)
    except (TypeError, ValueError, pa.ArrowException):  # non-str values
        return pa.array(shorten([str(t or "") for t in texts], limit), type=pa.string(), memory_pool=pool)
    if arr.null_count:
        arr = pc.coalesce(arr, "", memory_pool=pool)
    chars = pc.utf8_length(arr, memory_pool=pool)
    long = pc.greater(chars, limit, memory_pool=pool)
    if not pc.any(long).as_py():
        return arr
    cut = pc.binary_join_element_wise(_first_chars(arr, chars, limit - 1, pool), "…", "", memory_pool=pool)
    return cut if pc.all(long).as_py() else pc.if_else(long, cut, arr, memory_pool=pool)


def _first_chars(arr: Any, chars: Any, n: int, pool: Any) -> Any:
    """The first ``n`` characters of each text of an Arrow string array whose lengths are ``chars``:
    cut as bytes when every text is ASCII (as many characters as bytes), a few times faster."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = pc.sum(chars).as_py() or 0
    if total == pc.sum(pc.binary_length(arr, memory_pool=pool)).as_py():
        return pc.binary_slice(arr.cast(pa.binary()), 0, n, memory_pool=pool).cast(pa.string())
    return pc.utf8_slice_codeunits(arr, 0, n, memory_pool=pool)


_ARGS_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def args_json(args: Any) -> str:
    try:
        return _ARGS_ENCODER.encode(args)
    except (TypeError, ValueError):  # e.g. circular references
        return json.dumps(str(args))


# --- extractor builders -------------------------------------------------------------------


def _floats(table: Table, get: Callable[[Any], Any]) -> Any:
    return _float_array(list(map(get, table.objs)))


def _float_array(values: list) -> Any:
    """``values`` (numbers or None) as float64, NaN for None (numpy's float conversion reads None as NaN)."""
    import numpy as np

    try:  # one C-level pass
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except TypeError:  # a value float() cannot take: let the generator below say which
        return np.fromiter((math.nan if v is None else v for v in values), dtype=np.float64, count=len(values))


def _ints(path: str) -> Callable[[Table], Any]:
    return lambda table: table.ints(path)


def _counts(path: str, zero_is_na: bool = False) -> Callable[[Table], Any]:
    """A count read at ``path`` (float plain form, NaN where missing); 0 is NA when ``zero_is_na``."""
    def extract(table: Table) -> Any:
        data = table.floats(path)
        return _zero_is_na(data) if zero_is_na else data
    return extract


def _zero_is_na(data: Any) -> Any:
    import numpy as np

    data = data.copy()
    data[data == 0] = np.nan
    return data


def _optional_floats(path: str) -> Callable[[Table], Any]:
    return lambda table: table.floats(path)


def _texts(path: str, empty_is_na: bool = False) -> Callable[[Table], Any]:
    if empty_is_na:
        return lambda table: _empty_is_na(table.values(path))
    return lambda table: table.values(path)


def _empty_is_na(texts: Any) -> Any:
    """Texts with "" (and None) as None: a list, or Arrow strings with "" as null."""
    if isinstance(texts, list):
        return [v or None for v in texts]
    import pyarrow as pa
    import pyarrow.compute as pc

    pool = pa.system_memory_pool()
    empty = pc.equal(texts, "", memory_pool=pool)
    if not pc.any(empty).as_py():
        return texts
    return pc.if_else(empty, pa.scalar(None, texts.type), texts, memory_pool=pool)


def _values(path: str) -> Callable[[Table], Any]:
    return lambda table: table.values(path)


def _few(group: tuple[str, ...], path: str, empty_is_na: bool = False) -> Callable[[Table], Coded]:
    """The value at ``path``, one of ``group``: attributes with few distinct values, coded together."""
    k = group.index(path)

    def extract(table: Table) -> Coded:
        codes, rows = table.coded(group)
        return Coded(codes, [(row[k] or None) if empty_is_na else row[k] for row in rows])
    return extract


def _few_counts(group: tuple[str, ...], path: str) -> Callable[[Table], Any]:
    """A count of ``group`` (float plain form), NA when 0."""
    few = _few(group, path)
    return lambda table: _zero_is_na(few(table).floats())


def _tool_names(table: Table) -> list:
    """Each step's tool call names, comma-joined; None without calls (only the steps with calls are visited)."""
    name = attrgetter("name")
    calls = table.values("tool_calls")
    out: list = [None] * len(calls)
    for i in compress(range(len(calls)), calls):
        row = calls[i]
        out[i] = name(row[0]) if len(row) == 1 else ",".join(map(name, row))
    return out


def _enum_category(name: str, enum_cls: type[Enum], extra: tuple[str, ...] = (), doc: str = "",
                   few: tuple[str, ...] = ()) -> Column:
    return Column(name, Kind.CATEGORY, _few(few, name) if name in few else _values(name), doc,
                  tuple(m.value for m in enum_cls) + extra)


# --- history: one row per step ------------------------------------------------------------

_created = _optional_floats("created_at")
_step_finished = _optional_floats("finished_at")
# a step's attributes with few distinct values, coded together
STEP_FEW = ("type", "source", "target", "status", "finish_reason", "model", "http_code")

HISTORY_INDEX = Column("step_index", Kind.INT, _ints("step_index"), "position in the whole trajectory")
HISTORY = (
    Column("turn", Kind.INT, _ints("turn"), "0-based absolute turn number"),
    _enum_category("type", StepType, doc="StepType value", few=STEP_FEW),
    _enum_category("source", StepSource, doc="StepSource value", few=STEP_FEW),
    _enum_category("target", StepTarget, doc="StepTarget value", few=STEP_FEW),
    _enum_category("status", StepStatus, doc="StepStatus value", few=STEP_FEW),
    Column("content", Kind.TEXT, _texts("content"), "full text of the step"),
    Column("thinking", Kind.TEXT, _texts("thinking"), "full reasoning text"),
    Column("refusal", Kind.TEXT, _texts("refusal", empty_is_na=True), "the model's refusal, NA if none"),
    Column("tool_names", Kind.TEXT, _tool_names, "comma-joined tool call names, NA if none"),
    Column("model", Kind.CATEGORY, _few(STEP_FEW, "model", empty_is_na=True), "the model that answered"),
    *(Column(t.column, Kind.COUNT, _counts("usage_metadata." + t.field), t.meaning + " (NA: no usage)")
      for t in TOKEN_COUNTS),
    _enum_category("finish_reason", FinishReason, doc="why a model call or the turn ended", few=STEP_FEW),
    Column("http_code", Kind.COUNT, _few_counts(STEP_FEW, "http_code"), "NA when 0"),
    Column("error", Kind.TEXT, _texts("error", empty_is_na=True), "NA when empty"),
    Column("created", Kind.TIME, _created, "created_at"),
    Column("finished", Kind.TIME, _step_finished, "finished_at, NaT while running"),
    Column("duration_s", Kind.FLOAT, lambda t: _step_finished(t) - _created(t), "finished - created"),
)
# every Step attribute the history columns read, read together (see Table)
HISTORY_READS = {"step_index": Form.INTS, "turn": Form.INTS, **dict.fromkeys(STEP_FEW, Form.CODED),
                 **dict.fromkeys(("content", "thinking", "refusal", "error"), Form.TEXTS), "tool_calls": Form.OBJECTS,
                 **{"usage_metadata." + t.field: Form.FLOATS for t in TOKEN_COUNTS},
                 "created_at": Form.FLOATS, "finished_at": Form.FLOATS}


# --- usage: one row per turn --------------------------------------------------------------

_started = _optional_floats("started_at")
_turn_finished = _optional_floats("finished_at")
_first_token = _optional_floats("first_token_at")
# a turn record's attributes with few distinct values, coded together
TURN_FEW = ("model", "provider", "finish_reason", "status", "http_code", "prefix_change")


def _generated(table: Table) -> Any:
    return table.cached("generated", lambda: _counts("usage.thoughts_token_count")(table)
                        + _counts("usage.candidates_token_count")(table))


def _tokens_per_s(table: Table) -> Any:
    return tokens_per_second(_generated(table), _first_token(table), _turn_finished(table))


def _metrics(table: Table) -> Any:
    from .turn_metrics import TurnArrays, TurnMetrics

    def make() -> Any:
        import numpy as np

        codes, rows = table.coded(TURN_FEW)
        pairs: dict[tuple[str, str], int] = {}
        pair_of = [pairs.setdefault((row[0] or "", row[1] or ""), len(pairs)) for row in rows]
        arrays = TurnArrays(
            turn=_ints("turn")(table), started=_started(table), finished=_turn_finished(table),
            input=_counts("usage.prompt_token_count")(table), cached=_counts("usage.cached_content_token_count")(table),
            written=_counts("usage.cache_write_token_count")(table), generated=_generated(table),
            model_calls=_counts("model_calls")(table), context=_counts("context_tokens")(table),
            window=_optional_floats("context_window")(table),
            pair=np.asarray(pair_of, dtype=np.int64)[codes] if rows else np.zeros(0, np.int64), pairs=list(pairs),
            prefix_change=_few(TURN_FEW, "prefix_change")(table))
        return TurnMetrics(table.pricing, arrays)
    return table.cached("metrics", make)


def _metric(name: str) -> Callable[[Table], Any]:
    return lambda table: getattr(_metrics(table), name)


USAGE_INDEX = Column("turn", Kind.INT, _ints("turn"), "0-based turn number")
USAGE = (
    Column("prompt", Kind.TEXT, _values("prompt"), f"at most {PROMPT_CHARS} characters (\"…\" marks a cut)",
           limit=PROMPT_CHARS),
    Column("model", Kind.CATEGORY, _few(TURN_FEW, "model", empty_is_na=True), "NA when unknown"),
    Column("provider", Kind.CATEGORY, _few(TURN_FEW, "provider", empty_is_na=True), "NA when unknown"),
    Column("started", Kind.TIME, _started, "when the prompt was sent"),
    Column("finished", Kind.TIME, _turn_finished, "NaT while running"),
    Column("duration_s", Kind.FLOAT, lambda t: _turn_finished(t) - _started(t), "finished - started"),
    Column("ttft_s", Kind.FLOAT, lambda t: _first_token(t) - _started(t), "time to the first token"),
    Column("output_tokens_per_s", Kind.FLOAT, _tokens_per_s, "(thinking + output) / (finished - first token)"),
    Column("model_calls", Kind.COUNT, _counts("model_calls"), "model requests in the turn"),
    Column("tool_calls", Kind.COUNT, _counts("tool_calls"), "tool executions in the turn"),
    *(Column(t.column, Kind.COUNT, _counts("usage." + t.field), t.meaning) for t in TOKEN_COUNTS),
    Column("cost_usd", Kind.FLOAT, _metric("cost_usd"), "see nbagent.analysis.pricing; NaN: unknown model"),
    _enum_category("finish_reason", FinishReason, doc="FinishReason value", few=TURN_FEW),
    _enum_category("status", TurnStatus, doc="TurnStatus value", few=TURN_FEW),
    Column("error", Kind.TEXT, _texts("error", empty_is_na=True), "NA when empty"),
    Column("http_code", Kind.COUNT, _few_counts(TURN_FEW, "http_code"), "NA when 0"),
    Column("price_source", Kind.CATEGORY, _metric("price_source"),
           "where the price came from: \"genai-prices <version>\", \"override\", \"free\"; NA: unknown"),
    Column("cache_hit_ratio", Kind.FLOAT, _metric("cache_hit_ratio"), "cached / input tokens; NaN without input"),
    Column("cache_saved_usd", Kind.FLOAT, _metric("cache_saved_usd"),
           "cost without prompt caching - cost (writes cost a premium: may be < 0); NaN: unknown price"),
    Column("cache_busted", Kind.BOOL, _metric("cache_busted"),
           "the cache the previous turn built was not reused (see nbagent.analysis.cache)"),
    Column("cache_bust_cause", Kind.CATEGORY, _metric("cache_bust_cause"),
           "the PrefixChange value, \"expired\" or \"unknown\"; NA when not busted",
           tuple(m.value for m in PrefixChange) + (EXPIRED, UNKNOWN)),
    Column("context_tokens", Kind.COUNT, _counts("context_tokens", zero_is_na=True),
           "tokens in context after the turn: last call's input + output; NA when 0"),
    Column("context_window", Kind.COUNT, _metric("context_window"),
           "the model's window (its provider's, else genai-prices'); NA: unknown"),
    Column("context_fill", Kind.FLOAT, _metric("context_fill"),
           "context_tokens / context_window (above 1: overflow); NaN: unknown"),
)


# --- tool calls: one row per call ---------------------------------------------------------

PENDING = "pending"  # the status of a call that has no execution step yet


def _execution(attr: Callable[[Any], Any], missing: Any = None) -> Callable[[Table], list]:
    return lambda t: [missing if c.execution is None else attr(c.execution) for c in t.objs]


TOOL_CALL_INDEX = Column("call", Kind.INT, lambda t: list(range(len(t))), "row number")
TOOL_CALLS = (
    Column("turn", Kind.INT, _ints("turn"), "0-based turn number"),
    Column("call_id", Kind.TEXT, _texts("call_id"), "the provider's call id"),
    Column("name", Kind.CATEGORY, _values("name"), "tool name"),
    Column("arguments", Kind.TEXT, lambda t: [args_json(c.args) for c in t.objs], "JSON of the call's arguments"),
    Column("approval", Kind.CATEGORY, _execution(attrgetter("approval")),
           "ApprovalDecision value, NA if none", tuple(m.value for m in ApprovalDecision)),
    Column("status", Kind.CATEGORY, _execution(attrgetter("status"), PENDING),
           "StepStatus of the execution step, or \"pending\"", tuple(m.value for m in StepStatus) + (PENDING,)),
    Column("duration_s", Kind.FLOAT, lambda t: _floats(t, lambda c: None if c.execution is None
                                                       else c.execution.tool_seconds),
           "how long the tool ran (approval wait excluded)"),
    Column("result_preview", Kind.TEXT, lambda t: [None if c.execution is None else
                                                  shorten([c.execution.content or ""], PREVIEW_CHARS)[0]
                                                  for c in t.objs],
           f"first {PREVIEW_CHARS} characters of the result, NA if pending"),
    Column("error", Kind.TEXT, _execution(lambda s: s.error or None), "NA when empty"),
    Column("variables_changed", Kind.TEXT, _execution(lambda s: changes_line(s.changes) or None),
           "what the code did to the kernel's variables, e.g. \"created by_month (Series, 4 rows); "
           "deleted tmp\"; NA when nothing (or not code)"),
    Column("request_step", Kind.COUNT, lambda t: _floats(t, attrgetter("request_step")),
           "step_index of the model step that asked for it"),
    Column("result_step", Kind.COUNT, _execution(attrgetter("step_index"), math.nan),
           "step_index of the execution step"),
)


def column_table(index: Column, columns: Sequence[Column]) -> str:
    """The columns as a reStructuredText table (for docstrings and docs)."""
    rows = [(c.name, c.kind.value, c.doc) for c in (index, *columns)]
    w = [max(len(r[i]) for r in rows + [("column", "dtype", "meaning")]) for i in range(3)]
    line = "  ".join("=" * x for x in w)
    fmt = "  ".join(f"{{:<{x}}}" for x in w)
    body = [fmt.format(*r).rstrip() for r in rows]
    return "\n".join([line, fmt.format("column", "dtype", "meaning").rstrip(), line, *body, line])
