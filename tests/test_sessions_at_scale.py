"""Sessions at scale: one timestamp unit in list_sessions, category columns that stay categories in
Parquet, and a folder of sessions exported as one Parquet file that DuckDB reads like the folder."""

from __future__ import annotations

import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

import nbagent  # noqa: E402
from nbagent import list_sessions, load_sessions  # noqa: E402
from nbagent.analysis.columns import USAGE, Kind  # noqa: E402
from nbagent.analysis.parquet import parquet_schema  # noqa: E402

from support.many_sessions import write_sessions  # noqa: E402

CATEGORIES = [c.name for c in USAGE if c.kind is Kind.CATEGORY]


def test_list_sessions_has_one_timestamp_unit_whatever_the_files_hold(tmp_path):
    paths = write_sessions(tmp_path / "s", 3, turns=(2, 4))
    (tmp_path / "s" / "broken.json").write_text('{"format": "nbagent.session", "version": 3, "turns": [')
    unit = load_sessions(paths)["started"].dtype
    assert str(unit) == "datetime64[ns, UTC]"
    folder = list_sessions(tmp_path / "s")  # whole-second times, sub-microsecond ones, and a NaT row
    for df in (folder, list_sessions(paths[0]), list_sessions(tmp_path / "empty-*.json"),
               list_sessions(tmp_path / "s" / "broken.json")):
        assert df["created"].dtype == unit and df["updated"].dtype == unit
    assert folder["created"].isna().sum() == 1  # the damaged file
    first = load_sessions(paths).groupby("path", observed=True)["started"].min()
    good = folder.dropna(subset=["created"]).set_index("path")["created"]
    assert (good.sort_index() == first.sort_index()).all()


def test_category_columns_come_back_from_parquet_as_categories(tmp_path):
    write_sessions(tmp_path / "s", 6, turns=(5, 15))
    frame = load_sessions(tmp_path / "s")
    assert all(pa.types.is_dictionary(parquet_schema("usage").field(n).type) for n in CATEGORIES)
    one = nbagent.to_parquet(tmp_path / "s", tmp_path / "usage.parquet")
    back = pq.read_table(one).to_pandas()
    for name in CATEGORIES:
        assert isinstance(back[name].dtype, pd.CategoricalDtype), name
        assert back[name].astype(object).where(back[name].notna(), None).tolist() == \
            frame[name].astype(object).where(frame[name].notna(), None).tolist(), name
    assert back["status"].isin(["done", "error"]).all() and (back["status"] == "error").any()
    folder = nbagent.to_parquet(tmp_path / "s", tmp_path / "usage")  # a file per session: the same schema
    assert all(pq.read_schema(f).equals(parquet_schema("usage"), check_metadata=True) for f in folder.glob("*"))
    # DuckDB reads them as text
    rows = duckdb.sql(f"select model, count(*) as n from '{folder}/*.parquet' group by model order by model").df()
    assert dict(zip(rows["model"], rows["n"])) == frame.groupby("model", observed=True).size().to_dict()


def test_a_folder_of_sessions_exports_to_one_file_duckdb_reads_like_the_folder(tmp_path):
    paths = write_sessions(tmp_path / "s", 20, turns=(3, 10))
    one = nbagent.to_parquet(tmp_path / "s", tmp_path / "out" / "usage.parquet")
    folder = nbagent.to_parquet(tmp_path / "s", tmp_path / "per-session")
    assert one.is_file() and sorted(p.name for p in one.parent.iterdir()) == ["usage.parquet"]
    assert len(list(folder.glob("*.parquet"))) == len(paths)
    query = ("select session_id, model, count(*) as turns, sum(total_tokens) as tokens, sum(cost_usd) as usd "
             "from '{}' group by all order by session_id")
    a = duckdb.sql(query.format(one)).df()
    b = duckdb.sql(query.format(f"{folder}/*.parquet")).df()
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == len(paths) and a["turns"].sum() == len(load_sessions(paths))
    assert one.stat().st_size < sum(f.stat().st_size for f in folder.glob("*.parquet")) / 4
