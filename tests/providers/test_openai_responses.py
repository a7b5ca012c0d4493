"""OpenAIResponsesProvider: every recorded Responses stream replayed, replay of reasoning, request bodies."""

from __future__ import annotations

import json

import pytest

from support.replay import fixture_names, load_error_fixture, load_fixture, replay
from nbagent import Agent, providers
from nbagent.core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from nbagent.core.steps import FinishReason
from nbagent.providers.base import REFUSAL, ModelRequest, ToolSpec
from nbagent.providers.openai_responses import OpenAIResponsesProvider, is_reasoning_model
from nbagent.providers.openai_responses import OPENAI_ITEM

KEY = "sk-test-responses-0123456789abcdef"
NAMES = fixture_names("openai_responses")
WEATHER = ToolSpec("get_weather", "Weather for a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


def provider(model: str = "gpt-5-mini", **kw) -> OpenAIResponsesProvider:
    kw.setdefault("retry_base_delay", 0.0)
    return OpenAIResponsesProvider(model, api_key=KEY, **kw)


def ask(text: str = "hi", model: str = "gpt-5-mini", **kw) -> ModelRequest:
    return ModelRequest(model, [Message("user", [TextPart(text)])], **kw)


def events(*objs: dict) -> bytes:
    return "".join(f"event: {o['type']}\ndata: {json.dumps(o)}\n\n" for o in objs).encode()


def done_items(body: bytes) -> list[dict]:
    """The items of every ``response.output_item.done`` event of a recorded body."""
    lines = [json.loads(line[5:]) for line in body.decode("utf-8").splitlines() if line.startswith("data:")]
    return [d["item"] for d in lines if d["type"] == "response.output_item.done"]


def test_fixtures_are_available():
    assert len(NAMES) == 6


# --- every recorded stream ---------------------------------------------------


@pytest.mark.parametrize("split", ["whole", "random", "1"])
@pytest.mark.parametrize("name", NAMES)
async def test_fixture_replay(name, split):
    fx = load_fixture("openai_responses", name)
    exp = fx.expected
    result = await replay(provider(), ask(), fx.body, split=split, seed=len(name))
    assert result.error is None, result.error
    finish = result.finish
    assert result.text == exp["text"] == finish.message.text
    summary = exp["reasoning_summary_parts"]
    assert result.thinking == ("\n\n".join(summary) if summary else exp["thinking"] or "")
    assert "".join(p.text for p in finish.message.parts if isinstance(p, ThinkingPart)) == result.thinking

    calls = exp["tool_calls"]
    assert [(c.id, c.name, c.args) for c in result.tool_calls] == [
        (c["id"], c["name"], c["arguments_parsed"]) for c in calls]
    assert [(s.key, s.id, s.name) for s in result.starts] == [(c["item_id"], c["id"], c["name"]) for c in calls]
    assert [result.arg_deltas[s.key] for s in result.starts] == [c["arguments"] for c in calls]
    assert [(u.id, u.provider_details["item_id"]) for u in finish.message.tool_uses] == [
        (c["id"], c["item_id"]) for c in calls]

    assert finish.reason == (FinishReason.TOOL_CALLS if calls else FinishReason.STOP)
    assert finish.raw_reason == exp["finish_reason"] and finish.model == exp["model"]
    assert finish.cut_tool_calls == []

    usage, want = result.usage, exp["usage"]
    assert usage.raw == exp["raw_usage"]
    assert usage.usage.prompt_token_count == want["input_tokens"]
    assert usage.usage.generated_token_count == want["output_tokens"]
    assert usage.usage.total_token_count == want["total_tokens"]
    assert usage.usage.cached_content_token_count == want["cache_read_tokens"]
    assert usage.usage.thoughts_token_count == want["reasoning_tokens"]


async def test_reasoning_summary_parts_stream_as_thought_deltas_before_the_text():
    fx = load_fixture("openai_responses", "reasoning-summary-multipart")
    result = await replay(provider(), ask(), fx.body, split="random")
    kinds = [type(e).__name__ for e in result.events]
    assert kinds.count("ThinkingDelta") == fx.expected["event_type_counts"]["response.reasoning_summary_text.delta"]
    assert kinds.index("TextDelta") > max(i for i, k in enumerate(kinds) if k == "ThinkingDelta")
    parts = fx.expected["reasoning_summary_parts"]
    assert result.thinking.split("\n\n**") == [parts[0]] + [p.removeprefix("**") for p in parts[1:]]


# --- stateless replay ----------------------------------------------------------------


async def test_reasoning_item_round_trips_byte_identical_into_the_next_request():
    fx = load_fixture("openai_responses", "text-and-function-call-reasoning")
    result = await replay(provider("gpt-5.5"), ask(model="gpt-5.5"), fx.body, split="1")
    message = result.finish.message
    call = message.tool_uses[0]
    history = [Message("user", [TextPart("What is the capital of PotatoLand?")]), message,
               Message("user", [ToolResultPart(call.id, "Spudville", name=call.name)])]
    sent = (await replay(provider("gpt-5.5"), ModelRequest("gpt-5.5", history), b"")).requests[0]["json"]
    reasoning, text, function_call = done_items(fx.body)
    assert sent["input"][1] == reasoning  # the done item, encrypted content and all
    assert json.dumps(sent["input"][1]) == json.dumps(reasoning)
    assert sent["input"][2] == {"type": "message", "role": "assistant", "id": text["id"], "status": "completed",
                                "phase": "commentary",
                                "content": [{"type": "output_text", "text": fx.expected["text"], "annotations": []}]}
    assert sent["input"][3] == {"type": "function_call", "call_id": function_call["call_id"], "name": "get_capital",
                                "arguments": function_call["arguments"], "id": function_call["id"]}
    assert sent["input"][4] == {"type": "function_call_output", "call_id": function_call["call_id"],
                                "output": "Spudville"}
    assert sent["store"] is False and sent["include"] == ["reasoning.encrypted_content"]


async def test_reasoning_before_a_built_in_tool_item_is_not_replayed():
    fx = load_fixture("openai_responses", "cached-tokens-web-search")
    result = await replay(provider(), ask(), fx.body)
    replayed = [p.provider_details[OPENAI_ITEM]["id"] for p in result.finish.message.parts
                if isinstance(p, ThinkingPart) and OPENAI_ITEM in p.provider_details]
    reasonings = [i["id"] for i in done_items(fx.body) if i["type"] == "reasoning"]
    assert replayed == reasonings[1:]  # the first is followed by web_search_call, which cannot be sent back


async def test_raw_reasoning_text_of_a_compatible_server_is_replayed():
    fx = load_fixture("openai_responses", "deepseek-reasoning-text-cached")
    result = await replay(provider(base_url="http://127.0.0.1:9/v1"), ask(), fx.body, split="7")
    (thinking,) = [p for p in result.finish.message.parts if isinstance(p, ThinkingPart)]
    assert thinking.provider_details[OPENAI_ITEM]["content"][0]["text"] == fx.expected["thinking"]


# --- synthetic streams: the documented events no recording has -------------------------


def _head(*items: dict) -> list[dict]:
    out: list[dict] = [{"type": "response.created", "response": {"id": "r1", "model": "gpt-5-mini"}}]
    for n, item in enumerate(items):
        out.append({"type": "response.output_item.added", "output_index": n, "item": item})
    return out


def _end(status: str, reason: str | None = None) -> dict:
    usage = {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13,
             "output_tokens_details": {"reasoning_tokens": 0}, "input_tokens_details": {"cached_tokens": 0}}
    return {"type": f"response.{status}", "response": {
        "id": "r1", "model": "gpt-5-mini", "status": status, "usage": usage,
        "incomplete_details": {"reason": reason} if reason else None}}


async def test_call_cut_by_max_output_tokens_is_recorded_not_called():
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "make_file", "arguments": ""}
    body = events(*_head(call),
                  {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
                   "delta": '{"name": "tax'},
                  _end("incomplete", "max_output_tokens"))
    result = await replay(provider(), ask(), body, split="1")
    finish = result.finish
    assert (finish.reason, finish.raw_reason) == (FinishReason.LENGTH, "max_output_tokens")
    assert [(c.id, c.name, c.arguments) for c in finish.cut_tool_calls] == [("call_1", "make_file", '{"name": "tax')]
    assert result.tool_calls == [] and finish.message.tool_uses == []


async def test_incomplete_by_content_filter_and_refusal():
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    body = events(*_head(msg), {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0,
                                "content_index": 0, "delta": "I can't help with that."},
                  _end("completed"))
    result = await replay(provider(), ask(), body)
    assert result.refusal == "I can't help with that." and result.text == ""
    assert result.finish.reason == FinishReason.CONTENT_FILTER
    (part,) = result.finish.message.parts
    assert part.provider_details[REFUSAL] is True
    history = [Message("user", [TextPart("q")]), result.finish.message, Message("user", [TextPart("q2")])]
    sent = (await replay(provider(), ModelRequest("gpt-5-mini", history), b"")).requests[0]["json"]
    assert sent["input"][1]["content"] == [{"type": "refusal", "refusal": "I can't help with that."}]
    filtered = await replay(provider(), ask(), events(*_head(), _end("incomplete", "content_filter")))
    assert filtered.finish.reason == FinishReason.CONTENT_FILTER


async def test_failed_response_and_error_events_raise_after_the_partial_text():
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    text = {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": "Par"}
    failed = {"type": "response.failed", "response": {"id": "r1", "status": "failed", "error": {
        "code": "rate_limit_exceeded", "message": "Rate limit reached for gpt-5-mini"}}}
    result = await replay(provider(), ask(), events(*_head(msg), text, failed), split="random")
    assert result.text == "Par" and result.finish is None
    assert result.error.kind == "rate_limit" and not result.error.retryable
    assert "Rate limit reached" in result.error.message
    error = {"type": "error", "code": "invalid_prompt", "message": "Invalid prompt", "param": None}
    result = await replay(provider(), ask(), events(*_head(msg), text, error))
    assert result.text == "Par" and "Invalid prompt" in result.error.message


async def test_stream_cut_before_the_terminal_event_is_a_network_error():
    fx = load_fixture("openai_responses", "text-basic")
    cut = fx.body[: fx.body.index(b"event: response.completed")]
    result = await replay(provider(), ask(), cut, split="random")
    assert result.text == "pong" and result.finish is None
    assert result.error.kind == "network"


async def test_text_only_in_the_done_item_is_still_shown():
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    full = dict(msg, content=[{"type": "output_text", "text": "whole answer", "annotations": []}])
    body = events(*_head(msg), {"type": "response.output_item.done", "output_index": 0, "item": full},
                  _end("completed"))
    result = await replay(provider(), ask(), body)
    assert result.text == "whole answer" == result.finish.message.text


# --- request bodies --------------------------------------------------------------------


async def _sent(p: OpenAIResponsesProvider, request: ModelRequest) -> dict:
    return (await replay(p, request, b"")).requests[0]


async def test_request_body_for_a_reasoning_model_with_tools_and_history():
    history = [
        Message("user", [TextPart("weather in Paris?"), ImagePart("image/png", "AAAA")]),
        Message("assistant", [ThinkingPart("from another provider", {"signature": "x"}), TextPart("Checking."),
                              ToolUsePart("call_9", "get_weather", {"city": "Paris"})]),
        Message("user", [ToolResultPart("call_9", "18C", name="get_weather"), TextPart("thanks")]),
    ]
    request = ModelRequest("gpt-5-mini", history, system="Be brief.", tools=[WEATHER], max_tokens=300,
                           session_id="sess-1", extra={"reasoning": {"effort": "low", "summary": "auto"}})
    sent = await _sent(provider(), request)
    body = sent["json"]
    assert sent["url"] == "https://api.openai.com/v1/responses"
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"
    assert body["instructions"] == "Be brief." and body["max_output_tokens"] == 300
    assert body["store"] is False and body["stream"] is True
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}
    assert body["prompt_cache_key"] == "sess-1"
    assert body["tools"] == [{"type": "function", "name": "get_weather", "description": "Weather for a city.",
                              "parameters": WEATHER.input_schema}]
    assert body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "weather in Paris?"},
                                     {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_9", "output": "18C"},
        {"role": "user", "content": "thanks"},
    ]
    assert "from another provider" not in json.dumps(body)


async def test_non_reasoning_models_get_no_reasoning_fields_and_options_override():
    body = (await _sent(provider("gpt-4.1"), ask(model="gpt-4.1", temperature=0.2)))["json"]
    assert "include" not in body and "reasoning" not in body and body["temperature"] == 0.2
    body = (await _sent(provider("o4-mini"), ask(model="o4-mini", include_reasoning=False)))["json"]
    assert body["include"] == ["reasoning.encrypted_content"] and "reasoning" not in body
    body = (await _sent(provider("my-model", reasoning=True, reasoning_summary="detailed"), ask(model="my-model")))
    assert body["json"]["reasoning"] == {"summary": "detailed"}
    assert [is_reasoning_model(m) for m in ("o3", "gpt-5", "openai/gpt-5-mini", "gpt-5-chat-latest", "gpt-4o")] == [
        True, True, True, False, False]


async def test_structured_output_uses_text_format_and_is_parsed():
    schema = {"title": "City Answer", "type": "object", "properties": {"city": {"type": "string"}}}
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    body = events(*_head(msg), {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
                                "delta": '{"city": "Paris"}'}, _end("completed"))
    result = await replay(provider(), ask(response_format=schema), body)
    assert result.requests[0]["json"]["text"] == {"format": {"type": "json_schema", "name": "City_Answer",
                                                             "schema": schema}}
    assert result.finish.structured_output == {"city": "Paris"}


async def test_compatible_server_gets_no_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-0123456789")
    local = OpenAIResponsesProvider("m", base_url="http://localhost:8080/v1/")
    sent = await _sent(local, ask(model="m", session_id="s"))
    assert sent["url"] == "http://localhost:8080/v1/responses"
    assert "authorization" not in sent["headers"] and "prompt_cache_key" not in sent["json"]
    assert "sk-from-env" not in repr(OpenAIResponsesProvider("m"))


async def test_recorded_http_error():
    fx = load_error_fixture("openai-responses-400-invalid-param")
    body = json.dumps(fx["body"]).encode()
    result = await replay(provider(max_retries=0), ask(), body, status=fx["http_status"])
    assert (result.error.kind, result.error.http_code) == ("invalid_request", 400)
    assert fx["body"]["error"]["message"] in result.error.message


# --- the model string ------------------------------------------------------------------


def test_model_string_with_a_hyphenated_prefix():
    assert providers.lookup("openai-responses") is not None
    agent = Agent(model="openai-responses:gpt-5-mini", api_key=KEY)
    assert isinstance(agent.provider, OpenAIResponsesProvider) and agent.provider.model == "gpt-5-mini"
    assert providers.create("openai-responses", "", api_key=KEY).model == "gpt-5-mini"


async def test_items_only_the_terminal_event_completes_are_still_complete():
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": ""}
    done = dict(call, arguments='{"city":"Oslo"}', status="completed")
    end = _end("completed")
    end["response"]["output"] = [done]
    body = events(*_head(call), {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
                                 "output_index": 0, "delta": '{"city":"Oslo"}'}, end)
    result = await replay(provider(), ask(), body)
    assert [(c.id, c.args) for c in result.tool_calls] == [("call_1", {"city": "Oslo"})]
    assert result.finish.reason == FinishReason.TOOL_CALLS and result.finish.cut_tool_calls == []
