"""Load in CI-sized form: many conversations at once, very long sessions, bounded memory."""

from __future__ import annotations

import asyncio
import gc
import json
import re
import time
import tracemalloc

from nbagent import (Agent, Conversation, MockConnection, Step, StepSource, StepStatus, StepTarget, StepType,
                     UsageMetadata, tool)
from nbagent.providers.demo import DemoProvider

from support.fault_server import FaultServer, sse
from support.scripted import assert_history_valid


async def test_a_hundred_concurrent_conversations_do_not_cross_talk():
    @tool
    def calculator(expression: str) -> float:
        """Evaluate an arithmetic expression."""
        return eval(expression, {"__builtins__": {}})

    provider = DemoProvider(delay=0)  # one provider shared by every conversation
    agent = Agent(model=provider, tools=[calculator])
    convs = [agent.new_conversation() for _ in range(100)]
    responses = await asyncio.gather(*(c.chat_to_completion(f"What is {i} * 1000?") for i, c in enumerate(convs)))
    for i, (conv, resp) in enumerate(zip(convs, responses)):
        assert f"{i * 1000:,}" in resp.text or str(i * 1000) in resp.text, resp.text
        assert conv.turn_count == 1 and conv.turns[0].tool_calls == 1
        assert_history_valid(conv.connection.session)
    assert len({c.conversation_id for c in convs}) == 100


def _openai_sse(delta: dict, finish: str) -> bytes:
    chunks = [{"model": "gpt-load", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {"model": "gpt-load", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
              {"model": "gpt-load", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3,
                                                              "total_tokens": 8}}]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def _answer_from_the_request(ex) -> None:
    """A model over HTTP that answers from what each request holds: a prompt "#n" gets a call
    of ``lookup(key=n)`` (every conversation uses the same call id), a tool result gets it echoed."""
    last = ex.request.json["messages"][-1]
    content = last["content"] if isinstance(last["content"], str) else "".join(p["text"] for p in last["content"])
    if last["role"] == "tool":
        body = _openai_sse({"role": "assistant", "content": f"answer: {content}"}, "stop")
    else:
        key = int(re.search(r"#(\d+)", content).group(1))
        call = {"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"key": key})}}
        body = _openai_sse({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
    sse(body, chunk_size=7)(ex)


async def test_two_hundred_conversations_with_tools_over_http_on_one_provider_do_not_cross_talk():
    from nbagent.providers.openai_chat import OpenAIProvider

    @tool
    def lookup(key: int) -> str:
        """The value stored under key."""
        time.sleep(0.002 * (key % 5))  # sync tools run in threads: finish out of order
        return f"value-{key}"

    n = 200
    with FaultServer() as server:
        server.push(*[_answer_from_the_request] * (2 * n))
        provider = OpenAIProvider("gpt-load", base_url=server.url + "/v1", api_key="sk-load-test-key")
        agent = Agent(model=provider, tools=[lookup])
        convs = [agent.new_conversation() for _ in range(n)]
        responses = await asyncio.gather(*(c.chat_to_completion(f"Look up #{i}") for i, c in enumerate(convs)))
        for i, (conv, resp) in enumerate(zip(convs, responses)):
            assert resp.text == f"answer: value-{i}", (i, resp.text)
            assert [c.args for c in resp.tool_calls] == [{"key": i}]
            assert conv.turn_count == 1 and conv.turns[0].tool_calls == 1 and conv.turns[0].model_calls == 2
            assert_history_valid(conv.connection.session)
        for request in server.requests:  # every request held one conversation's messages only
            keys = set(re.findall(r"#(\d+)|value-(\d+)", json.dumps(request.json["messages"])))
            assert len({a or b for a, b in keys}) == 1, keys
        assert len(server.requests) == 2 * n
        await agent.disconnect()


def _turn(i: int) -> list[Step]:
    return [
        Step(step_index=0, type=StepType.TEXT_RESPONSE, source=StepSource.USER, target=StepTarget.UNSPECIFIED,
             status=StepStatus.DONE, content=f"question {i}"),
        Step(step_index=1, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER,
             status=StepStatus.DONE, content=f"answer {i} " + "words " * 20, usage_metadata=UsageMetadata(100, 20, 120)),
        Step(step_index=2, type=StepType.FINISH, source=StepSource.SYSTEM, target=StepTarget.USER,
             status=StepStatus.DONE, finish_reason="STOP"),
    ]


async def _run(conv: Conversation, turns: range) -> None:
    for i in turns:
        await conv.chat_to_completion(f"question {i}")


async def test_a_five_thousand_turn_session_keeps_its_ledger_and_bounded_history(tmp_path):
    n = 5_000
    conv = Conversation(MockConnection([_turn(i) for i in range(n)]), max_history_size=300)
    await _run(conv, range(n))
    assert len(conv.history) == 300 and conv.turn_count == n
    assert conv.total_usage.total_token_count == 120 * n
    assert conv.usage_df()["total_tokens"].sum() == 120 * n
    loaded = Conversation.load(conv.save(tmp_path / "long.json"))
    assert loaded.turn_count == n and loaded.history == conv.history


async def test_memory_stays_bounded_with_trimming_on():
    n = 1_500
    conv = Conversation(MockConnection([_turn(i) for i in range(3 * n)]), max_history_size=200)
    await _run(conv, range(n))  # warm up: history is full from here on
    gc.collect()
    tracemalloc.start()
    try:
        await _run(conv, range(n, 2 * n))
        gc.collect()
        first, _ = tracemalloc.get_traced_memory()
        await _run(conv, range(2 * n, 3 * n))
        gc.collect()
        second, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # what grows is the per-turn ledger (a few hundred bytes a turn), never the step history
    assert second - first < 1_500 * n, (first, second)
    assert len(conv.history) == 200
