"""Whole turns through Agent -> ModelConnection -> a real provider -> a loopback HTTP server.

Chat Completions (tool loop, cut streams, two event loops, typed errors), the
Responses API (tools in auto and manual mode, reasoning summaries as thoughts,
reasoning items replayed), and how a refusal, a prompt blocked by Gemini and
a tool call cut by the token limit end a turn and what they leave in the
history.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from nbagent import Agent, FinishReason, NbagentError, StepStatus, StepType, Thought, ToolCall, tool
from nbagent.providers.base import REFUSAL

from support.fault_server import FaultServer, drop_after, sse
from support.replay import load_fixture
from support.scripted import assert_history_valid
from support.wires import responses_completed, responses_event, responses_text

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


# --- the OpenAI Responses API --------------------------------------------------------------

SUMMARY = "**Checking the weather**\n\nThe user wants Paris; I will call get_weather."
REASONING_ITEM = {"id": "rs_1", "type": "reasoning", "encrypted_content": "gAAAAB-opaque-encrypted==",
                  "summary": [{"type": "summary_text", "text": SUMMARY}]}


def responses_tool_turn(call_id: str = "call_w1") -> bytes:
    call = {"id": "fc_1", "type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": ""}
    args = json.dumps({"city": "Paris"})
    done_call = dict(call, arguments=args, status="completed")
    events = [
        {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5-mini", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": "rs_1", "type": "reasoning", "summary": []}},
        *[{"type": "response.reasoning_summary_text.delta", "item_id": "rs_1", "output_index": 0,
           "summary_index": 0, "delta": SUMMARY[i:i + 9]} for i in range(0, len(SUMMARY), 9)],
        {"type": "response.output_item.done", "output_index": 0, "item": REASONING_ITEM},
        {"type": "response.output_item.added", "output_index": 1, "item": call},
        *[{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1,
           "delta": args[i:i + 4]} for i in range(0, len(args), 4)],
        {"type": "response.output_item.done", "output_index": 1, "item": done_call},
    ]
    usage = {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 16}, "output_tokens": 30,
             "output_tokens_details": {"reasoning_tokens": 20}, "total_tokens": 70}
    return b"".join(responses_event(e) for e in events) + responses_completed([REASONING_ITEM, done_call], usage)


def _assert_second_request_replays_the_reasoning(server: FaultServer, call_id: str, output: dict) -> None:
    first, second = (r.json for r in server.requests)
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    assert first["reasoning"] == {"summary": "auto"} and first["tools"][0]["name"] == "get_weather"
    assert second["input"][1] == REASONING_ITEM  # byte-identical, encrypted content included
    assert second["input"][2] == {"type": "function_call", "call_id": call_id, "name": "get_weather",
                                  "arguments": '{"city":"Paris"}', "id": "fc_1"}
    assert second["input"][3]["type"] == "function_call_output" and second["input"][3]["call_id"] == call_id
    assert json.loads(second["input"][3]["output"]) == output


async def test_responses_tool_loop_auto_with_reasoning_summaries():
    with FaultServer() as server:
        server.push(sse(responses_tool_turn(), chunk_size=50), sse(responses_text(["It is 21 ", "in Paris."])))
        agent = Agent(model="openai-responses:gpt-5-mini", base_url=server.url + "/v1", api_key=KEY,
                      tools=[get_weather], system="Be brief.")
        conv = agent.conversation
        chunks = [c async for c in conv.chat("Weather in Paris?")]
        thoughts = "".join(c.text for c in chunks if isinstance(c, Thought))
        assert thoughts == SUMMARY
        assert ToolCall("call_w1", "get_weather", {"city": "Paris"}) in chunks
        model_step = next(s for s in conv.history if s.type == StepType.TOOL_CALL and s.thinking)
        assert model_step.thinking == SUMMARY and model_step.model == "gpt-fault"  # as response.completed says
        assert model_step.usage_metadata.thoughts_token_count == 20
        assert model_step.usage_metadata.cached_content_token_count == 16
        assert conv.history[-2].content == "It is 21 in Paris."
        _assert_second_request_replays_the_reasoning(server, "call_w1", {"city": "Paris", "temp": 21, "unit": "c"})
        assert server.requests[0].json["instructions"] == "Be brief."
        assert server.requests[0].path == "/v1/responses"
        assert_history_valid(conv.connection.session)
        await agent.disconnect()


async def test_responses_tool_loop_manual_mode():
    with FaultServer() as server:
        server.push(sse(responses_tool_turn("call_m1")), sse(responses_text(["Sunny, ", "21 degrees."])))
        agent = Agent(model="openai-responses:gpt-5-mini", base_url=server.url + "/v1", api_key=KEY,
                      tools=[get_weather], auto_execute_tools=False)
        conv = agent.conversation
        first = await conv.chat_to_completion("Weather in Paris?")
        assert first.thinking == SUMMARY and first.finish_reason == FinishReason.TOOL_CALLS
        assert conv.turns[0].status == "waiting"
        conv.add_tool_result("call_m1", {"sky": "sunny", "temp": 21})
        resp = await conv.chat_to_completion("")
        assert resp.text.strip() == "Sunny, 21 degrees."
        _assert_second_request_replays_the_reasoning(server, "call_m1", {"sky": "sunny", "temp": 21})
        assert_history_valid(conv.connection.session)
        await agent.disconnect()


# --- refusals, blocked prompts, calls cut by the token limit ------------------------------


async def test_openai_refusal_is_a_refusal_not_an_answer():
    fx = load_fixture("openai", "refusal")
    with FaultServer() as server:
        server.push(sse(fx.body, chunk_size=64), sse(text_reply("Fine.")))
        agent = Agent(model="openai:gpt-4o", base_url=server.url + "/v1", api_key=KEY)
        conv = agent.conversation
        resp = await conv.chat_to_completion("Something it will refuse")
        assert resp.refusal == fx.expected["refusal"] and resp.text == ""
        assert resp.finish_reason == FinishReason.CONTENT_FILTER
        model_step = conv.history[1]
        assert model_step.refusal == fx.expected["refusal"] and model_step.content == ""
        assert model_step.finish_reason == FinishReason.CONTENT_FILTER
        assert type(model_step).from_dict(model_step.to_dict()).refusal == model_step.refusal
        (part,) = conv.connection.session.messages[1].parts
        assert part.provider_details[REFUSAL] is True
        await conv.chat_to_completion("Something else")
        replayed = server.requests[1].json["messages"][1]
        assert replayed == {"role": "assistant", "content": None, "refusal": fx.expected["refusal"]}
        await agent.disconnect()


async def test_gemini_blocked_prompt_ends_the_turn_without_a_made_up_reply():
    fx = load_fixture("gemini", "prompt-blocked-no-candidates")
    reply = (b'data: {"candidates": [{"content": {"parts": [{"text": "Hello."}], "role": "model"}, '
             b'"finishReason": "STOP"}]}\r\n\r\n')
    with FaultServer() as server:
        server.push(sse(fx.body), sse(reply))
        agent = Agent(model="gemini:gemini-2.5-flash", base_url=server.url + "/v1beta", api_key="AIza-e2e-key")
        conv = agent.conversation
        resp = await conv.chat_to_completion("a prompt Gemini blocks")
        assert resp.finish_reason == FinishReason.CONTENT_FILTER
        notice = "Gemini blocked this prompt (SAFETY); no reply was generated."
        assert resp.text == "" and resp.refusal == notice  # the model wrote nothing: text stays empty
        finish = conv.history[-1]
        assert finish.type == StepType.FINISH and finish.finish_reason == FinishReason.CONTENT_FILTER
        assert finish.content == "" and finish.refusal == notice
        assert type(finish).from_dict(finish.to_dict()).refusal == notice  # saved and loaded alike
        assert notice in conv.to_markdown()  # the transcript shows it as a note
        assert conv.history[1].content == ""  # the model step says nothing it did not say
        assert [m.role for m in conv.connection.session.messages] == ["user"]  # nothing made up
        resp = await conv.chat_to_completion("hello")
        assert resp.text == "Hello."
        # the next prompt joins the unanswered one: user/model alternation holds, no notice is sent
        contents = server.requests[1].json["contents"]
        assert contents == [{"role": "user", "parts": [{"text": "a prompt Gemini blocks"}, {"text": "hello"}]}]
        assert_history_valid(conv.connection.session)
        await agent.disconnect()


async def test_tool_call_cut_by_max_tokens_is_recorded_and_not_run():
    fx = load_fixture("anthropic", "max-tokens-incomplete-tool-json")
    ran = []

    @tool
    def make_file(filename: str, lines_of_text: list[str]) -> str:
        """Write a file."""
        ran.append(filename)
        return "ok"

    done = (b'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-3-7-sonnet",'
            b'"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
            b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            b'"content_block":{"type":"text","text":"Shorter then."}}\n\n'
            b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
            b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
            b'"usage":{"output_tokens":3}}\n\n'
            b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
    with FaultServer() as server:
        server.push(sse(fx.body, chunk_size=100), sse(done))
        agent = Agent(model="anthropic:claude-3-7-sonnet", base_url=server.url, api_key="sk-ant-e2e-0123456789",
                      tools=[make_file], max_tokens=124)
        conv = agent.conversation
        resp = await conv.chat_to_completion("Write a tax guide to taxes.txt")
        assert ran == [] and resp.tool_calls == []
        assert resp.finish_reason == FinishReason.LENGTH
        assert resp.text.startswith("I'll create a comprehensive tax guide")
        model_step = conv.history[1]
        (cut,) = model_step.cut_tool_calls
        assert (cut.name, cut.arguments) == ("make_file", fx.expected["tool_calls"][0]["arguments"])
        assert model_step.preparing_tool == "" and model_step.tool_calls == []
        assert type(model_step).from_dict(model_step.to_dict()).cut_tool_calls == [cut]
        finish = conv.history[-1]
        assert finish.finish_reason == FinishReason.LENGTH and "cut at the token limit" in finish.content
        assert "make_file" in finish.content
        assert not any(m.tool_uses for m in conv.connection.session.messages)  # never replayed as a call
        resp = await conv.chat_to_completion("Make it shorter")
        assert resp.text == "Shorter then."
        assert [m["role"] for m in server.requests[1].json["messages"]] == ["user", "assistant", "user"]
        assert_history_valid(conv.connection.session)
        await agent.disconnect()
