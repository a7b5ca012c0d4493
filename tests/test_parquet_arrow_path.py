"""to_parquet reads saved sessions straight into Arrow (decode_turns_arrow, no lists between): the
tables read back are load_sessions' rows, and an export stopped midway leaves no half file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import nbagent  # noqa: E402
from nbagent import FinishReason, TurnStatus, load_sessions  # noqa: E402
from nbagent.analysis.parquet import parquet_schema  # noqa: E402
from nbagent.core.session_file import save_conversation  # noqa: E402
from nbagent.core.turn_columns import NotPlain, decode_turns, decode_turns_arrow  # noqa: E402

from support.many_sessions import synthetic_state, write_sessions  # noqa: E402

TURNS = [  # as this version writes them, and with what older or partial ledgers leave out
    {"turn": 0, "prompt": "hi", "model": "gpt-4o", "provider": "openai", "started_at": 1, "finished_at": 2.5,
     "first_token_at": 1.5, "usage": {"prompt_token_count": 10, "candidates_token_count": 3}, "model_calls": 1,
     "tool_calls": 0, "finish_reason": "STOP", "status": "done", "error": "", "http_code": 0,
     "prefix_change": "tools", "context_tokens": 13, "context_window": 128000},
    {"turn": 1, "prompt": None, "started_at": 3.0, "usage": None, "status": ""},  # a running turn, no usage
    {"turn": 2, "model": "m", "started_at": 4.0, "finished_at": None, "status": "error", "error": "boom",
     "http_code": 429, "finish_reason": None, "context_window": None},
]


def test_decode_turns_arrow_holds_the_values_of_decode_turns():
    lists, arrays = decode_turns(TURNS), decode_turns_arrow(TURNS)
    for name in ("turn", "prompt", "model", "provider", "started_at", "finished_at", "first_token_at",
                 "model_calls", "tool_calls", "finish_reason", "status", "error", "http_code", "prefix_change",
                 "context_tokens", "context_window", "usage.prompt_token_count", "usage.thoughts_token_count"):
        want = [getattr(v, "value", v) for v in lists.values(name)]  # the enum fields as their values
        assert arrays[name].to_pylist() == want, name
    assert arrays["status"].to_pylist() == ["done", "done", "error"]  # no status or "": the turn ended
    assert arrays["usage.prompt_token_count"].to_pylist() == [10, 0, 0] and arrays["started_at"].to_pylist()[0] == 1.0
    assert lists.values("finish_reason")[0] is FinishReason.STOP and lists.values("status")[2] is TurnStatus.ERROR


@pytest.mark.parametrize("bad", [{"model_calls": "3"}, {"status": "paused"}, {"turn": None}, {"tool_calls": -1},
                                 {"usage": [["prompt_token_count", 1]]}, {"finish_reason": "MAYBE"}])
def test_decode_turns_arrow_refuses_what_decode_turns_refuses(bad):
    turns = [TURNS[0], {**TURNS[2], **bad}]
    with pytest.raises(NotPlain):
        decode_turns(turns)
    with pytest.raises(NotPlain):
        decode_turns_arrow(turns)


def assert_same_rows(back, paths):
    """``back`` (a frame read from Parquet) holds the rows and values load_sessions gives ``paths``."""
    want = load_sessions(paths).sort_values(["session_id", "turn"]).reset_index(drop=True)
    back = back.sort_values(["session_id", "turn"]).reset_index(drop=True)
    assert list(back.columns) == [f.name for f in parquet_schema("usage")] and len(back) == len(want) > 0
    for name in back.columns:
        b, w = back[name], want[name]
        if name != "session_id" and w.dtype == "category":
            assert b.dtype == "category", name
        assert (b.isna().to_numpy() == w.isna().to_numpy()).all(), name
        assert b[b.notna()].astype(object).tolist() == w[w.notna()].astype(object).tolist(), name


def mixed_sessions(folder, edited):
    """Sessions of every shape: tool calls or none, an error turn, an unpriced model; ``edited``: one
    ledger holds a hand-edited count ("3") that only TurnRecord.from_dict reads (Arrow refuses it)."""
    paths = [save_conversation(synthetic_state(i, 3 + i % 5, tools=i % 2 == 0), folder / f"s{i}.json")
             for i in range(6)]
    doc = json.loads(paths[1].read_text())
    doc["turns"][0]["model_calls"] = "3" if edited else 3
    doc["turns"][1]["status"], doc["turns"][1]["model"] = "error", "my-finetune"
    paths[1].write_text(json.dumps(doc))
    return paths


@pytest.mark.parametrize("edited", [False, True])
@pytest.mark.parametrize("target", ["all.parquet", "folder", "dataset"])
def test_every_export_reads_back_as_load_sessions(tmp_path, target, edited):
    paths = mixed_sessions(tmp_path / "sessions", edited)
    out = tmp_path / target
    nbagent.to_parquet(tmp_path / "sessions", out, partition="month" if target == "dataset" else None)
    if target == "dataset":
        back = pq.read_table(out).to_pandas().drop(columns="month")
    else:
        back = pq.read_table(out if target.endswith(".parquet") else sorted(out.glob("*.parquet"))).to_pandas()
    edited = back[(back["session_id"] == "session-00001") & (back["turn"] == 0)]
    assert edited["model_calls"].tolist() == [3]  # read as TurnRecord.from_dict reads it
    assert_same_rows(back, paths)


def test_a_folder_export_in_parts_reads_back_as_load_sessions(tmp_path):
    paths = write_sessions(tmp_path / "sessions", 520, turns=(1, 4))  # read in parts of 250 sessions
    out = nbagent.to_parquet(tmp_path / "sessions", tmp_path / "usage")
    files = sorted(out.glob("*.parquet"))
    assert len(files) == 520 and not list(out.glob(".*"))
    assert_same_rows(pq.read_table(files).to_pandas(), paths)


STOPPED = """
import os, signal, sys
import nbagent
from nbagent.core import atomic_file

renamed = []
real_replace = os.replace

def replace(src, dst):  # the export is killed as it renames its fourth file
    if len(renamed) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    renamed.append(dst)
    real_replace(src, dst)

atomic_file.os.replace = replace
nbagent.to_parquet(sys.argv[1], sys.argv[2])
"""


def test_an_export_killed_midway_leaves_whole_files_only(tmp_path):
    write_sessions(tmp_path / "sessions", 12, turns=(2, 4))
    out = tmp_path / "usage"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", STOPPED, str(tmp_path / "sessions"), str(out)], env=env,
                          capture_output=True, timeout=120)
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    files = sorted(out.glob("*.parquet"))
    assert len(files) == 3  # the files renamed before the kill, each whole
    for f in files:
        assert pq.read_table(f).num_rows >= 2
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in out.iterdir() if p not in files)
    nbagent.to_parquet(tmp_path / "sessions", out)  # exporting again completes the folder
    assert len(list(out.glob("*.parquet"))) == 12
