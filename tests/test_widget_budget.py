"""ChatWidget without a kernel: the context / spend gauge and the over-budget ask."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("anywidget")

from nbagent import Agent  # noqa: E402
from nbagent.notebook.protocol import Send  # noqa: E402
from nbagent.notebook.widget import FLUSH_INTERVAL, ChatWidget  # noqa: E402

from support.widget_messages import customs, until_idle, deliver  # noqa: E402
from support.scripted import ScriptedProvider, text_call  # noqa: E402
from support.waiting import until  # noqa: E402

PRICE = {"scripted-1": {"input": 1.0, "output": 2.0}}  # USD per 1M tokens


async def test_the_gauge_shows_context_window_and_spend_after_each_turn():
    provider = ScriptedProvider([text_call("one", usage=(300, 20)), text_call("two", usage=(700, 50))],
                                context_window=1000)
    agent = Agent(model=provider, pricing=PRICE, budget_usd=0.5)
    w = ChatWidget(agent)
    assert w.gauge == {"model": "scripted:scripted-1", "tokens": 0, "window": 1000, "spent": 0.0, "budget": 0.5,
                       "unpriced": 0, "rules": ""}
    await agent.conversation.chat_to_completion("first")
    await asyncio.sleep(FLUSH_INTERVAL * 3)
    assert w.gauge["tokens"] == 320 and w.gauge["spent"] == pytest.approx(340 / 1e6)
    await agent.conversation.chat_to_completion("second")
    await asyncio.sleep(FLUSH_INTERVAL * 3)
    assert w.gauge["tokens"] == 750 and w.gauge["spent"] == pytest.approx((340 + 800) / 1e6)
    assert len(json.dumps(w.gauge)) < 160  # the model's name and a few numbers per turn
    # the turn footer's cost uses the conversation's prices too
    records = {t["record"]["turn"]: t["record"] for t in w.finished_turns()}
    assert records[1]["cost"] == pytest.approx(800 / 1e6)


async def test_an_over_budget_send_asks_and_send_anyway_sends_that_one_turn():
    provider = ScriptedProvider([text_call("answered", usage=(10, 5))])
    agent = Agent(model=provider, pricing=PRICE, budget_usd=0.0)
    w = ChatWidget(agent)
    sent = customs(w)
    deliver(w, Send(prompt="<b>hi</b> there"))
    await until_idle(w)
    assert provider.requests == [] and agent.conversation.turns == []
    assert [m["type"] for m in sent] == ["confirm"]
    assert sent[0]["prompt"] == "<b>hi</b> there" and "exceed the budget" in sent[0]["text"]
    assert "input tokens" in sent[0]["text"] and "of $0.0000" in sent[0]["text"]
    assert w.gauge["budget"] == 0.0
    agent.conversation.budget.usd = 1e-9  # set in code: the gauge shows it at the next send
    deliver(w, Send(prompt="<b>hi</b> there"))
    assert w.gauge["budget"] == 1e-9 and len(sent) == 2 and provider.requests == []
    deliver(w, Send(prompt="<b>hi</b> there", over_budget=True))
    await until_idle(w)
    assert len(provider.requests) == 1 and agent.conversation.turns[-1].status.value == "done"
    assert agent.conversation.budget.usd == 1e-9  # the budget stays; only that turn went through
    deliver(w, Send(prompt="more"))
    await until_idle(w)
    assert [m["type"] for m in sent if m["type"] not in ("deltas", "turn")] == ["confirm"] * 3 and len(provider.requests) == 1


async def test_a_likely_overflow_is_a_notice_before_the_turn():
    provider = ScriptedProvider([text_call("ok")], context_window=100)
    agent = Agent(model=provider)
    w = ChatWidget(agent)
    deliver(w, Send(prompt="word " * 200))
    assert w.notice.startswith("Warning: this turn will likely overflow the context window")
    await until_idle(w)
    # the window is known and the prompt alone cannot fit: refused before sending, the turn says why
    assert provider.requests == [] and "[context_length]" in agent.conversation.turns[-1].error


async def test_the_gauge_after_a_stopped_first_turn_estimates_the_context():
    """A stopped turn reports no usage: the gauge estimates the context instead of reading 0."""
    from nbagent import Conversation
    from support.streams import StreamConnection, words

    conv = Conversation(StreamConnection(words(5_000), pace=0.001, batch=5))
    w = ChatWidget(conv)
    task = asyncio.ensure_future(conv.chat_to_completion("a long answer please"))
    await until(lambda: conv.history and len(conv.history[-1].content) > 400, "400 characters of the answer")
    conv.interrupt()
    await task
    await asyncio.sleep(FLUSH_INTERVAL * 3)
    assert not conv.turns[-1].context_tokens  # nothing reported by the stopped turn
    assert w.gauge["tokens"] > 100


async def test_the_gauge_names_the_model_the_next_turn_goes_to_right_after_a_switch():
    agent = Agent(model="demo")
    w = agent.widget()
    assert w.gauge["model"] == "demo"  # not "demo:demo"
    await agent.conversation.chat_to_completion("hello")
    agent.set_model(ScriptedProvider([text_call("hi")]))
    assert w.gauge["model"] == "scripted:scripted-1"  # before any turn of the new model
