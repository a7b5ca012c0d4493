"""Turn ledgers decoded in columns (core/turn_columns.py) for load_sessions and to_parquet.

The columns must hold what ``TurnRecord.from_dict`` gives for every ledger, the plain ones this
version writes and the unusual ones (hand-edited counts, nulls, NaN), with orjson parsing the
ledgers or json alone; a damaged ledger among thousands is named; an export read in parts is the
same dataset as one read whole, and one that fails leaves the folder as it was.
"""

from __future__ import annotations

import json
import math

import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import nbagent.analysis.parquet as parquet  # noqa: E402
import nbagent.core.session_file as session_file  # noqa: E402
from nbagent import NbagentError, load_sessions, to_parquet  # noqa: E402
from nbagent.core.ledger import TurnRecord  # noqa: E402
from nbagent.core.session_file import ledger_columns, read_session_ledger, save_conversation  # noqa: E402
from nbagent.core.turn_columns import NotPlain, TurnColumns, decode_turns  # noqa: E402

from support.many_sessions import synthetic_state, write_sessions  # noqa: E402
from test_load_sessions import assert_same_values, expected_frame  # noqa: E402


def _records_columns(turns: list) -> TurnColumns:
    return TurnColumns.of_records([TurnRecord.from_dict(t) for t in turns])


def test_plain_ledgers_decode_to_what_the_records_hold(tmp_path):
    paths = write_sessions(tmp_path, 12, turns=(2, 9))
    turns = [t for p in paths for t in read_session_ledger(p).turns]
    assert any("error" not in t for t in turns) and any("error" in t for t in turns)  # compact dicts
    assert decode_turns(turns) == _records_columns(turns)


ODD = {  # what from_dict accepts, though this version never writes it so
    "a count as a string": {"model_calls": "3"},
    "a float count": {"tool_calls": 2.0},
    "a bool count": {"http_code": True},
    "a null count": {"context_tokens": None},
    "a null text": {"prompt": None, "error": None},
    "an int time": {"started_at": 1_790_000_000, "finished_at": 1_790_000_003},
    "an empty status": {"status": ""},
    "a null usage": {"usage": None},
    "a usage count as a float": {"usage": {"prompt_token_count": 10.0}},
}


@pytest.mark.parametrize("case", ODD)
def test_unusual_values_are_read_as_from_dict_reads_them(tmp_path, case):
    good = save_conversation(synthetic_state(3, 4), tmp_path / "a.json")
    doc = json.loads(good.read_text(encoding="utf-8"))
    doc["turns"][1] = dict(doc["turns"][1], **ODD[case])
    odd = tmp_path / "b.json"
    odd.write_text(json.dumps(doc), encoding="utf-8")
    try:  # nulls are read in columns; the rest by from_dict
        assert decode_turns(doc["turns"]) == _records_columns(doc["turns"])
    except NotPlain:
        pass
    ledgers = [read_session_ledger(good), read_session_ledger(odd)]
    assert ledger_columns(ledgers) == _records_columns(ledgers[0].turns + ledgers[1].turns)
    assert_same_values(load_sessions([good, odd]), expected_frame([good, odd]))


def test_a_damaged_ledger_among_many_names_its_file(tmp_path):
    paths = write_sessions(tmp_path, 30, turns=(2, 4))
    doc = json.loads(paths[17].read_text(encoding="utf-8"))
    doc["turns"][0]["status"] = "paused"
    paths[17].write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(NbagentError) as err:
        load_sessions(tmp_path)
    assert err.value.kind == "io" and paths[17].name in str(err.value) and "turn ledger" in str(err.value)
    with pytest.raises(NbagentError) as err:
        to_parquet(tmp_path, tmp_path / "usage", partition="month")
    assert paths[17].name in str(err.value)


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "json"])
def test_orjson_or_json_read_the_same_ledgers(tmp_path, monkeypatch, fast):
    pytest.importorskip("orjson")
    state = synthetic_state(4, 6)
    state.turns[2].finished_at = math.nan  # NaN (written as JSON's NaN): orjson refuses it, json reads it
    state.turns[3].prompt = "ünïcödé 😀 \u2028 \"quoted\" \\ ,\"steps\": [" * 3  # the steps' key inside a string
    path = save_conversation(state, tmp_path / "s.json")
    big = json.loads(path.read_text(encoding="utf-8"))
    big["turns"][4]["usage"]["total_token_count"] = 2**70  # past 64 bits: json reads it, the count is refused
    (tmp_path / "big.json").write_text(json.dumps(big), encoding="utf-8")
    if not fast:
        monkeypatch.setattr(session_file, "fast_loads", lambda: None)
    got = load_sessions(path)
    assert math.isnan(got["duration_s"].iloc[2]) and got["prompt"].iloc[3].startswith("ünïcödé")
    assert_same_values(got, expected_frame([path]))
    with pytest.raises(NbagentError, match="out of range"):
        load_sessions(tmp_path / "big.json")


def test_an_export_from_the_files_is_the_export_of_their_frame(tmp_path):
    paths = write_sessions(tmp_path / "s", 15, turns=(2, 12))
    from_files = pq.read_table(to_parquet(tmp_path / "s", tmp_path / "a.parquet"))
    from_frame = pq.read_table(to_parquet(load_sessions(paths), tmp_path / "b.parquet"))
    assert from_files.num_rows == sum(len(read_session_ledger(p).turns) for p in paths)
    assert from_files.equals(from_frame, check_metadata=True)


def _dataset(folder):
    """The dataset's rows in one order, categories as their values (each file has its own dictionary)."""
    table = pq.read_table(sorted(folder.glob("*/*.parquet")), schema=parquet.parquet_schema("usage"))
    df = table.to_pandas().sort_values(["path", "turn"]).reset_index(drop=True)
    return df.astype({c: object for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)})


def test_an_export_read_in_parts_is_the_same_dataset(tmp_path, monkeypatch):
    write_sessions(tmp_path / "s", 14, turns=(2, 9))
    whole = to_parquet(tmp_path / "s", tmp_path / "whole", partition="month")
    monkeypatch.setattr(parquet, "_BATCH", 3)  # five parts: several row groups in a month's file
    parts = to_parquet(tmp_path / "s", tmp_path / "parts", partition="month")
    assert sorted(p.parent.name for p in parts.glob("*/*.parquet")) == \
        sorted(p.parent.name for p in whole.glob("*/*.parquet"))
    assert max(pq.ParquetFile(p).num_row_groups for p in parts.glob("*/*.parquet")) > 1
    pd.testing.assert_frame_equal(_dataset(parts), _dataset(whole))
    again = to_parquet(tmp_path / "s", tmp_path / "parts", partition="month")  # exported again: replaced
    pd.testing.assert_frame_equal(_dataset(again), _dataset(whole))


def test_an_export_that_fails_in_a_later_part_leaves_the_dataset_as_it_was(tmp_path, monkeypatch):
    paths = write_sessions(tmp_path / "s", 9, turns=(2, 5))
    out = to_parquet(paths[:4], tmp_path / "usage", partition="month")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    paths[7].write_text('{"format": "nbagent.session", "version": 3, "turns": 5, "steps": []}', encoding="utf-8")
    monkeypatch.setattr(parquet, "_BATCH", 2)  # the damaged file is read after parts were written
    with pytest.raises(NbagentError) as err:
        to_parquet(tmp_path / "s", out, partition="month")
    assert paths[7].name in str(err.value)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # no new file, no temp file


def test_the_head_before_the_ledger_is_checked_as_entry_by_entry(tmp_path):
    """The head up to the ledger is parsed in one call when laid out as written: a key twice at its
    top level is still refused, a key twice or a "turns" key inside a nested object is not."""
    path = save_conversation(synthetic_state(6, 3), tmp_path / "s.json")
    text = path.read_text(encoding="utf-8")
    nested = text.replace('"settings":null', '"settings":{"model":"m","provider_options":{"turns":[1],"a":1,"a":2}}')
    assert nested != text
    (tmp_path / "nested.json").write_text(nested, encoding="utf-8")
    led = read_session_ledger(tmp_path / "nested.json")
    assert led.settings.provider_options == {"turns": [1], "a": 2} and len(led.turns) == 3
    twice = text.replace('"trimmed":0,', '"trimmed":0,"model":"other",')
    (tmp_path / "twice.json").write_text(twice, encoding="utf-8")
    with pytest.raises(NbagentError, match='twice.json has the key "model" twice'):
        load_sessions(tmp_path / "twice.json")
