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

import contextlib
import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ..core.atomic_file import atomic_write, atomic_write_bytes, staged_file, sync_directory
from ..core.distribution import install_hint
from ..core.errors import ConfigError, StorageError
from ..core.session_file import gc_paused
from .coded import Coded
from .columns import TOOL_CALL_INDEX, TOOL_CALLS, USAGE, USAGE_INDEX, Column, Kind
from ..core.conversation_state import has_plumbing

__all__ = ["to_parquet", "parquet_schema", "TABLES", "SCHEMA_VERSION"]

SCHEMA_VERSION = "2"  # 2: category columns dictionary-encoded (1: plain strings)
TABLES = ("usage", "tool_calls")
_KEYS = ("session_id", "path")


def _require_pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - exercised only without pyarrow
        raise ConfigError(f"Parquet export needs pyarrow: {install_hint('frames')}") from None
    return pa, pq


def _table_columns(table: str) -> tuple[Column, Sequence[Column]]:
    if table == "usage":
        return USAGE_INDEX, USAGE
    if table == "tool_calls":
        return TOOL_CALL_INDEX, TOOL_CALLS
    raise ConfigError(f"unknown table {table!r}: to_parquet writes {', '.join(map(repr, TABLES))}")


def _arrow_type(pa: Any, kind: Kind) -> Any:
    types = {Kind.INT: pa.int64(), Kind.COUNT: pa.int64(), Kind.FLOAT: pa.float64(), Kind.TEXT: pa.string(),
             Kind.CATEGORY: pa.dictionary(pa.int32(), pa.string()), Kind.TIME: pa.timestamp("us", tz="UTC"), Kind.BOOL: pa.bool_()}
    try:
        return types[kind]
    except KeyError:
        raise ConfigError(f"no Parquet type for column kind {kind!r}") from None


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
    out = Path(os.path.expanduser(os.fspath(path)))
    if partition is not None:
        with gc_paused():  # the paths and ledgers of thousands of files: freed as each part is written
            return _write_dataset(_source_tables(source, table, pricing, schema), out, table, partition)
    if out.suffix.lower() == ".parquet":
        arrow = _source_table(source, table, pricing, schema)
        return atomic_write(out, lambda tmp: pq.write_table(arrow, tmp))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot write {out}: {exc.strerror or exc}") from None
    with gc_paused():
        _write_sessions(_source_tables(source, table, pricing, schema), out)
    return out


WRITERS = 2  # threads writing a folder's session files: their waits for the disk overlap


def _write_sessions(tables: Iterable[Any], out: Path) -> None:
    """One file per session of ``tables`` (Arrow tables, each session's rows in one) in folder ``out``:
    each encoded and written by one of ``WRITERS`` threads while the next sessions are read
    (encoding, creating and writing a small file mostly run without the GIL). At most twice as
    many files as writers are under way; the first error stops the export.

    Each file is renamed into place whole (a reader, or an export that fails or is stopped, never
    sees half a file) but not synced one by one: the folder is synced once at the end. The files
    are rebuilt by exporting again, so a crash of the machine just after an export, which could
    leave some empty or missing, costs an export, while a sync per file cost a third of its time."""
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    pending: deque[Future] = deque()
    with ThreadPoolExecutor(WRITERS, thread_name_prefix="nbagent-parquet") as writers:
        try:
            for arrow in tables:
                ids, paths = _keys(arrow)
                for start, length in _runs(ids, paths):
                    while len(pending) >= 2 * WRITERS or (pending and pending[0].done()):
                        pending.popleft().result()
                    name = out / f"{_file_name(paths[start], ids[start])}.parquet"
                    pending.append(writers.submit(_write_session, name, arrow.slice(start, length)))
            while pending:
                pending.popleft().result()
            sync_directory(out)
        finally:
            for future in pending:
                future.cancel()


def _write_session(path: Path, table: Any) -> None:
    atomic_write_bytes(path, _parquet_bytes(table), sync=False)


PARTITIONS = ("month",)


def _write_dataset(tables: Iterable[Any], out: Path, table: str, partition: str) -> Path:
    """``tables`` (Arrow tables) appended to the dataset in folder ``out``, one file per month; rows
    of the same sessions already there are removed first (see :func:`to_parquet`).

    Each month's file is written as the tables come (one row group per table and month) by a
    thread of its own, while the next table is read: Parquet's encoder releases the GIL. The files
    appear in the folder, and earlier rows of the same sessions go, only once every table is in;
    an error leaves the dataset as it was.
    """
    import uuid
    from concurrent.futures import Future, ThreadPoolExecutor

    if partition not in PARTITIONS:
        raise ConfigError(f"partition must be one of {', '.join(map(repr, PARTITIONS))}, not {partition!r}")
    if table != "usage":
        raise ConfigError("partition='month' needs the usage table (its turns have a start time)")
    if out.suffix.lower() == ".parquet":
        raise ConfigError(f"a partitioned export is a folder, not {out.name}")
    earlier = any(out.glob("*=*/*.parquet"))  # sessions exported before: their earlier rows go
    keys: set[str] = set()
    batch = f"part-{uuid.uuid4().hex[:12]}.parquet"
    with contextlib.ExitStack() as files, ThreadPoolExecutor(1, thread_name_prefix="nbagent-parquet") as writer:
        months = _MonthFiles(out, partition, batch, files)
        pending: Future | None = None
        for arrow in tables:
            if earlier:
                keys.update(_session_keys(*_keys(arrow)))
            if pending is not None:
                pending.result()
            pending = writer.submit(months.append, arrow)
        if pending is not None:
            pending.result()
        if earlier:
            _drop_sessions(out, keys)
    out.mkdir(parents=True, exist_ok=True)
    return out


class _MonthFiles:
    """The month files of one export, each a Parquet writer on a staged file (renamed into place
    when ``files`` closes)."""

    def __init__(self, out: Path, partition: str, batch: str, files: contextlib.ExitStack) -> None:
        self.out, self.partition, self.batch, self.files = out, partition, batch, files
        self.writers: dict[str, Any] = {}

    def append(self, arrow: Any) -> None:
        import numpy as np
        import pyarrow.parquet as pq

        months = arrow.column("started").to_numpy().astype("datetime64[M]")  # NaT where null
        for month in np.unique(months):  # NaT sorts last
            rows = np.flatnonzero(np.isnat(months) if np.isnat(month) else months == month)
            name = "unknown" if np.isnat(month) else str(month)
            writer = self.writers.get(name)
            if writer is None:
                tmp = self.files.enter_context(staged_file(self.out / f"{self.partition}={name}" / self.batch))
                writer = pq.ParquetWriter(tmp, arrow.schema, use_dictionary=_dictionary_columns(arrow.schema))
                self.files.callback(writer.close)  # before the staged file is renamed
                self.writers[name] = writer
            writer.write_table(arrow.take(rows))


def _dictionary_columns(schema: Any) -> list[str]:
    """The columns worth Parquet's dictionary encoding: few distinct values (encoding every column
    costs a third more time for files a tenth smaller)."""
    import pyarrow as pa

    return [f.name for f in schema if pa.types.is_dictionary(f.type) or f.name in _KEYS]


def _drop_sessions(out: Path, keys: set[str]) -> None:
    """Rewrite the dataset's files that hold rows of ``keys`` (session id and path) without them."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    for part in sorted(out.glob("*=*/*.parquet")):
        try:
            file = pq.ParquetFile(part)
            ids = file.read(columns=["session_id", "path"])
        except (OSError, pa.ArrowException) as exc:
            raise StorageError(f"cannot read {part} of the dataset {out}: {exc}") from None
        mask = np.fromiter((k in keys for k in _session_keys(*_keys(ids))), dtype=bool, count=ids.num_rows)
        if not mask.any():
            continue
        if mask.all():
            part.unlink()
            continue
        kept = file.read().filter(pa.array(~mask))
        atomic_write(part, functools.partial(_write_table, kept))


def _parquet_bytes(table: Any) -> Any:
    """One session's Parquet file, built in memory (written by :func:`atomic_write_bytes`): Parquet's
    dictionary encoding for the few-valued columns only (:func:`_dictionary_columns`) and min/max
    statistics for the columns a query picks files by (:func:`_statistics_columns`); the values,
    types and schema a reader gets are the same. 0.7 ms a file instead of 1 ms."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_dictionary=_dictionary_columns(table.schema),
                   write_statistics=_statistics_columns(table.schema))
    return memoryview(sink.getvalue())


def _statistics_columns(schema: Any) -> list[str]:
    """The columns whose min/max statistics are written in a session's file: its keys, its row key and
    its times (a query picks sessions and periods by them); statistics on every column cost 30% more."""
    import pyarrow as pa

    return [f.name for f in schema if f.name in _KEYS or pa.types.is_timestamp(f.type) or not f.nullable]


def _write_table(table: Any, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)


# --- sources ------------------------------------------------------------------------------


_BATCH = 1_000  # at most this many sessions read into one Arrow table while the previous one is written
_PARTS = 8  # a folder is read in about this many parts (of at least 250 sessions), so writing overlaps reading


def _source_tables(source: Any, table: str, pricing: Mapping | None, schema: Any) -> Iterator[Any]:
    """:func:`_source_table` in parts: saved sessions a part at a time (see ``_PARTS``), anything else whole."""
    pd = _pandas()
    if table != "usage" or isinstance(source, pd.DataFrame) or _is_conversation(source):
        yield _source_table(source, table, pricing, schema)
        return
    from .sessions import expand_paths, ledgers_of

    pa, _ = _require_pyarrow()
    paths = expand_paths(source)
    size = min(_BATCH, max(250, -(-len(paths) // _PARTS)))
    for start in range(0, len(paths), size):
        yield _ledger_table(pa, ledgers_of(paths[start: start + size], pricing, arrow=True), schema)


def _source_table(source: Any, table: str, pricing: Mapping | None, schema: Any):
    """An Arrow table in ``schema``: session_id, path, the row key and the table's columns, rows
    grouped by session."""
    pa, _ = _require_pyarrow()
    pd = _pandas()
    if isinstance(source, pd.DataFrame):
        frame = _from_dataframe(source, table)
    elif _is_conversation(source):
        df = source.usage_df(pricing=pricing) if table == "usage" else source.tool_calls_df()
        frame = _keyed(df, str(source.conversation_id), None)
    elif table == "usage":  # saved sessions: from their decoded ledgers, no DataFrame in between
        from .sessions import expand_paths, ledgers_of

        return _ledger_table(pa, ledgers_of(expand_paths(source), pricing, arrow=True), schema)
    else:
        frame = _tool_calls_from_files(source)
    return _arrow_table(pa, frame, schema)


def _is_conversation(source: Any) -> bool:
    return has_plumbing(source) and hasattr(source, "usage_df")


def _ledger_table(pa: Any, ledgers: Any, schema: Any):
    """The usage table of saved sessions (``sessions.read_ledgers``) in ``schema``, each column
    converted from its plain form as the DataFrame's would be."""
    import numpy as np

    session = pa.array(np.repeat(np.arange(len(ledgers.ids), dtype=np.int64), ledgers.lengths))
    arrays = [pa.array(ledgers.ids, type=pa.string()).take(session),
              pa.array(ledgers.paths, type=pa.string()).take(session)]
    strings = getattr(ledgers.table, "arrays", {})  # an ArrowTurnTable's: texts cut to a limit from them
    for c, field in zip((USAGE_INDEX, *USAGE), list(schema)[2:]):
        try:
            values = strings[c.name] if c.limit and c.name in strings else c.extract(ledgers.table)
            arrays.append(_plain_array(pa, c, values, field.type))
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise ConfigError(f"column {field.name!r} does not convert to {field.type}: {exc}") from None
    return pa.Table.from_arrays(arrays, schema=schema)


def _plain_array(pa: Any, column: Column, values: Any, type_: Any):
    """A column's plain form (see :mod:`.columns`) as an Arrow array of ``type_``: the values its
    pandas column holds, NA as null."""
    import numpy as np

    from .column_values import category_codes, count_ints, epoch_us, shortened_arrow

    kind = column.kind
    if isinstance(values, Coded) and kind is not Kind.CATEGORY:
        values = values.floats() if kind is Kind.COUNT else values.tolist()
    if kind is Kind.INT:
        return pa.array(np.ascontiguousarray(values, dtype=np.int64), type=type_)
    if kind is Kind.COUNT:
        ints, mask = count_ints(values)  # as Column.to_pandas
        return pa.array(ints, type=type_, mask=mask)
    if kind is Kind.FLOAT:
        return pa.array(np.asarray(values, dtype=np.float64), type=type_, from_pandas=True)  # NaN: null
    if kind is Kind.TEXT:
        return shortened_arrow(values, column.limit) if column.limit else pa.array(values, type=type_)
    if kind is Kind.CATEGORY:  # the categories in use, in the Categorical's order
        codes, categories = category_codes(values, column.categories)
        used = np.unique(codes[codes >= 0])
        renumber = np.full(len(categories) + 1, -1, dtype=np.int32)  # the last: NA (-1) stays -1
        renumber[used] = np.arange(len(used), dtype=np.int32)
        indices = pa.array(renumber[codes], type=type_.index_type, mask=codes < 0)
        return pa.DictionaryArray.from_arrays(indices, pa.array([categories[i] for i in used], type=type_.value_type))
    if kind is Kind.TIME:
        us, nat = epoch_us(values)
        return pa.array(us, type=type_, mask=nat)
    return pa.array(np.asarray(values, dtype=bool), type=type_)


def _tool_calls_from_files(source: Any):
    from ..core.session_file import read_steps
    from .tables import Table
    from .frames import build_frame, tool_call_rows
    from .sessions import expand_paths

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
        raise ConfigError("a DataFrame source needs a session_id column (load_sessions gives one); pass the "
                          "Conversation itself for its own frames")
    if "path" not in df.columns:
        df = df.assign(path=None)
    missing = [c.name for c in (index, *columns) if c.name not in df.columns]
    if missing:
        raise ConfigError(f"the DataFrame has no {', '.join(missing)} column(s): it is not a {table} frame")
    key = _pandas().Series(_session_keys(*_frame_keys(df)), index=df.index)
    order = {k: i for i, k in enumerate(dict.fromkeys(key.tolist()))}
    return df.iloc[key.map(order).argsort(kind="stable")].reset_index(drop=True)  # each session's rows together


# --- conversion ---------------------------------------------------------------------------


def _arrow_table(pa: Any, frame: Any, schema: Any):
    arrays = []
    for field in schema:
        try:
            arrays.append(_arrow_array(pa, frame[field.name], field.type))
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise ConfigError(f"column {field.name!r} does not convert to {field.type}: {exc}") from None
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


def _keys(arrow: Any) -> tuple[list, list]:
    """Each row's session id and path (None for a live conversation) of an Arrow table."""
    return arrow.column("session_id").to_pylist(), arrow.column("path").to_pylist()


def _frame_keys(frame: Any) -> tuple[list, list]:
    path = frame["path"].astype(object)
    return frame["session_id"].astype(object).tolist(), path.where(frame["path"].notna(), None).tolist()


def _runs(ids: list, paths: list) -> list[tuple[int, int]]:
    """(start, length) of each run of rows with the same session id and path."""
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[start] or paths[i] != paths[start]:
            runs.append((start, i - start))
            start = i
    return runs


def _session_keys(ids: list, paths: list) -> list[str]:
    """One key per row: its session id and path (a session is one source file)."""
    return [f"{i}\0{'' if p is None else p}" for i, p in zip(ids, paths)]


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
