"""Saved sessions: the state boundary of a Conversation, the file format and its migrations.

Version 1 files (``Step.metadata`` dicts, cache writes beside the usage) were written by the
nbagent of commit e5aa3d3 (``tests/data/sessions``); they must load with every typed field
filled in and give the DataFrames that version computed for them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from nbagent import (Agent, ApprovalDecision, Conversation, FinishReason, MockConnection, NbagentError, StepType,
                     TurnStatus, tool)
from nbagent.analysis.sessions import load_sessions
from nbagent.conversation import from_state
from nbagent.core.connection import Connection
from nbagent.core.session_file import SESSION_VERSION, read_session
from nbagent.core.conversation_state import plumbing_of

SESSIONS = Path(__file__).resolve().parent / "data" / "sessions"


def load_v1(name: str) -> tuple[Conversation, dict]:
    path = SESSIONS / name
    return Conversation.load(path), json.loads(path.read_text(encoding="utf-8"))


def test_version_1_file_loads_with_typed_fields():
    conv, doc = load_v1("demo-tools-v1.json")
    assert doc["version"] == 1 and any(s.get("metadata") for s in doc["steps"])
    steps = conv.history
    assert len(steps) == len(doc["steps"]) == 14
    for step, old in zip(steps, doc["steps"]):
        meta = old.get("metadata") or {}
        assert step.model == meta.get("model", "")
        assert step.finish_reason == (FinishReason(meta["finish_reason"]) if "finish_reason" in meta else None)
        assert step.approval == (ApprovalDecision(meta["approval"]) if "approval" in meta else None)
        assert step.run_seconds == meta.get("duration")
        assert step.raw_usage == meta.get("raw_usage")
    approvals = [s.approval for s in steps if s.approval is not None]
    assert approvals == [ApprovalDecision.APPROVED, ApprovalDecision.DENIED]
    compaction = next(s for s in steps if s.type == StepType.COMPACTION)
    assert (compaction.compaction.tokens_before, compaction.compaction.tokens_after, compaction.compaction.budget) \
        == (459, 256, 300)
    assert [t.status for t in conv.turns] == [TurnStatus.DONE] * 3
    assert all(t.finish_reason == FinishReason.STOP for t in conv.turns)


def test_version_1_frames_match_what_that_version_computed():
    pd = pytest.importorskip("pandas")
    for name in ("demo-tools-v1.json", "cache-writes-v1.json"):
        conv, doc = load_v1(name)
        usage = conv.usage_df()
        old = pd.DataFrame(doc["frames"]["usage"]).set_index("turn")
        for col in ("input_tokens", "cached_tokens", "cache_write_tokens", "thinking_tokens", "output_tokens",
                    "total_tokens", "model_calls", "tool_calls"):
            assert usage[col].tolist() == old[col].tolist(), (name, col)
        assert usage["cost_usd"].tolist() == pytest.approx(old["cost_usd"].tolist())
        assert usage["status"].astype(str).tolist() == old["status"].tolist()
        calls = conv.tool_calls_df()
        old_calls = doc["frames"]["tool_calls"]
        assert calls["approval"].astype(object).where(calls["approval"].notna(), None).tolist() == \
            [c["approval"] for c in old_calls]
        assert calls["duration_s"].tolist() == pytest.approx([c["duration_s"] for c in old_calls])


def test_cache_writes_move_into_the_usage():
    conv, _ = load_v1("cache-writes-v1.json")
    model = conv.history[1]
    assert model.usage_metadata.cache_write_token_count == 1000
    assert conv.turns[0].usage.cache_write_token_count == conv.turns[0].cache_write_tokens == 1000
    assert conv.total_usage.cache_write_token_count == 1000
    # 200 uncached at $3, 1000 written at $3.75, 5 out at $15 per 1M tokens
    assert conv.usage_summary().cost_usd == pytest.approx((200 * 3.0 + 1000 * 3.75 + 5 * 15.0) / 1e6)


def test_version_1_resaves_as_the_current_version_and_reloads_identically(tmp_path):
    conv, _ = load_v1("demo-tools-v1.json")
    path = conv.save(tmp_path / "v2.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["version"] == SESSION_VERSION == 3
    assert not any("metadata" in s for s in doc["steps"])
    again = Conversation.load(path)
    assert [s.to_dict() for s in again.history] == [s.to_dict() for s in conv.history]
    assert [t.to_dict() for t in again.turns] == [t.to_dict() for t in conv.turns]
    assert plumbing_of(again).to_state().chat_session.to_dict() == plumbing_of(conv).to_state().chat_session.to_dict()


def test_a_resumed_version_1_session_goes_on(tmp_path):
    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression."""
        return eval(expression, {"__builtins__": {}})

    agent = Agent(model="demo", tools=[calculator], resume=SESSIONS / "demo-tools-v1.json")
    before = agent.conversation.history
    resp = agent.ask("What is 6 * 7?")
    assert "42" in resp.text
    after = agent.conversation.history
    assert after[: len(before)] == before and agent.conversation.turn_count == 4
    assert after[len(before)].step_index == max(s.step_index for s in before) + 1  # numbering continues


@pytest.mark.parametrize("damage", [
    {"version": 99},
    {"steps": [{"step_index": 0, "metadata": "not an object"}]},
    {"steps": [{"step_index": 0, "approval": "maybe"}]},
    {"turns": [{"turn": 0, "status": "paused"}]},
])
def test_damaged_files_are_io_errors(tmp_path, damage):
    doc = json.loads((SESSIONS / "demo-tools-v1.json").read_text(encoding="utf-8"))
    doc.update(damage)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(NbagentError) as err:
        read_session(path)
    assert err.value.kind == "io" and "damaged.json" in str(err.value)


def test_state_boundary_round_trip():
    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression."""
        return eval(expression, {"__builtins__": {}})

    agent = Agent(model="demo", tools=[calculator])
    agent.ask("What is 2 + 2?")
    state = plumbing_of(agent.conversation).to_state()
    copy = from_state(state)
    assert copy.history == agent.conversation.history and copy.turns == agent.conversation.turns
    assert copy.total_usage == agent.conversation.total_usage
    assert copy.conversation_id == agent.conversation.conversation_id
    with pytest.raises(NbagentError) as err:  # without a connection it is read-only
        copy.ask("more")
    assert err.value.kind == "config"


def test_connections_implement_the_whole_protocol():
    agent = Agent(model="demo")
    for conn in (agent.conversation.connection, MockConnection([])):
        assert isinstance(conn, Connection)
        for name in ("approve", "deny", "add_tool_result", "resume", "chat_session", "model_name"):
            assert hasattr(conn, name), (type(conn).__name__, name)


def test_cost_of_an_unknown_model_is_nan_not_zero(tmp_path):
    conv, _ = load_v1("cache-writes-v1.json")
    assert conv.usage_df(pricing={"claude-sonnet-4-5": (1.0, 1.0)})["cost_usd"].iloc[0] > 0
    state = plumbing_of(conv).to_state()
    state.turns[0].model = "my-finetune"
    assert math.isnan(from_state(state).usage_df()["cost_usd"].iloc[0])


# --- the compact layout (steps and turns leave out empty fields; the ledger comes first) ----------


def _every_field_step():
    from nbagent.core.steps import (CellPreview, ChangeKind, CompactionStats, CutToolCall, PrefixChange, Step,
                                    StepSource, StepStatus, StepTarget, ToolCall, UsageMetadata, VariableChange)

    return Step(id="x", step_index=3, type=StepType.TOOL_CALL, source=StepSource.MODEL, target=StepTarget.USER,
                status=StepStatus.DONE, content="c", thinking="t", tool_calls=[ToolCall("a", "b", {"x": 1})],
                error="e", structured_output={"a": 1},
                usage_metadata=UsageMetadata(1, 2, 3, 0, 0, 5), http_code=500,
                created_at=5.0, finished_at=0.0, turn=0, finish_reason="STOP", model="m", approval="denied",
                run_seconds=0.0, preparing_tool="p", compaction=CompactionStats(1, 2, 3), raw_usage={}, refusal="r",
                cut_tool_calls=[CutToolCall("i", "n", "{")], display={"text/plain": "x"},
                prefix_change=PrefixChange.TOOLS, decided_at=0.0, decided_by="user", tool_server="s",
                notice="retrying, 2 of 3",
                preview=CellPreview("edit", "c1", 2, "a", "b", (("-", "a"), ("+", "b")), "live"),
                changes=[VariableChange("x", ChangeKind.CREATED, "int", "value 1")])


def test_compact_steps_keep_every_non_default_value():
    from nbagent.core.steps import Step

    full = _every_field_step()
    assert Step.from_dict(json.loads(json.dumps(full.to_dict(compact=True)))) == full
    assert set(full.to_dict(compact=True)) == set(full.to_dict())  # falsy but not default: kept (0.0, False, {})
    empty = Step(created_at=1.0, content_delta="streamed", thinking_delta="too")
    compact = empty.to_dict(compact=True)
    assert set(compact) == {"type", "source", "target", "status", "created_at", "turn"}
    assert Step.from_dict(compact) == empty.copy(content_delta="", thinking_delta="")
    assert len(Step().to_dict()) == len(full.to_dict())  # the widget's full form keeps every key


def test_saved_sessions_are_compact_and_load_identically(tmp_path):
    from support.many_sessions import synthetic_state

    from nbagent.core.session_file import save_conversation

    state = synthetic_state(7, 30)
    path = save_conversation(state, tmp_path / "s.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert list(doc).index("turns") < list(doc).index("steps")  # the head's read stops before the steps
    assert not any("refusal" in s or s.get("error") == "" for s in doc["steps"])
    full = [s.to_dict() for s in state.steps] + [t.to_dict() for t in state.turns]
    assert len(json.dumps(doc["steps"] + doc["turns"])) < 0.6 * len(json.dumps(full))
    loaded = read_session(path)
    assert loaded.steps == state.steps and loaded.turns == state.turns
    assert loaded.total_usage == state.total_usage


def test_the_turn_ledger_reads_without_the_steps(tmp_path):
    from support.many_sessions import synthetic_state

    from nbagent.core.session_file import read_session_head, save_conversation

    def read_turns(path) -> tuple:
        head = read_session_head(path)
        return head.conversation_id, head.turns

    state = synthetic_state(3, 5)
    path = save_conversation(state, tmp_path / "s.json")
    text = path.read_text(encoding="utf-8")
    damaged = tmp_path / "damaged-steps.json"
    damaged.write_text(text.replace('"steps":[', '"steps":[not json', 1), encoding="utf-8")
    assert read_turns(damaged) == (state.conversation_id, state.turns)  # the steps were never parsed
    with pytest.raises(NbagentError) as err:
        read_session(damaged)
    assert err.value.kind == "io"
    # pretty-printed, with the ledger last (older files): the same records
    doc = json.loads(text)
    old = tmp_path / "old-layout.json"
    old.write_text(json.dumps({k: doc[k] for k in sorted(doc, key=lambda k: k == "turns")}, indent=2))
    assert read_turns(old) == (state.conversation_id, state.turns)
    cut = tmp_path / "cut.json"  # cut short after the ledger: still refused
    cut.write_text(text[: len(text) - 20], encoding="utf-8")
    with pytest.raises(NbagentError) as err:
        read_turns(cut)
    assert err.value.kind == "io" and "cut.json" in str(err.value)


def test_saving_and_loading_leave_the_garbage_collector_as_they_found_it(tmp_path):
    import gc

    from nbagent import load_sessions

    conv, _ = load_v1("demo-tools-v1.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "nbagent.session", "version": 2, "steps": [1], "turns": [{"turn": "x"}]}')
    assert gc.isenabled()
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            read_session(conv.save(tmp_path / "s.json"))
            load_sessions(tmp_path / "s.json")
            for reader in (read_session, load_sessions):
                with pytest.raises(NbagentError):
                    reader(bad)
            assert gc.isenabled() is enabled
        finally:
            gc.enable()


@pytest.mark.parametrize("where", ["steps", "turns"])
def test_an_infinite_token_count_is_a_corrupt_file_not_a_crash(tmp_path, where):
    """JSON's Infinity where a count belongs is bad input: NbagentError(kind="io"), not OverflowError."""
    agent = Agent(model="demo")
    agent.provider.delay = 0
    agent.ask("hello")
    path = agent.conversation.save(tmp_path / "s.json")
    doc = json.loads(path.read_text())
    holder = next(s for s in doc["steps"] if s.get("usage_metadata")) if where == "steps" else doc["turns"][0]
    (holder["usage_metadata"] if where == "steps" else holder["usage"])["prompt_token_count"] = math.inf
    path.write_text(json.dumps(doc))
    with pytest.raises(NbagentError) as err:
        Conversation.load(path)
    assert err.value.kind == "io"
    if where == "turns":
        with pytest.raises(NbagentError) as err:
            load_sessions(path)
        assert err.value.kind == "io"


# --- what format 3 leaves out: the fields a step derives from its conversation ---------------

_UNSAVED = ("cascade_id", "trajectory_id", "is_complete_response")


def _calculator_agent() -> Agent:
    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression."""
        return eval(expression, {"__builtins__": {}})

    return Agent(model="demo", tools=[calculator])


def test_format_3_stores_no_conversation_fields_per_step_and_reloads_identically(tmp_path):
    agent = _calculator_agent()
    agent.ask("What is 2 + 2?")
    agent.ask("Hello")
    conv = agent.conversation
    path = conv.save(tmp_path / "s.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["version"] == 3 and not any(key in s for s in doc["steps"] for key in _UNSAVED)
    again = Conversation.load(path)
    assert again.history == conv.history and again.turns == conv.turns
    assert {s.cascade_id for s in again.history} == {conv.conversation_id}
    assert [s.is_complete_response for s in again.history if s.is_model_call] == [False, True, True]
    assert all(s.is_complete_response is None for s in again.history if not s.is_model_call)


def test_a_scripted_conversation_carries_its_id_on_every_step_and_round_trips(tmp_path):
    from nbagent import Step, StepSource, StepStatus, StepTarget

    script = [Step(step_index=0, type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                   target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content="hi"),
              Step(step_index=1, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER,
                   status=StepStatus.DONE, content="hello", cascade_id="what the script said")]
    conv = Conversation(MockConnection([script]))
    conv.ask("hi")
    assert [s.cascade_id for s in conv.history] == [conv.conversation_id] * 2
    assert [s.is_complete_response for s in conv.history] == [None, True]
    assert Conversation.load(conv.save(tmp_path / "s.json")).history == conv.history


@pytest.mark.parametrize("version", [2, 3])
def test_files_that_stored_the_per_step_keys_load_them_as_stored(tmp_path, version):
    conv = _calculator_agent().conversation
    conv.ask("What is 2 + 2?")
    doc = json.loads(conv.save(tmp_path / "new.json").read_text(encoding="utf-8"))
    # what a version 2 file (and a format 3 file of before this change) holds per step
    doc["version"] = version
    for i, step in enumerate(doc["steps"]):
        step.update(cascade_id=f"cascade-{i}", trajectory_id="trajectory-1", is_complete_response=i % 2 == 0)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    loaded = Conversation.load(path).history
    assert [(s.cascade_id, s.trajectory_id, s.is_complete_response) for s in loaded] \
        == [(f"cascade-{i}", "trajectory-1", i % 2 == 0) for i in range(len(loaded))]
    assert [s.copy(cascade_id="", trajectory_id="", is_complete_response=None) for s in loaded] \
        == [s.copy(cascade_id="", trajectory_id="", is_complete_response=None) for s in conv.history]


@pytest.mark.parametrize("where", ["after the ledger", "at the end"])
def test_a_second_turns_key_is_an_io_error_naming_the_file_and_the_key(tmp_path, where):
    """JSON keeps the last of two equal keys: a file with two ledgers would load one and list the other."""
    from support.many_sessions import synthetic_state

    from nbagent.core.errors import StorageError
    from nbagent.core.session_file import save_conversation

    state = synthetic_state(3, 2)
    text = save_conversation(state, tmp_path / "s.json").read_text(encoding="utf-8")
    doubled = tmp_path / "doubled.json"
    if where == "after the ledger":
        doubled.write_text(text.replace(',"steps":[', ',"turns":[],"steps":[', 1), encoding="utf-8")
    else:
        doubled.write_text(text[: text.rstrip().rfind("}")] + ',"turns":[]}', encoding="utf-8")
    # the full readers; listing and load_sessions read the head only (the ledger, never the steps)
    readers = [read_session, Conversation.load, Agent.load]
    for read in readers:
        with pytest.raises(NbagentError) as err:
            read(doubled)
        assert isinstance(err.value, StorageError) and err.value.kind == "io", (read, err.value)
        assert "doubled.json" in str(err.value) and '"turns" twice' in str(err.value), str(err.value)
    assert Conversation.load(tmp_path / "s.json").turns == state.turns  # the file as written loads
