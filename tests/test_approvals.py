"""The approval audit: conv.approvals_df() says who or what decided each tool call, and when."""

from __future__ import annotations

import asyncio
import json

import pytest

pd = pytest.importorskip("pandas")

from nbagent import Agent, ApprovalDecision, Conversation, Step, StepStatus, tool  # noqa: E402
from nbagent.analysis.approvals import APPROVAL_COLUMNS, approvals_frame, approvals_json_rows  # noqa: E402
from nbagent.core.steps import StepSource, StepTarget, StepType, ToolCall  # noqa: E402

from support.audit_script import audit_conversation, auto_conversation, manual_conversation  # noqa: E402
from support.scripted import ScriptedProvider, text_call, tool_call  # noqa: E402


def by_call(df):
    return df.set_index("call_id")


async def test_every_decision_says_who_decided_and_when():
    conv = (await audit_conversation()).conversation
    df = conv.approvals_df()
    assert list(df.columns) == list(APPROVAL_COLUMNS) and df.index.name == "step_index"
    rows = by_call(df)
    assert rows.loc[["r1", "w1", "d1", "d2", "s1"], "decision"].astype(str).tolist() == [
        "policy_allowed", "policy_denied", "denied", "approved", "blocked"]
    assert rows.loc[["r1", "w1", "d1", "d2", "s1"], "decided_by"].astype(str).tolist() == [
        "policy only_reads", "policy only_reads", "user", "user", "hook no_shell"]
    assert rows.loc["d1", "reason"].endswith("Reason: never touch /etc")
    assert rows.loc["w1", "reason"] == "This tool call was denied by policy only_reads."  # not "the user"
    assert rows.loc["s1", "reason"] == "Blocked: no shell here"
    assert pd.isna(rows.loc["r1", "reason"]) and pd.isna(rows.loc["d2", "reason"])
    assert json.loads(rows.loc["d1", "arguments"]) == {"path": "/etc/passwd"}
    assert rows.loc["d1", "turn"] == 1 and rows.loc["s1", "turn"] == 2
    # a person's decision waits for the person (the script waits 20 ms); a policy decides at once
    assert rows.loc["d1", "wait_s"] >= 0.015 and rows.loc["d2", "wait_s"] >= 0.015
    assert (rows.decided_at >= rows.requested).all() and rows.decided_at.dt.tz is not None
    # the frame joins history_df on step_index
    history = conv.history_df()
    assert (history.loc[df.index, "tool_names"] == df.tool.astype(str)).all()
    # the error turn (3) asked for no tool: no row
    assert set(df.turn) == {0, 1, 2}


async def test_manual_results_and_allow_all():
    manual = by_call((await manual_conversation()).conversation.approvals_df())
    assert manual.loc["m1", "decision"] == "manual" and manual.loc["m1", "decided_by"] == "caller"
    assert manual.loc["m1", "decided_at"] >= manual.loc["m1", "requested"]  # when the caller answered
    auto = by_call((await auto_conversation()).conversation.approvals_df())
    assert auto.loc["a1", "decision"] == "auto" and auto.loc["a1", "decided_by"] == "policy allow_all"


async def test_deny_all_lambda_policy_and_interrupt_are_named():
    @tool
    def f(x: int) -> int:
        """Echo."""
        return x

    agent = Agent(model=ScriptedProvider([tool_call(("1", "f", {"x": 1})), text_call("no")]), tools=[f],
                  policy="deny_all")
    await agent.conversation.chat_to_completion("go")
    row = agent.conversation.approvals_df().iloc[0]
    assert (row.decision, row.decided_by) == ("policy_denied", "policy deny_all")

    agent = Agent(model=ScriptedProvider([tool_call(("1", "f", {"x": 1})), text_call("ok")]), tools=[f],
                  policy=lambda call: True)
    await agent.conversation.chat_to_completion("go")
    assert agent.conversation.approvals_df().iloc[0].decided_by == "policy <lambda>"

    agent = Agent(model=ScriptedProvider([tool_call(("r", "f", {"x": 1}))]), tools=[f], policy="ask")
    conv = agent.conversation

    async def stopper():
        while not any(s.status == StepStatus.WAITING_FOR_USER for s in conv.history):
            await asyncio.sleep(0.005)
        conv.interrupt()

    stop = asyncio.ensure_future(stopper())
    await conv.chat_to_completion("go")
    await stop
    row = conv.approvals_df().iloc[0]
    assert (row.decision, row.decided_by, row.status) == ("canceled", "interrupt", "CANCELED")
    assert row.decided_at >= row.requested


async def test_frame_is_identical_after_save_and_load(tmp_path):
    conv = (await audit_conversation()).conversation
    path = conv.save(tmp_path / "s.json")
    loaded = Conversation.load(path)
    pd.testing.assert_frame_equal(loaded.approvals_df(), conv.approvals_df())
    assert len(loaded.approvals_df()) == 5


async def test_json_rows_match_the_frame():
    conv = (await audit_conversation()).conversation
    rows = approvals_json_rows(conv.history)
    json.dumps(rows)  # JSON-safe
    df = conv.approvals_df()
    assert [r["step_index"] for r in rows] == df.index.tolist()
    assert [r["decided_by"] for r in rows] == df.decided_by.astype(str).tolist()
    first = rows[0]
    assert first["decision"] == "policy_allowed" and first["reason"] is None
    # the JSON rows and the frame give the same instants, to the microsecond
    assert [pd.Timestamp(r["decided_at"]) for r in rows] == df.decided_at.tolist()
    assert [pd.Timestamp(r["requested"]) for r in rows] == df.requested.tolist()


def test_older_sessions_and_empty_history():
    old = Step(step_index=4, type=StepType.TOOL_CALL, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
               status=StepStatus.DONE, tool_calls=[ToolCall("c", "t", {})], approval=ApprovalDecision.APPROVED,
               created_at=10.0, finished_at=12.0, turn=0, content="ok")
    prompt = Step(step_index=3, type=StepType.TEXT_RESPONSE, source=StepSource.USER, content="hi")
    df = approvals_frame([prompt, old])
    assert df.index.tolist() == [4]
    assert pd.isna(df.decided_by.iloc[0]) and pd.isna(df.decided_at.iloc[0]) and pd.isna(df.wait_s.iloc[0])
    empty = approvals_frame([])
    assert empty.empty and list(empty.columns) == list(APPROVAL_COLUMNS)
    assert str(empty.decided_at.dtype) == "datetime64[ns, UTC]" and str(empty.decision.dtype) == "category"
    assert "approved" in empty.decision.cat.categories  # value_counts() shows every decision


async def test_a_decision_can_name_who_made_it():
    """The tool runner takes ``by=`` (e.g. the %%chat cell that denies what it cannot ask about)."""
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pays."""
        return "paid"

    agent = Agent(model=ScriptedProvider([tool_call(("p", "pay", {"amount": 5})), text_call("not paid")]),
                  tools=[pay])
    conv = agent.conversation

    async def deny():
        while not any(s.status == StepStatus.WAITING_FOR_USER for s in conv.history):
            await asyncio.sleep(0.005)
        conv.connection.tool_runner.deny("p", "no buttons here", by="%%chat cell")

    decider = asyncio.ensure_future(deny())
    await conv.chat_to_completion("pay 5")
    await decider
    row = conv.approvals_df().iloc[0]
    assert (row.decision, row.decided_by) == ("denied", "%%chat cell") and row.reason.endswith("no buttons here")


async def test_the_saved_frames_export_carries_the_approvals(tmp_path):
    """``save(path, frames=True)`` embeds the approval audit beside usage and tool calls."""
    conv = (await audit_conversation()).conversation
    path = conv.save(tmp_path / "audit.json", frames=True)
    frames = json.loads(path.read_text())["frames"]
    assert frames["approvals"] == approvals_json_rows(conv.history) and frames["approvals"]
    assert {r["decided_by"] for r in frames["approvals"]} >= {"user", "policy only_reads", "hook no_shell"}
