"""The objects a frame is built from, and how their attributes are read.

A :class:`Table` holds a frame's objects (steps, turn records, tool calls) and what its columns share:
the pricing, and each attribute read once, in the form its columns want (:class:`Form`). Reading an
attribute of a million objects costs more than the rest of a column's work, so the attributes a
frame declares are read together, a chunk of objects at a time (:func:`read_planned`).
:class:`TurnTable` and :class:`ArrowTurnTable` hold saved sessions' turns decoded into columns
(``core/turn_columns.py``) instead: nothing is read per object. The columns themselves are
declared in ``columns.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from itertools import chain, compress, repeat
from operator import attrgetter, is_not
from typing import Any
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..core.turn_columns import TurnColumns
from . import column_values  # read at call time: ARROW_CHUNK as it is then


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
        return self._number_array(path, Form.FLOATS, "float64", float_array)

    def ints(self, path: str) -> Any:
        """The int value at ``path`` of every object as int64, read once."""
        return self._number_array(path, Form.INTS, "int64", lambda values: _numbers(values, "int64"))

    def _number_array(self, path: str, form: Form, dtype: str, convert: Callable[[list], Any]) -> Any:
        """The numbers at ``path`` as an array of ``dtype``, read once: from the planned read when ``reads``
        plans ``path`` in ``form``, else straight from the objects, else ``convert`` of its values."""
        def make() -> Any:
            if self.plan.get(path) is form:
                return self._planned(path)
            direct = self._direct(path, dtype)
            return convert(self.values(path)) if direct is None else direct
        return self.cached((form.value, path), make)

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
        if self.pending >= column_values.ARROW_CHUNK:
            self._convert_texts()

    def _convert_texts(self) -> None:
        """The texts read since the last call as one Arrow chunk each (see ``column_values.arrow_strings``)."""
        if self.pa is None:  # pragma: no cover - without pyarrow texts stay a list
            return
        for p, chunks in self.texts.items():
            chunks.append(column_values.arrow_strings(self.lists[p], large=True))
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


def float_array(values: list) -> Any:
    """``values`` (numbers or None) as float64, NaN for None (numpy's float conversion reads None as NaN)."""
    import numpy as np

    try:  # one C-level pass
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except TypeError:  # a value float() cannot take: let the generator below say which
        return np.fromiter((math.nan if v is None else v for v in values), dtype=np.float64, count=len(values))
