"""conv.estimate(prompt): tokens, window and cost of the next request, nothing sent."""

from __future__ import annotations

import json
import math

import pytest

from nbagent import Agent, Conversation, MockConnection, NbagentError, tool
from nbagent.core.compression import MESSAGE_OVERHEAD, ApproxTokenizer
from nbagent.core.steps import Step, StepSource, StepStatus, StepTarget, StepType, UsageMetadata
from nbagent.providers.base import Finish, TextDelta, Usage

from support.scripted import ScriptedProvider, text_call, tool_call

PRICE = {"scripted-1": {"input": 1.0, "output": 2.0}}  # USD per 1M tokens
TOK = ApproxTokenizer()


@tool
def lookup(city: str) -> str:
    """Looks a city up."""
    return f"{city}: 21 degrees and sunny"


def prompt_tokens(text: str) -> int:
    return TOK.count(text) + MESSAGE_OVERHEAD


def test_first_turn_counts_system_tools_and_prompt_and_sends_nothing():
    bare = Agent(model=ScriptedProvider([]))
    provider = ScriptedProvider([])
    full = Agent(model=provider, system="You are a careful weather assistant. " * 10, tools=[lookup])
    prompt = "What is the weather in Lisbon today?"
    e0, e1 = bare.conversation.estimate(prompt), full.conversation.estimate(prompt)
    spec = lookup.spec
    tools = TOK.count(json.dumps({"name": spec.name, "description": spec.description,
                                  "input_schema": spec.input_schema}))
    assert e0.input_tokens == prompt_tokens(prompt)
    assert e1.input_tokens == TOK.count("You are a careful weather assistant. " * 10) + tools + prompt_tokens(prompt)
    assert not e1.anchored and e1.prompt_tokens == prompt_tokens(prompt)
    assert provider.requests == [] and full.conversation.turns == []  # nothing was sent


def test_later_turns_anchor_on_reported_usage_and_move_by_the_prompt():
    provider = ScriptedProvider([text_call("the first answer", usage=(1000, 200))])
    agent = Agent(model=provider, system="sys", pricing=PRICE)
    agent.ask("first question")
    conv = agent.conversation
    assert conv.turns[-1].context_tokens == 1200
    short, long = conv.estimate("hi"), conv.estimate("x" * 4000)
    assert short.anchored and short.context_tokens == 1200  # what the provider reported, not a recount
    assert short.input_tokens == 1200 + prompt_tokens("hi")
    assert long.input_tokens - short.input_tokens == TOK.count("x" * 4000) - TOK.count("hi")
    assert len(provider.requests) == 1


def test_cost_uses_the_models_price_and_the_expected_reply():
    provider = ScriptedProvider([text_call("answer", usage=(1000, 300))])
    agent = Agent(model=provider, pricing=PRICE)
    agent.ask("q")
    est = agent.conversation.estimate("next")
    assert est.cost_usd == pytest.approx(est.input_tokens * 1.0 / 1e6)  # input only
    assert est.expected_output_tokens == 300  # the mean reply so far
    assert est.expected_cost_usd == pytest.approx(est.cost_usd + 300 * 2.0 / 1e6)
    assert est.spent_usd == pytest.approx((1000 * 1.0 + 300 * 2.0) / 1e6)
    unknown = Agent(model=ScriptedProvider([])).conversation.estimate("next")
    assert math.isnan(unknown.cost_usd) and "cost unknown" in repr(unknown)
    # a per-call pricing wins over the conversation's
    assert agent.conversation.estimate("next", pricing={"scripted-1": (10.0, 2.0)}).cost_usd == pytest.approx(
        10 * est.cost_usd)


def test_context_window_fill_and_overflow():
    agent = Agent(model=ScriptedProvider([], context_window=1000))
    conv = agent.conversation
    small, big = conv.estimate("hello"), conv.estimate("word " * 1000)
    assert small.context_window == 1000 and small.context_fill == pytest.approx(small.input_tokens / 1000)
    assert not small.will_overflow
    assert big.will_overflow and big.context_fill > 1
    assert "likely overflow" in big.summary()


def test_an_error_turn_adds_its_prompt_to_the_anchor():
    provider = ScriptedProvider([
        text_call("fine", usage=(500, 50)),
        [TextDelta("partial "), NbagentError("overloaded", kind="server", http_code=529)],
    ])
    agent = Agent(model=provider)
    conv = agent.conversation
    conv.ask("first")
    with pytest.raises(NbagentError):
        conv.ask("this one fails")
    assert conv.turns[-1].status.value == "error"
    est = conv.estimate("third")
    assert est.anchored
    assert est.context_tokens == 550 + prompt_tokens("this one fails")


def mock_turn(i: int, text: str, usage: UsageMetadata | None) -> list[Step]:
    return [
        Step(step_index=2 * i, type=StepType.TEXT_RESPONSE, source=StepSource.USER,
             target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content="q"),
        Step(step_index=2 * i + 1, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER,
             status=StepStatus.DONE, content=text, usage_metadata=usage),
    ]


def test_a_mock_connection_degrades_gracefully():
    conn = MockConnection([mock_turn(0, "an answer with no usage", None)])
    conv = Conversation(conn)
    first = conv.estimate("hello")
    assert first.input_tokens == prompt_tokens("hello") and first.context_window is None
    assert math.isnan(first.cost_usd) and first.context_fill is None and not first.will_overflow
    conv.ask("hello")
    later = conv.estimate("again")  # no reported usage: the steps' text is counted
    assert not later.anchored and later.input_tokens > first.input_tokens
    assert conn.prompts == ["hello"]
    assert "Estimate" in later._repr_markdown_()


def test_markdown_repr_escapes_dollars_and_the_model_name():
    conv = Conversation(MockConnection([]))
    conv.budget.pricing = {"mock": {"input": 1.0, "output": 1.0}}
    md = conv.estimate("hi")._repr_markdown_()
    assert "\\$" in md and "$0" not in md.replace("\\$", "")
