"""Sessions as Parquet with a stable schema (``nbagent.to_parquet``).

The schema comes from the column definitions (:mod:`nbagent.analysis.columns`), never from
the values: a session without tool calls, an all-NA column or an empty session gives the
same types, so DuckDB, Polars or Spark read a folder of files written at different times as
one table. Each table starts with ``session_id`` (string, not null), ``path`` (string: the
saved session file, null for a live Conversation) and its row key (int64, not null), then
its columns in frame order:

============  ===================================  ==========================================
column kind   Parquet / Arrow type                 notes
============  ===================================  ==========================================
INT           int64, not null                      ``turn``, ``call``
COUNT         int64, nullable                      token counts, ``http_code``; null = NA
FLOAT         double                               null = NaN (durations, costs, ratios)
TEXT          string                               null = NA
CATEGORY      dictionary<int32, string>            enum values (``"done"``, ``"STOP"``); null = NA;
                                                   pandas reads it back as ``category``
TIME          timestamp[us, tz=UTC]                null = NaT
BOOL          bool                                 nullable
============  ===================================  ==========================================

Field metadata ``doc`` holds each column's meaning; schema metadata ``nbagent.table`` and
``nbagent.schema`` (:data:`SCHEMA_VERSION`) name the table and the schema's version.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

from ..core.atomic_file import atomic_write
from ..core.distribution import install_hint
from ..core.errors import NbagentError
from .columns import TOOL_CALL_INDEX, TOOL_CALLS, USAGE, USAGE_INDEX, Column, Kind

__all__ = ["to_parquet", "parquet_schema", "TABLES", "SCHEMA_VERSION"]

SCHEMA_VERSION = "2"  # 2: category columns dictionary-encoded (1: plain strings)
TABLES = ("usage", "tool_calls")
_KEYS = ("session_id", "path")


def _require_pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - exercised only without pyarrow
        raise NbagentError(f"Parquet export needs pyarrow: {install_hint('frames')}", kind="config") from None
    return pa, pq


def _table_columns(table: str) -> tuple[Column, Sequence[Column]]:
    if table == "usage":
        return USAGE_INDEX, USAGE
    if table == "tool_calls":
        return TOOL_CALL_INDEX, TOOL_CALLS
    raise NbagentError(f"unknown table {table!r}: to_parquet writes {', '.join(map(repr, TABLES))}", kind="config")


def _arrow_type(pa: Any, kind: Kind) -> Any:
    types = {Kind.INT: pa.int64(), Kind.COUNT: pa.int64(), Kind.FLOAT: pa.float64(), Kind.TEXT: pa.string(),
             Kind.CATEGORY: pa.dictionary(pa.int32(), pa.string()), Kind.TIME: pa.timestamp("us", tz="UTC"), Kind.BOOL: pa.bool_()}
    try:
        return types[kind]
    except KeyError:
        raise NbagentError(f"no Parquet type for column kind {kind!r}", kind="config") from None


def parquet_schema(table: str = "usage"):
    """The pyarrow schema ``to_parquet`` writes for ``table`` ("usage" or "tool_calls")."""
    pa, _ = _require_pyarrow()
    index, columns = _table_columns(table)
    fields = [pa.field("session_id", pa.string(), nullable=False, metadata={"doc": "the conversation id"}),
              pa.field("path", pa.string(), metadata={"doc": "the saved session file; null for a live Conversation"})]
    for c in (index, *columns):
        fields.append(pa.field(c.name, _arrow_type(pa, c.kind), nullable=c.kind is not Kind.INT,
                               metadata={"doc": c.doc}))
    return pa.schema(fields, metadata={"nbagent.table": table, "nbagent.schema": SCHEMA_VERSION})


def to_parquet(source: Any, path: str | os.PathLike, *, table: str = "usage", pricing: Mapping | None = None,
               partition: str | None = None) -> Path:
    """Write ``table`` of ``source`` to Parquet with the stable schema (:func:`parquet_schema`).

    ``source`` is a Conversation, saved sessions (a path, glob, directory or list, as
    ``load_sessions`` takes) or a DataFrame with ``session_id`` (``load_sessions`` output for
    "usage"). ``table`` is "usage" (one row per turn) or "tool_calls" (one row per tool call).

    ``path`` ending in ``.parquet`` is one file holding every session's rows; any other path
    is a folder with one file per session, named after the session file and a short hash of its
    absolute path (a live conversation: its id), so ``a.json`` and ``other/a.json`` never share
    a file and exporting a session again replaces its file and ``duckdb.sql("select ... from
    'out/*.parquet'")`` reads the folder as one table. Keep one table per folder. Returns ``path``.
    """
    pa, pq = _require_pyarrow()
    schema = parquet_schema(table)
    frame, names = _source_frame(source, table, pricing, names=partition is None)
    arrow = _arrow_table(pa, frame, schema)
    out = Path(os.path.expanduser(os.fspath(path)))
    if partition is not None:
        return _write_dataset(arrow, frame, out, table, partition)
    if out.suffix.lower() == ".parquet":
        return atomic_write(out, lambda tmp: pq.write_table(arrow, tmp))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NbagentError(f"cannot write {out}: {exc.strerror or exc}", kind="io") from None
    for (start, length), name in zip(_runs(frame), names):
        part = arrow.slice(start, length)
        atomic_write(out / f"{name}.parquet", functools.partial(_write_table, part))
    return out


PARTITIONS = ("month",)


def _write_dataset(arrow: Any, frame: Any, out: Path, table: str, partition: str) -> Path:
    """``arrow`` appended to the dataset in folder ``out``, one file per month; rows of the same
    sessions already there are removed first (see :func:`to_parquet`)."""
    import uuid

    import numpy as np

    if partition not in PARTITIONS:
        raise NbagentError(f"partition must be one of {', '.join(map(repr, PARTITIONS))}, not {partition!r}",
                           kind="config")
    if table != "usage":
        raise NbagentError("partition='month' needs the usage table (its turns have a start time)", kind="config")
    if out.suffix.lower() == ".parquet":
        raise NbagentError(f"a partitioned export is a folder, not {out.name}", kind="config")
    if any(out.glob("*=*/*.parquet")):  # sessions exported before: their earlier rows go
        _drop_sessions(out, set(_session_keys(frame).tolist()))
    started = _pandas().to_datetime(frame["started"], utc=True).dt.tz_localize(None)
    months = started.to_numpy(dtype="datetime64[ns]").astype("datetime64[M]")
    batch = f"part-{uuid.uuid4().hex[:12]}.parquet"
    for month in np.unique(months):  # NaT sorts last
        rows = np.flatnonzero(np.isnat(months) if np.isnat(month) else months == month)
        name = "unknown" if np.isnat(month) else str(month)
        atomic_write(out / f"{partition}={name}" / batch, functools.partial(_write_table, arrow.take(rows)))
    out.mkdir(parents=True, exist_ok=True)
    return out


def _drop_sessions(out: Path, keys: set[str]) -> None:
    """Rewrite the dataset's files that hold rows of ``keys`` (session id and path) without them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for part in sorted(out.glob("*=*/*.parquet")):
        try:
            file = pq.ParquetFile(part)
            ids = file.read(columns=["session_id", "path"]).to_pandas()
        except (OSError, pa.ArrowException) as exc:
            raise NbagentError(f"cannot read {part} of the dataset {out}: {exc}", kind="io") from None
        mask = _session_keys(ids).isin(keys).to_numpy()
        if not mask.any():
            continue
        if mask.all():
            part.unlink()
            continue
        kept = file.read().filter(pa.array(~mask))
        atomic_write(part, functools.partial(_write_table, kept))


def _write_table(table: Any, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)


# --- sources ------------------------------------------------------------------------------


def _source_frame(source: Any, table: str, pricing: Mapping | None, *, names: bool = True):
    """One frame with session_id, path, the row key and the table's columns, rows grouped by
    session; and a file name for each session, in order (``names=False``: none)."""
    pd = _pandas()
    if isinstance(source, pd.DataFrame):
        frame = _from_dataframe(source, table)
    elif hasattr(source, "plumbing") and hasattr(source, "usage_df"):  # a Conversation
        df = source.usage_df(pricing=pricing) if table == "usage" else source.tool_calls_df()
        frame = _keyed(df, str(source.conversation_id), None)
    else:
        frame = _from_files(source, table, pricing)
    if not names:
        return frame, []
    firsts = [start for start, _ in _runs(frame)]
    paths, ids = frame["path"].tolist(), frame["session_id"].astype(object).tolist()
    return frame, [_file_name(paths[i], str(ids[i])) for i in firsts]


def _from_files(source: Any, table: str, pricing: Mapping | None):
    from ..core.session_file import read_steps
    from .columns import Table
    from .frames import build_frame, tool_call_rows
    from .sessions import expand_paths, load_sessions

    if table == "usage":
        return load_sessions(source, pricing=pricing)
    pd = _pandas()
    rows: list = []
    ids: list[str] = []
    paths: list[str] = []
    calls: list[int] = []
    for p in expand_paths(source):
        session_id, steps = read_steps(p)
        found = tool_call_rows(steps)
        rows += found
        ids += [session_id] * len(found)
        paths += [str(p)] * len(found)
        calls += range(len(found))
    df = build_frame(Table(rows), TOOL_CALL_INDEX, TOOL_CALLS)
    df.index = pd.Index(calls, dtype="int64", name=TOOL_CALL_INDEX.name)
    df = df.reset_index()
    df.insert(0, "path", pd.array(paths, dtype="string"))
    df.insert(0, "session_id", pd.array(ids, dtype="string"))
    return df


def _keyed(df: Any, session_id: str, path: str | None):
    """A single session's frame with session_id and path first and its index as a column."""
    pd = _pandas()
    df = df.reset_index()
    df.insert(0, "path", pd.array([path] * len(df), dtype="string"))
    df.insert(0, "session_id", pd.array([session_id] * len(df), dtype="string"))
    return df


def _from_dataframe(df: Any, table: str):
    index, columns = _table_columns(table)
    if index.name not in df.columns and df.index.name == index.name:
        df = df.reset_index()
    if "session_id" not in df.columns:
        raise NbagentError("a DataFrame source needs a session_id column (load_sessions gives one); pass the "
                           "Conversation itself for its own frames", kind="config")
    if "path" not in df.columns:
        df = df.assign(path=None)
    missing = [c.name for c in (index, *columns) if c.name not in df.columns]
    if missing:
        raise NbagentError(f"the DataFrame has no {', '.join(missing)} column(s): it is not a {table} frame",
                           kind="config")
    key = _session_keys(df)
    order = {k: i for i, k in enumerate(dict.fromkeys(key.tolist()))}
    return df.iloc[key.map(order).argsort(kind="stable")].reset_index(drop=True)  # each session's rows together


# --- conversion ---------------------------------------------------------------------------


def _arrow_table(pa: Any, frame: Any, schema: Any):
    arrays = []
    for field in schema:
        try:
            arrays.append(_arrow_array(pa, frame[field.name], field.type))
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise NbagentError(f"column {field.name!r} does not convert to {field.type}: {exc}",
                               kind="config") from None
    return pa.Table.from_arrays(arrays, schema=schema)


def _arrow_array(pa: Any, series: Any, type_: Any):
    pd = _pandas()
    if pa.types.is_timestamp(type_):
        values = pd.to_datetime(series, utc=True)
        return pa.array(values, from_pandas=True).cast(type_, safe=False)  # the frames hold microseconds
    if pa.types.is_string(type_):
        values = series.astype(object)
        return pa.array(values.where(series.notna(), None).tolist(), type=type_)
    if pa.types.is_dictionary(type_):  # a category column: its codes and the values they name
        if not isinstance(series.dtype, pd.CategoricalDtype):
            series = series.astype("category")
        values = series.cat.remove_unused_categories()
        categories = pa.array([str(c) for c in values.cat.categories], type=type_.value_type)
        codes = pa.array(values.cat.codes.to_numpy(), type=type_.index_type, mask=values.isna().to_numpy())
        return pa.DictionaryArray.from_arrays(codes, categories)
    return pa.array(series, type=type_, from_pandas=True)


def _runs(frame: Any) -> list[tuple[int, int]]:
    """(start, length) of each run of rows with the same session id and path."""
    import numpy as np

    keys = _session_keys(frame).to_numpy()
    if not len(keys):
        return []
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], len(keys)]
    return [(int(s), int(e - s)) for s, e in zip(starts, ends)]


def _session_keys(frame: Any) -> Any:
    """One key per row: its session id and path (a session is one source file)."""
    path = frame["path"].astype(object)
    return frame["session_id"].astype(object).astype(str) + "\0" + path.where(frame["path"].notna(), "").astype(str)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _file_name(path: Any, session_id: str) -> str:
    """One session's file name in an export folder: unique per source, the same every export.

    A saved session: its file's stem and a hash of its absolute path (``a.json`` and
    ``other/a.json`` differ); a live conversation: its id (a hash is added if the id needed
    cleaning, so two ids never meet in one name).
    """
    if isinstance(path, str):
        key = os.path.abspath(os.path.expanduser(path))
        return f"{_safe_name(Path(path).stem)}-{_short_hash(key)}"
    name = _safe_name(session_id)
    return name if name == session_id else f"{name}-{_short_hash(session_id)}"


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def _safe_name(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("._") or "session"


def _pandas():
    from .frames import require_pandas

    return require_pandas()
