"""Budgets: a turn that would exceed conv.budget.usd is refused before any request."""

from __future__ import annotations

import pytest

from nbagent import Agent, Conversation, MockConnection, NbagentError, tool
from nbagent.core.steps import Step, StepSource, StepStatus, StepTarget, StepType, TurnStatus, UsageMetadata
from nbagent.providers.base import TextDelta

from support.scripted import ScriptedProvider, assert_history_valid, text_call, tool_call

PRICE = {"scripted-1": {"input": 1.0, "output": 2.0}}  # USD per 1M tokens


def test_over_budget_raises_before_any_request_and_the_conversation_stays_usable():
    provider = ScriptedProvider([text_call("hello", usage=(10, 5))])
    agent = Agent(model=provider, pricing=PRICE, budget_usd=1e-6)  # a 10-token prompt costs more
    conv = agent.conversation
    with pytest.raises(NbagentError) as err:
        agent.ask("a prompt that costs more than the budget")
    assert err.value.kind == "budget"
    text = str(err.value)
    assert "spent $0.0000 of $0.0000" in text and "input" in text and "conv.budget.allow_over_once()" in text
    assert provider.requests == [] and conv.turns == [] and conv.history == []  # nothing sent or recorded
    assert conv.is_idle()
    conv.budget.usd = None  # no budget: it goes through
    assert agent.ask("a prompt that costs more than the budget").text.strip() == "hello"
    assert len(provider.requests) == 1 and len(conv.turns) == 1


def test_allow_over_once_lets_exactly_one_turn_through():
    provider = ScriptedProvider([text_call("one", usage=(1000, 100)), text_call("two")])
    agent = Agent(model=provider, pricing=PRICE, budget_usd=0.0005)
    conv = agent.conversation
    conv.budget.allow_over_once()
    agent.ask("first")
    assert conv.budget.spent_usd == pytest.approx((1000 + 200) / 1e6)  # over the budget now
    with pytest.raises(NbagentError, match="over budget"):
        agent.ask("second")
    assert len(provider.requests) == 1 and len(conv.turns) == 1
    conv.budget.usd = 0.01  # a larger budget
    assert agent.ask("second").text.strip() == "two"


def test_a_scripted_mock_connection_receives_nothing_over_budget():
    conn = MockConnection([[]])
    conv = Conversation(conn)
    conv.budget.pricing = {"mock": {"input": 5.0, "output": 5.0}}
    conv.budget.usd = 0.0
    with pytest.raises(NbagentError) as err:
        conv.ask("hi")
    assert err.value.kind == "budget" and conn.prompts == []


def test_demo_is_free_so_a_budget_never_blocks_it_until_it_has_a_price():
    agent = Agent(model="demo", budget_usd=0.0)
    agent.provider.delay = 0
    agent.ask("hello")
    agent.ask("what is 2 + 3?")
    assert agent.conversation.budget.spent_usd == 0.0 and len(agent.conversation.turns) == 2
    priced = Agent(model="demo", budget_usd=0.01, pricing={"demo": {"input": 1.0, "output": 10.0}})
    priced.provider.delay = 0
    priced.ask("hello")  # ~10 input tokens: far under the budget
    spent = priced.conversation.budget.spent_usd
    assert 0 < spent < 0.01
    priced.conversation.budget.usd = spent  # now any turn crosses it
    with pytest.raises(NbagentError, match="over budget"):
        priced.ask("hello again")
    assert len(priced.conversation.turns) == 1
    # a new conversation of the agent keeps the budget and prices
    assert priced.new_conversation().budget.usd == 0.01


def test_a_tool_loop_crossing_the_budget_stops_before_the_next_model_call():
    ran = []

    @tool
    def fetch(url: str) -> str:
        """Fetches a page."""
        ran.append(url)
        return "a long page"

    provider = ScriptedProvider([
        tool_call(("c1", "fetch", {"url": "a"}), usage=(5000, 100)),  # $0.0052: crosses $0.001
        text_call("never asked for"),
    ])
    agent = Agent(model=provider, tools=[fetch], pricing=PRICE, budget_usd=0.001)
    resp = agent.ask("fetch a")
    conv = agent.conversation
    rec = conv.turns[-1]
    assert ran == ["a"]  # the round's tool ran and its result stays in the history
    assert len(provider.requests) == 1  # no second model call
    assert rec.status == TurnStatus.INTERRUPTED and rec.error.startswith("budget: stopped")
    assert resp is not None
    assert_history_valid(conv.connection.session)
    with pytest.raises(NbagentError, match="over budget"):
        agent.ask("more")


def test_an_error_turn_in_the_mix_is_priced_from_what_it_reported():
    provider = ScriptedProvider([
        text_call("ok", usage=(100, 10)),
        [TextDelta("cut "), NbagentError("overloaded", kind="server", http_code=529)],
        text_call("ok again", usage=(200, 10)),
    ])
    agent = Agent(model=provider, pricing=PRICE, budget_usd=1.0)
    conv = agent.conversation
    agent.ask("one")
    with pytest.raises(NbagentError) as err:
        agent.ask("two")
    assert err.value.kind == "server"
    agent.ask("three")
    assert [t.status for t in conv.turns] == [TurnStatus.DONE, TurnStatus.ERROR, TurnStatus.DONE]
    assert conv.budget.spent_usd == pytest.approx((100 + 20 + 200 + 20) / 1e6)


def test_turns_without_a_price_count_zero_and_say_so():
    usage = UsageMetadata(1000, 100, 1100)
    steps = [Step(step_index=0, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER,
                  status=StepStatus.DONE, content="answer", usage_metadata=usage)]
    conv = Conversation(MockConnection([steps, []]))
    conv.ask("q")
    conv.budget.usd = 0.0
    est = conv.estimate("next")
    assert est.spent_usd == 0.0 and est.unpriced_turns == 1 and not est.over_budget
    assert "1 turn(s) without a price counted $0" in est.summary()
    conv.ask("next")  # unknown price: nothing to block on


@pytest.mark.parametrize("bad", [-1, float("nan"), "5", True])
def test_budget_must_be_a_non_negative_number(bad):
    conv = Conversation(MockConnection([]))
    with pytest.raises(NbagentError) as err:
        conv.budget.usd = bad
    assert err.value.kind == "config"
    with pytest.raises(NbagentError):
        Agent(model="demo", budget_usd=bad)


def test_spend_agrees_with_usage_df_on_a_tiered_multi_call_turn():
    """Budgets and usage_df price a turn alike, long-context tiers included (tier by input per call)."""
    from nbagent.analysis.estimate import spend
    from nbagent.analysis.frames import usage_frame
    from nbagent.core.ledger import TurnRecord
    from nbagent.core.steps import UsageMetadata

    records = [TurnRecord(turn=i, model="claude-sonnet-4-5", provider="anthropic", model_calls=calls,
                          usage=UsageMetadata(prompt_token_count=tokens, candidates_token_count=1_000,
                                              total_token_count=tokens + 1_000))
               for i, (calls, tokens) in enumerate([(2, 300_000), (1, 300_000), (1, 50_000)])]
    frame = usage_frame(records)
    assert frame.cost_usd.iloc[0] < frame.cost_usd.iloc[1]  # two 150k calls stay in the base tier
    assert spend(records).usd == pytest.approx(frame.cost_usd.sum(), rel=1e-12)
