"""Turn ledgers decoded in columns (core/turn_columns.py) for load_sessions and to_parquet.

The columns must hold what ``TurnRecord.from_dict`` gives for every ledger, the plain ones this
version writes and the unusual ones (hand-edited counts, nulls, NaN), with orjson parsing the
ledgers or json alone; a damaged ledger among thousands is named; an export read in parts is the
same dataset as one read whole, and one that fails leaves the folder as it was.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import fields

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


@pytest.fixture(params=["arrow", "python"])
def decoder(request, monkeypatch):
    """decode_turns through Arrow (pyarrow installed) or field by field in Python (without it)."""
    if request.param == "python":
        monkeypatch.setitem(sys.modules, "pyarrow", None)  # ``import pyarrow`` raises ImportError
    return request.param


MISSING = object()  # the key left out
ODD_VALUES = (None, MISSING, True, False, 0, 1, 7, 2.0, 3.7, -0.5, -1, 1e300, math.nan, math.inf, "", "3", "done",
              "STOP", "system", "no such member", "\ud800", 2**53, 2**53 + 1, 2**63, 2**70, -(2**63), [], {},
              [["prompt_token_count", 1]], {"prompt_token_count": 1})
# every TurnRecord field (a new one is decoded from its declaration alone), and two token counts
FIELDS = (*(f.name for f in fields(TurnRecord)), "usage.prompt_token_count", "usage.total_token_count")


def _typed(columns: TurnColumns) -> list:
    """Every value of the columns with its type (1 == 1.0 == True, FinishReason.STOP == "STOP"), NaN
    as a string (NaN != NaN)."""
    lists = list(columns.lists.values())
    lists += [columns.usage[name] for name in sorted(columns.usage)]
    return [[(type(v), "nan" if v != v else v) for v in values] for values in lists]


def _with(turn: dict, field: str, value) -> dict:
    turn = json.loads(json.dumps(turn))
    parent, _, key = field.rpartition(".")
    target = turn.setdefault(parent, {}) if parent else turn
    if value is MISSING:
        target.pop(key, None)
    else:
        target[key] = value
    return turn


def _read_in_columns(field: str, decoder: str) -> list:
    """The values of ``field`` the columns must read themselves, not leave to from_dict (Arrow
    also takes a float count, truncated as ``int()`` does, and a bool time, as ``float()`` does)."""
    name = field.rpartition(".")[2]
    arrow = decoder == "arrow"
    if name in ("prompt", "model", "provider", "error"):
        return [None, MISSING, "", "3", "done"]
    if name.endswith("_at"):
        return [None, MISSING, 0, 7, 2.0, -0.5, math.inf, 2**53] + ([True, False] if arrow else [])
    if name in ("finish_reason", "status", "prefix_change"):
        return [None, MISSING, {"finish_reason": "STOP", "status": "done", "prefix_change": "system"}[name]]
    if name == "usage":
        return [None, MISSING, {}, {"prompt_token_count": 1}]
    counts = [0, 7, 2**53] + ([2.0, 3.7, -0.5] if arrow else [])
    return counts if name == "turn" else [None, MISSING, *counts]


@pytest.mark.parametrize("field", FIELDS)
def test_each_odd_value_is_decoded_as_from_dict_reads_it_or_left_to_it(field, decoder):
    """Any value in any field: the columns hold what the records would, or NotPlain hands the
    ledger to from_dict (which then accepts or refuses it as it always did); never another value."""
    plain = [t.to_dict(compact=True) for t in synthetic_state(5, 3).turns]
    decoded = []
    for value in ODD_VALUES:
        turns = [plain[0], _with(plain[1], field, value), plain[2]]
        try:
            want = _typed(_records_columns(turns))
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
            want = None  # from_dict refuses the ledger: so must the columns
        try:
            got = _typed(decode_turns(turns))
        except NotPlain:
            continue
        assert want is not None and got == want, (field, value)
        decoded.append(value)
    missed = [v for v in _read_in_columns(field, decoder)
              if not any(v is d or (type(v) is type(d) and v == d) for d in decoded)]
    assert not missed, (field, missed)


def test_a_list_for_a_turn_or_a_usage_is_refused(decoder):
    """Arrow reads a list of key-value pairs as an object when the first row is one (``[]`` is
    one, with no pairs); from_dict refuses a list, and so do the columns."""
    plain = [t.to_dict(compact=True) for t in synthetic_state(5, 2).turns]
    no_usage = dict(plain[1], usage=None)
    for turns in ([dict(plain[0], usage=[]), no_usage], [dict(plain[0], usage=[["total_token_count", 9]]), no_usage],
                  [[], []], [list(map(list, plain[0].items())), plain[1]]):
        with pytest.raises(NotPlain):
            decode_turns(turns)
        with pytest.raises(TypeError):
            _records_columns(turns)


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


def test_a_head_in_any_layout_reads_as_the_one_written(tmp_path):
    """The head is parsed by orjson when it serializes back to the same bytes, and the whole file
    start without decoding it when it is ASCII; any other layout (indented, ASCII-escaped, an
    exponent written as json writes it, UTF-8 text, the steps' key inside a prompt) is read by
    json from the text, to the same head and ledger."""
    state = synthetic_state(7, 5)
    state.last_response = "naïve ☕ answer"
    state.turns[1].prompt = 'an ASCII prompt with ,"steps":[ inside'
    path = save_conversation(state, tmp_path / "written.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    want = read_session_ledger(path)
    assert want.turns[1]["prompt"].endswith(",\"steps\":[ inside") and len(want.turns) == 5
    layouts = {
        "indented.json": json.dumps(doc, indent=1, ensure_ascii=False),
        "escaped.json": json.dumps(doc, separators=(",", ":")),  # ASCII bytes, orjson would write UTF-8
        "exponent.json": json.dumps(dict(doc, trimmed=0, saved_at=1e16), separators=(",", ":")),  # json: 1e+16
        "utf8-ledger.json": json.dumps(dict(doc, turns=[dict(t, prompt="é " + t["prompt"]) for t in doc["turns"]]),
                                       ensure_ascii=False, separators=(",", ":")),
    }
    for name, text in layouts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        got = read_session_ledger(tmp_path / name)
        prompts = ["é " + t["prompt"] for t in want.turns] if name.startswith("utf8") else None
        assert got.turns == (want.turns if prompts is None else [dict(t, prompt=p) for t, p in
                                                                 zip(want.turns, prompts)]), name
        assert (got.conversation_id, got.saved_at) == (want.conversation_id,
                                                       1e16 if name == "exponent.json" else want.saved_at), name


def test_bytes_that_are_not_utf8_near_the_head_are_refused_as_before(tmp_path):
    """The first read is decoded as UTF-8 unless it is ASCII: a byte that is neither, even in the
    steps after the ledger, makes the file unreadable, as when the whole start was decoded."""
    path = save_conversation(synthetic_state(8, 2), tmp_path / "s.json")
    data = path.read_bytes()
    at = data.index(b'"content":"') + len(b'"content":"')
    assert at < 1 << 14
    path.write_bytes(data[:at] + b"\xff" + data[at:])
    with pytest.raises(NbagentError, match="not valid JSON") as err:
        load_sessions(path)
    assert err.value.kind == "io" and "s.json" in str(err.value)
