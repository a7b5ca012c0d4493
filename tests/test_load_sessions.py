"""load_sessions over many saved sessions: the same frame as loading each one, read fast.

The sessions come from ``support.many_sessions`` (cached reads, cache writes, thinking, tool calls
with approvals and denials, HTTP 429 error turns, several models), from the real agent loop (the
demo model with a tool) and from a version 1 file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

from nbagent import Agent, Conversation, NbagentError, load_sessions, tool  # noqa: E402
from nbagent.core.session_file import read_session_head, save_conversation  # noqa: E402

from support.many_sessions import synthetic_state, write_sessions  # noqa: E402

V1 = Path(__file__).resolve().parent / "data" / "sessions" / "demo-tools-v1.json"


def expected_frame(paths: list[Path]):
    """What load_sessions promises: each file's Conversation.load(...).usage_df(), concatenated."""
    frames = []
    for p in paths:
        conv = Conversation.load(p)
        df = conv.usage_df().reset_index()
        df.insert(0, "path", str(p))
        df.insert(0, "session_id", conv.conversation_id)
        df["user"] = ""  # Conversation.save records no user (Agent(user=..., save_to=...) does)
        df["source"] = "nbagent"  # nbagent's own session (not another agent's log)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def assert_same_values(got, want):
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    for col in want.columns:
        a = got[col].astype(object).where(got[col].notna(), None).tolist()
        b = want[col].astype(object).where(want[col].notna(), None).tolist()
        if col.endswith(("_usd", "_s", "_ratio", "_fill")):
            assert a == pytest.approx(b, nan_ok=True), col
        else:
            assert a == b, col


def test_many_sessions_give_the_frame_of_each_one_concatenated(tmp_path):
    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression."""
        return eval(expression, {"__builtins__": {}})

    paths = write_sessions(tmp_path, 12, turns=(3, 25))
    agent = Agent(model="demo", tools=[calculator])
    agent.ask("What is 6 * 7?")
    agent.ask("Thanks!")
    paths.append(agent.conversation.save(tmp_path / "zz-agent.json"))
    v1 = tmp_path / "zz-v1.json"
    v1.write_bytes(V1.read_bytes())
    paths.append(v1)
    got = load_sessions(tmp_path)
    want = expected_frame(paths)
    assert_same_values(got, want)
    # what the scripted sessions hold shows up: cached tokens, thinking, tool calls, errors
    assert got["cached_tokens"].sum() > 0 and got["thinking_tokens"].sum() > 0 and got["tool_calls"].sum() > 0
    assert (got["status"] == "error").any() and (got["http_code"] == 429).any()
    assert got["session_id"].iloc[-1] == Conversation.load(v1).conversation_id
    assert isinstance(got["session_id"].dtype, pd.CategoricalDtype) and got["path"].dtype == pd.StringDtype()


def read_ledger(path) -> tuple:
    head = read_session_head(path)
    return head.conversation_id, head.turns


def test_a_ledger_longer_than_the_first_read_and_odd_text(tmp_path):
    state = synthetic_state(5, 400)  # about 200 KB of turns: more than the first read
    for i, rec in enumerate(state.turns):
        rec.prompt = f"{i} é 😀 \u2028 \"quoted\" \\ " * 3
    path = save_conversation(state, tmp_path / "long.json")
    assert path.stat().st_size > 1 << 16
    assert read_ledger(path) == (state.conversation_id, state.turns)
    assert_same_values(load_sessions(path), expected_frame([path]))


@pytest.mark.parametrize("prompt", ["ünïcödé 😀 ", "ascii "], ids=["utf8", "ascii"])
@pytest.mark.parametrize("cut", range(0, 40, 3))
def test_a_prefix_cut_anywhere_reads_the_same(tmp_path, cut, prompt, monkeypatch):
    """Whatever byte the first read ends on (inside a number, a string, a multi-byte character),
    in a file start decoded as UTF-8 or parsed as ASCII bytes."""
    import nbagent.core.session_file as session_file

    state = synthetic_state(1, 4)
    for rec in state.turns:
        rec.prompt = prompt * 2
    path = save_conversation(state, tmp_path / "s.json")
    text = path.read_bytes()
    start = text.index(b'"turns":')
    for size in range(start + cut, start + 1200, 41):
        monkeypatch.setattr(session_file, "_HEAD_BYTES", size)
        assert read_ledger(path) == (state.conversation_id, state.turns), size


def test_damaged_ledgers_name_their_file(tmp_path):
    good = save_conversation(synthetic_state(2, 3), tmp_path / "good.json")
    doc = json.loads(good.read_text(encoding="utf-8"))
    cases = {
        "no-ledger.json": {k: v for k, v in doc.items() if k != "turns"},
        "bad-status.json": dict(doc, turns=[dict(doc["turns"][0], status="paused")]),
        "bad-usage.json": dict(doc, turns=[dict(doc["turns"][0], usage=[1, 2])]),
        "not-a-session.json": {"format": "other"},
    }
    for name, content in cases.items():
        (tmp_path / name).write_text(json.dumps(content), encoding="utf-8")
        with pytest.raises(NbagentError) as err:
            load_sessions([good, tmp_path / name])
        assert err.value.kind == "io" and name in str(err.value)
    cut = tmp_path / "cut.json"  # cut short (load_sessions checks the end: the steps after the ledger are not parsed)
    data = good.read_bytes()[:-5]
    cut.write_bytes(data.rstrip(b"}"))
    with pytest.raises(NbagentError) as err:
        load_sessions(cut)
    assert err.value.kind == "io" and "cut.json" in str(err.value)
