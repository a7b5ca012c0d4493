"""nbagent.to_parquet: one stable schema, whatever the sessions hold, read back by DuckDB as one table."""

from __future__ import annotations

import math

import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

import nbagent  # noqa: E402
from nbagent import Conversation, FinishReason, NbagentError, TurnStatus, load_sessions  # noqa: E402
from nbagent.analysis.parquet import parquet_schema  # noqa: E402
from nbagent.core.session_file import save_conversation  # noqa: E402

from support.many_sessions import synthetic_state  # noqa: E402


def two_shapes(folder):
    """One session with tool calls, cached tokens and thinking; one without tool calls, with an
    error turn and a model nobody prices (cost NaN, price_source NA in every row)."""
    rich = synthetic_state(0, 12)
    plain = synthetic_state(1, 6, tools=False)
    plain.turns[2].status, plain.turns[2].error, plain.turns[2].http_code = TurnStatus.ERROR, "rate limited", 429
    plain.turns[2].finish_reason = FinishReason.ERROR
    for rec in plain.turns:
        rec.model, rec.provider = "my-finetune", ""
    return [save_conversation(rich, folder / "rich.json"), save_conversation(plain, folder / "plain.json")]


def test_a_folder_of_sessions_is_one_table_with_one_schema(tmp_path):
    paths = two_shapes(tmp_path / "sessions")
    out = nbagent.to_parquet(tmp_path / "sessions", tmp_path / "usage")
    files = sorted(out.glob("*.parquet"))
    assert [f.name.split("-")[0] for f in files] == ["plain", "rich"]  # the stem, then a hash of the path
    schemas = [pq.read_schema(f) for f in files]
    assert schemas[0].equals(schemas[1], check_metadata=True)
    assert schemas[0].equals(parquet_schema("usage"), check_metadata=True)
    assert schemas[0].field("started").type == pa.timestamp("us", tz="UTC")
    assert schemas[0].field("input_tokens").type == pa.int64() and not schemas[0].field("turn").nullable
    frame = load_sessions(paths)
    sql = duckdb.sql(f"select session_id, count(*) as turns, sum(total_tokens) as tokens, sum(cost_usd) as usd, "
                     f"count(error) as errors from '{out}/*.parquet' group by session_id order by session_id").df()
    want = frame.groupby("session_id", observed=True).agg(turns=("turn", "size"), tokens=("total_tokens", "sum"),
                                                          usd=("cost_usd", "sum"), errors=("error", "count"))
    want = want.sort_index()
    assert sql["session_id"].tolist() == want.index.astype(str).tolist()
    assert sql["turns"].tolist() == want["turns"].tolist() and sql["tokens"].tolist() == want["tokens"].tolist()
    assert sql["errors"].tolist() == want["errors"].tolist() and sql["errors"].sum() >= 1
    assert sql["usd"].iloc[0] == pytest.approx(want["usd"].iloc[0]) and sql["usd"].iloc[0] > 0
    assert math.isnan(sql["usd"].iloc[1])  # unknown costs are NULL: a session of them sums to NULL, not $0
    # the unpriced session: unknown costs and NA text are NULL
    plain = duckdb.sql(f"select cost_usd, price_source, started from '{files[0]}'").df()
    assert plain["cost_usd"].isna().all() and plain["price_source"].isna().all()
    assert plain["started"].dt.tz is not None  # TIMESTAMP WITH TIME ZONE
    assert (plain["started"].dt.tz_convert("UTC") == frame[frame.session_id == "session-00001"]["started"]
            .reset_index(drop=True)).all()


def test_exporting_again_replaces_a_session_and_a_live_conversation_joins(tmp_path):
    paths = two_shapes(tmp_path / "sessions")
    out = tmp_path / "usage"
    nbagent.to_parquet(paths[0], out)
    nbagent.to_parquet(paths, out)  # later, both: rich.parquet is rewritten, not doubled
    conv = nbagent.Agent(model="demo").conversation
    conv.ask("hello")
    nbagent.to_parquet(conv, out)
    counts = duckdb.sql(f"select session_id, count(*) as n, count(path) as with_path from '{out}/*.parquet' "
                        "group by session_id order by session_id").df()
    n = dict(zip(counts["session_id"], counts["n"]))
    assert n == {"session-00000": 12, "session-00001": 6, conv.conversation_id: 1}
    live = counts[counts.session_id == conv.conversation_id]
    assert live["n"].tolist() == [1] and live["with_path"].tolist() == [0]


def test_one_file_from_a_dataframe_and_the_tool_calls_table(tmp_path):
    paths = two_shapes(tmp_path / "sessions")
    frame = load_sessions(paths)
    one = nbagent.to_parquet(frame, tmp_path / "all.parquet")
    back = pq.read_table(one)
    assert back.schema.equals(parquet_schema("usage"), check_metadata=True) and back.num_rows == len(frame)
    assert back.column("total_tokens").to_pylist() == frame["total_tokens"].tolist()
    calls = nbagent.to_parquet(paths, tmp_path / "calls.parquet", table="tool_calls")
    table = pq.read_table(calls)
    assert table.schema.equals(parquet_schema("tool_calls"), check_metadata=True)
    expected = sum(len(Conversation.load(p).tool_calls_df()) for p in paths)
    assert table.num_rows == expected > 0
    assert set(table.column("session_id").to_pylist()) == {"session-00000"}  # the plain session made no calls
    by_approval = duckdb.sql(f"select approval, count(*) as n from '{calls}' group by approval").df()
    assert set(by_approval["approval"]) <= {"auto", "approved", "denied"} and by_approval["n"].sum() == expected
    empty = nbagent.to_parquet(Conversation.load(paths[1]), tmp_path / "none.parquet", table="tool_calls")
    assert pq.read_schema(empty).equals(parquet_schema("tool_calls"), check_metadata=True)
    assert pq.read_table(empty).num_rows == 0


def test_bad_sources_and_tables_are_config_errors(tmp_path):
    paths = two_shapes(tmp_path / "sessions")
    with pytest.raises(NbagentError) as err:
        nbagent.to_parquet(paths, tmp_path / "x.parquet", table="history")
    assert err.value.kind == "config" and "usage" in str(err.value)
    with pytest.raises(NbagentError) as err:
        nbagent.to_parquet(Conversation.load(paths[0]).usage_df(), tmp_path / "x.parquet")
    assert err.value.kind == "config" and "session_id" in str(err.value)
    with pytest.raises(NbagentError) as err:
        nbagent.to_parquet(load_sessions(paths).drop(columns="cost_usd"), tmp_path / "x.parquet")
    assert err.value.kind == "config" and "cost_usd" in str(err.value)
    with pytest.raises(NbagentError) as err:
        nbagent.to_parquet(tmp_path / "missing.json", tmp_path / "x.parquet")
    assert err.value.kind == "io"


def test_the_schema_names_every_usage_column_with_its_meaning():
    from nbagent.analysis.frames import USAGE_COLUMNS

    schema = parquet_schema("usage")
    assert schema.names == ["session_id", "path", "turn", *USAGE_COLUMNS]
    assert all(schema.field(n).metadata[b"doc"] for n in schema.names)
    assert schema.metadata[b"nbagent.table"] == b"usage"


def test_a_month_partitioned_dataset_appends_replaces_and_reads_back_the_same_rows(tmp_path):
    folder = tmp_path / "sessions"
    # sessions start an hour apart from 2026-09-21: 0..3 in September, 300 in October
    paths = [save_conversation(synthetic_state(i, 4 + i % 3), folder / f"s{i}.json") for i in (0, 1, 2, 300)]
    out = tmp_path / "usage"
    nbagent.to_parquet(paths[:2], out, partition="month")
    nbagent.to_parquet(paths[1:], out, partition="month")  # appended; s1 again replaces its rows
    files = sorted(str(p.relative_to(out).parent) for p in out.glob("*/*.parquet"))
    assert files == ["month=2026-09", "month=2026-09", "month=2026-10"]  # a file per month and export
    want = load_sessions(paths)
    back = pq.read_table(out).to_pandas()  # pyarrow reads the folder as one dataset, month from the path
    assert back["month"].astype(str).value_counts().to_dict() == {"2026-09": 15, "2026-10": 4}
    back = back.drop(columns="month").sort_values(["session_id", "turn"]).reset_index(drop=True)
    want = want.sort_values(["session_id", "turn"]).reset_index(drop=True)
    assert list(back.columns) == [f.name for f in parquet_schema("usage")]
    want = want[list(back.columns)]
    for name in want.columns:  # the same values, and the same dtypes (categories stay categories)
        if name != "session_id" and want[name].dtype == "category":
            assert back[name].dtype == "category", name  # dictionary-encoded in the files
        b, w = back[name], want[name]
        assert (b.isna().to_numpy() == w.isna().to_numpy()).all(), name
        assert b[b.notna()].astype(object).tolist() == w[w.notna()].astype(object).tolist(), name
    assert back["status"].dtype == "category" and str(back["started"].dtype) == "datetime64[us, UTC]"
    sql = duckdb.sql(f"select month, count(*) as n from read_parquet('{out}/*/*.parquet', hive_partitioning=true) "
                     "group by month order by month").fetchall()
    assert sql == [("2026-09", 15), ("2026-10", 4)]
    with pytest.raises(NbagentError, match="usage table"):
        nbagent.to_parquet(paths, out, table="tool_calls", partition="month")
    with pytest.raises(NbagentError, match="partition must be"):
        nbagent.to_parquet(paths, out, partition="day")


def test_a_session_file_encodes_categories_as_dictionaries_and_keeps_statistics_for_keys_and_times(tmp_path):
    two_shapes(tmp_path / "sessions")
    out = nbagent.to_parquet(tmp_path / "sessions", tmp_path / "usage")
    for f in sorted(out.glob("*.parquet")):
        meta = pq.ParquetFile(f).metadata
        chunks = {meta.schema.column(i).name: meta.row_group(0).column(i) for i in range(meta.num_columns)}
        for name in ("session_id", "path", "model", "status", "finish_reason"):
            assert any("DICTIONARY" in e for e in chunks[name].encodings), name
        for name in ("session_id", "turn", "started"):  # a query picks sessions and periods by them
            assert chunks[name].is_stats_set and chunks[name].statistics.has_min_max, name
        assert pq.read_table(f).column("model").type == pa.dictionary(pa.int32(), pa.string())
    assert not list(out.glob(".*.tmp"))  # no temporary file left behind


def test_a_session_file_that_cannot_be_written_is_a_storage_error_naming_it(tmp_path):
    paths = two_shapes(tmp_path / "sessions")
    out = nbagent.to_parquet(tmp_path / "sessions", tmp_path / "usage")
    blocked = sorted(out.glob("rich-*.parquet"))[0]
    blocked.unlink()
    blocked.mkdir()  # a folder where the file goes: the writer thread's rename fails
    with pytest.raises(NbagentError) as err:
        nbagent.to_parquet(paths, out)
    assert err.value.kind == "io" and blocked.name in str(err.value)
    assert not list(out.glob(".*.tmp"))


def test_atomic_write_bytes_replaces_the_file_whole_or_leaves_it(tmp_path):
    from nbagent.core.atomic_file import atomic_write_bytes

    target = tmp_path / "deep" / "f.bin"
    assert atomic_write_bytes(target, b"first") == target and target.read_bytes() == b"first"
    atomic_write_bytes(target, memoryview(b"second, longer"))
    assert target.read_bytes() == b"second, longer"
    with pytest.raises(TypeError):
        atomic_write_bytes(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"second, longer" and sorted(p.name for p in target.parent.iterdir()) == ["f.bin"]
