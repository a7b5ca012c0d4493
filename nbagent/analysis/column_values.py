"""A column's values in the forms pandas and Arrow hold (see ``columns.py``'s table of kinds):
text as Arrow strings, shortened previews, categories and their codes, UTC times, nullable counts.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, UTC
from enum import Enum
from itertools import repeat
from typing import Any
from collections.abc import Callable, Sequence

from .coded import Coded


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
