"""Whole turns through Agent -> ModelConnection -> a real provider -> a loopback HTTP server."""

from __future__ import annotations

import asyncio
import json

import pytest

from nbagent import Agent, FinishReason, NbagentError, StepStatus, tool

from support.fault_server import FaultServer, drop_after, sse
from support.scripted import assert_history_valid

KEY = "sk-e2e-secret-0123456789abcdef"


def chunk(delta: dict | None = None, finish: str | None = None, usage: dict | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4.1-mini",
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def text_reply(text: str) -> bytes:
    words = [w + " " for w in text.split(" ")]
    return (b"".join(chunk({"content": w}) for w in words) + chunk({}, "stop")
            + chunk(None, usage={"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25,
                                 "prompt_tokens_details": {"cached_tokens": 8}})
            + b"data: [DONE]\n\n")


def tool_reply(call_id: str, name: str, args: dict) -> bytes:
    raw = json.dumps(args)
    first = {"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]}
    parts = [chunk(first)] + [chunk({"tool_calls": [{"index": 0, "function": {"arguments": raw[i:i + 5]}}]})
                              for i in range(0, len(raw), 5)]
    return (b"".join(parts) + chunk({}, "tool_calls")
            + chunk(None, usage={"prompt_tokens": 15, "completion_tokens": 9, "total_tokens": 24})
            + b"data: [DONE]\n\n")


@tool
def get_weather(city: str, unit: str = "c") -> dict:
    """Current weather for a city."""
    return {"city": city, "temp": 21, "unit": unit}


async def test_openai_tool_loop_over_http():
    with FaultServer() as server:
        server.push(sse(tool_reply("call_1", "get_weather", {"city": "Paris"})),
                    sse(text_reply("It is 21 degrees in Paris.")))
        agent = Agent(model="openai:gpt-4.1-mini", base_url=server.url + "/v1", api_key=KEY,
                      tools=[get_weather], system="Be brief.")
        conv = agent.conversation
        resp = await conv.chat_to_completion("Weather in Paris?")
        assert resp.text.strip() == "It is 21 degrees in Paris."
        first, second = (r.json for r in server.requests)
        assert first["messages"][0] == {"role": "system", "content": "Be brief."}
        assert first["tools"][0]["function"]["name"] == "get_weather"
        assert first["stream_options"] == {"include_usage": True}
        tool_msg = second["messages"][-1]
        assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_1"
        assert json.loads(tool_msg["content"]) == {"city": "Paris", "temp": 21, "unit": "c"}
        assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "get_weather"
        assert server.requests[0].headers.get("authorization") == f"Bearer {KEY}"
        usage = conv.last_turn_usage
        assert usage.prompt_token_count == 35 and usage.cached_content_token_count == 8
        assert conv.turns[0].model_calls == 2 and conv.turns[0].tool_calls == 1
        await agent.disconnect()


async def test_stream_cut_mid_text_keeps_partial_text_with_error_status():
    with FaultServer() as server:
        partial = chunk({"content": "The answer "}) + chunk({"content": "is"})
        server.push(drop_after(partial), sse(text_reply("Recovered fine.")))
        agent = Agent(model="openai:gpt-4.1-mini", base_url=server.url + "/v1", api_key=KEY)
        conv = agent.conversation
        with pytest.raises(NbagentError) as info:
            await conv.chat_to_completion("Question?")
        assert info.value.kind == "network" and KEY not in str(info.value)
        step = conv.history[1]
        assert step.status == StepStatus.ERROR and step.content == "The answer is"
        assert conv.turns[0].status == "error"
        resp = await conv.chat_to_completion("Try again")
        assert resp.text.strip() == "Recovered fine."
        assert len(server.requests) == 2  # no retry after output started
        assert_history_valid(conv.connection.session)
        await agent.disconnect()


def test_one_agent_across_two_event_loops():
    with FaultServer() as server:
        server.push(sse(text_reply("one")), sse(text_reply("two")))
        agent = Agent(model="openai:gpt-4.1-mini", base_url=server.url + "/v1", api_key=KEY)
        assert asyncio.run(agent.conversation.chat_to_completion("1")).text.strip() == "one"
        assert asyncio.run(agent.conversation.chat_to_completion("2")).text.strip() == "two"


def test_errors_from_ask_are_typed():
    with FaultServer() as server:
        from support.fault_server import reply
        server.push(reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error",
                                          "code": "invalid_api_key"}}))
        agent = Agent(model="openai:gpt-4.1-mini", base_url=server.url + "/v1", api_key=KEY)
        with pytest.raises(NbagentError) as info:
            agent.ask("hi")
        assert info.value.kind == "auth" and info.value.http_code == 401
        assert KEY not in str(info.value) and KEY not in repr(info.value)
        assert agent.conversation.turns[0].status == "error" and agent.conversation.turns[0].http_code == 401
