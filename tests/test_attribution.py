"""Where the tokens go: conv.usage_df(by="tool") splits each turn's tokens by tool, thinking and prompt."""

from __future__ import annotations

import pytest

pd = pytest.importorskip("pandas")

from nbagent import Agent, Conversation, NbagentError  # noqa: E402
from nbagent.analysis import attribution  # noqa: E402
from nbagent.analysis.attribution import (  # noqa: E402
    TOOL_TOKEN_COLUMNS, estimator, tool_calls_with_tokens, tool_tokens_frame,
)
from nbagent.core.steps import Step, StepSource, StepStatus, StepTarget, StepType, ToolCall  # noqa: E402

from support.audit_script import BIG, audit_conversation, audit_script, read_file  # noqa: E402
from support.scripted import ScriptedProvider  # noqa: E402


class Words:
    """A tokenizer that counts words."""

    def count(self, text: str) -> int:
        return len(text.split())


async def test_which_tool_bloats_the_context():
    conv = (await audit_conversation()).conversation
    df = conv.usage_df(by="tool")
    assert list(df.columns) == list(TOOL_TOKEN_COLUMNS)
    by_tool = df.groupby("tool", observed=True).tokens.sum().sort_values(ascending=False)
    assert by_tool.index[0] == "read_file"  # the 4,200-character file dominates
    tok, label = estimator()
    read = df[df.tool == "read_file"].iloc[0]
    assert read.tokens == tok.count(BIG) and read.calls == 1 and read.counted_by == label
    assert read.share == pytest.approx(read.tokens / conv.turns[0].usage.prompt_token_count)
    # thinking: the provider's reported reasoning tokens of turn 0 (40 + 15), not an estimate
    thinking = df[df.tool == "(thinking)"]
    assert thinking.turn.tolist() == [0] and thinking.tokens.tolist() == [55]
    assert thinking.counted_by.tolist() == ["provider"]
    # denied and blocked calls still cost their short result; turn 2 ran delete_file and shell
    assert set(df[df.turn == 2].tool.astype(str)) == {"(prompt)", "delete_file", "shell"}
    # the error turn has its prompt but no input reported: share unknown
    err = df[df.turn == 3]
    assert err.tool.astype(str).tolist() == ["(prompt)"] and err.share.isna().all()
    totals = df.groupby("turn").tokens.sum()
    assert totals.index.tolist() == [0, 1, 2, 3]


async def test_a_tokenizer_can_be_given_and_the_estimate_is_labelled(monkeypatch):
    conv = (await audit_conversation()).conversation
    df = tool_tokens_frame(conv.history, conv.turns, tokenizer=Words())
    read = df[df.tool == "read_file"].iloc[0]
    assert read.tokens == len(BIG.split()) and read.counted_by == "Words"

    def unavailable(encoding):
        raise NbagentError("offline", kind="config")

    monkeypatch.setattr(attribution, "_estimator", None)
    monkeypatch.setattr(attribution, "exact_tokenizer", unavailable)
    assert estimator()[1] == "chars/4"
    monkeypatch.setattr(attribution, "_estimator", None)
    monkeypatch.setattr(attribution, "exact_tokenizer", lambda encoding: Words())
    assert estimator()[1] == "tiktoken o200k_base"
    df = conv.usage_df(by="tool")
    assert df[df.tool == "read_file"].tokens.iloc[0] == len(BIG.split())
    assert set(df.counted_by.astype(str)) == {"tiktoken o200k_base", "provider"}


async def test_same_frame_after_save_and_load(tmp_path):
    conv = (await audit_conversation()).conversation
    loaded = Conversation.load(conv.save(tmp_path / "s.json"))
    pd.testing.assert_frame_equal(loaded.usage_df(by="tool"), conv.usage_df(by="tool"))


async def test_trimmed_history_keeps_prompt_and_thinking_from_the_ledger():
    agent = Agent(model=ScriptedProvider(audit_script()[:2]), tools=[read_file], policy=lambda c: True,
                  max_history_size=1)
    conv = agent.conversation
    await conv.chat_to_completion("read it")
    df = conv.usage_df(by="tool")
    assert df.tool.astype(str).tolist() == ["(prompt)", "(thinking)"]  # the tool steps were trimmed away


def test_result_tokens_on_the_tool_call_view_and_empty_input():
    ask = Step(step_index=1, type=StepType.TOOL_CALL, source=StepSource.MODEL, target=StepTarget.USER, turn=0,
               tool_calls=[ToolCall("a", "t", {}), ToolCall("b", "t", {})])
    done = Step(step_index=2, type=StepType.TOOL_CALL, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
                status=StepStatus.DONE, turn=0, tool_calls=[ToolCall("a", "t", {})], content="one two three")
    df = tool_calls_with_tokens([ask, done], tokenizer=Words())
    assert df.result_tokens.tolist()[0] == 3 and pd.isna(df.result_tokens.iloc[1])  # b is still pending
    assert str(df.result_tokens.dtype) == "Int64"
    empty = tool_tokens_frame([], [])
    assert empty.empty and list(empty.columns) == list(TOOL_TOKEN_COLUMNS)
    assert str(empty.tokens.dtype) == "Int64" and str(empty.tool.dtype) == "category"


def test_usage_df_rejects_other_groupings():
    with pytest.raises(NbagentError, match="by="):
        Conversation().usage_df(by="model")
