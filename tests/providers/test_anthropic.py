"""AnthropicProvider: every recorded stream replayed, request bodies, error bodies."""

from __future__ import annotations

import json

import pytest

from support.replay import fixture_names, load_error_fixture, load_fixture, replay
from nbagent.core.errors import NbagentError
from nbagent.core.messages import Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from nbagent.providers.anthropic import STRUCTURED_TOOL, AnthropicProvider
from nbagent.providers.base import ModelRequest, ToolSpec
from nbagent.core.steps import FinishReason

KEY = "sk-ant-test-0123456789abcdef"
NAMES = fixture_names("anthropic")
FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
}
WEATHER = ToolSpec(
    "get_weather",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def provider(**kw) -> AnthropicProvider:
    return AnthropicProvider("claude-test", api_key=KEY, **kw)


def ask(text: str = "hi", **kw) -> ModelRequest:
    return ModelRequest(model="claude-test", messages=[Message("user", [TextPart(text)])], **kw)


def sse(*events: dict) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def test_fixtures_are_available():
    assert len(NAMES) >= 13


# --- every recorded stream ---------------------------------------------------


@pytest.mark.parametrize("split", ["whole", "random", "1"])
@pytest.mark.parametrize("name", NAMES)
async def test_fixture_replay(name, split):
    fx = load_fixture("anthropic", name)
    exp = fx.expected
    result = await replay(provider(), ask(), fx.body, split=split, seed=len(name))
    assert result.error is None, result.error
    finish = result.finish
    assert result.text == exp["text"]
    assert finish.message.text == exp["text"]
    assert (result.thinking or None) == exp["thinking"]
    assert finish.reason == FINISH[exp["finish_reason"]]
    assert finish.raw_reason == exp["finish_reason"]
    assert finish.model == exp["model"]

    thinking_parts = [p for p in finish.message.parts if isinstance(p, ThinkingPart)]
    signatures = [p.provider_details.get("signature") for p in thinking_parts]
    if exp["thinking_signature"]:
        assert signatures == [exp["thinking_signature"]]  # byte-identical
        assert thinking_parts[0].text == exp["thinking"]

    complete = [c for c in exp["tool_calls"] if c["arguments_parsed"] is not None]
    calls = [(c.id, c.name, c.args) for c in result.tool_calls]
    assert calls == [(c["id"], c["name"], c["arguments_parsed"]) for c in complete]
    assert [(u.id, u.name, u.args) for u in finish.message.tool_uses] == calls
    assert [(s.id, s.name) for s in result.starts] == [(c["id"], c["name"]) for c in exp["tool_calls"]]
    for start, call in zip(result.starts, exp["tool_calls"]):
        assert result.arg_deltas.get(start.key, "") == call["arguments"]

    usage, want = result.usage, exp["usage"]
    assert usage.raw == exp["raw_usage"]
    assert usage.usage.prompt_token_count == want["input_tokens"]
    assert usage.usage.generated_token_count == want["output_tokens"]
    assert usage.usage.total_token_count == want["total_tokens"]
    assert usage.usage.cached_content_token_count == want["cache_read_tokens"]
    assert usage.usage.thoughts_token_count == (want["reasoning_tokens"] or 0)
    assert usage.usage.cache_write_token_count == want["cache_write_tokens"]


async def test_truncated_tool_call_is_left_out_but_recorded_as_cut():
    fx = load_fixture("anthropic", "max-tokens-incomplete-tool-json")
    result = await replay(provider(), ask(), fx.body, split="7")
    assert result.finish.reason == FinishReason.LENGTH
    assert [s.name for s in result.starts] == ["make_file"]
    assert result.tool_calls == [] and result.finish.message.tool_uses == []
    (cut,) = result.finish.cut_tool_calls
    (want,) = fx.expected["tool_calls"]
    assert (cut.id, cut.name, cut.arguments) == (want["id"], want["name"], want["arguments"])
    # the text before the call stays; nothing of the call is replayed
    body = provider().build_http_request(_followup(result.finish.message))[2]
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text"]


async def test_redacted_thinking_is_kept_for_replay_but_not_shown():
    fx = load_fixture("anthropic", "redacted-thinking")
    result = await replay(provider(), ask(), fx.body, split="random")
    data = [b["data"] for b in fx.expected["blocks"] if b["type"] == "redacted_thinking"]
    parts = [p for p in result.finish.message.parts if isinstance(p, ThinkingPart)]
    assert [p.provider_details["redacted_data"] for p in parts] == data
    assert result.thinking == ""
    body = provider().build_http_request(_followup(result.finish.message))[2]
    sent = body["messages"][1]["content"]
    assert [b["data"] for b in sent if b["type"] == "redacted_thinking"] == data


async def test_server_tool_blocks_are_not_client_calls_and_are_replayed():
    fx = load_fixture("anthropic", "server-tool-code-execution")
    result = await replay(provider(), ask(), fx.body, split="random")
    assert result.starts == [] and result.tool_calls == []
    assert result.finish.reason == FinishReason.STOP
    body = provider().build_http_request(_followup(result.finish.message))[2]
    types = [b["type"] for b in body["messages"][1]["content"]]
    assert types == ["thinking", "text", "server_tool_use", "bash_code_execution_tool_result", "text"]
    server_use = body["messages"][1]["content"][2]
    assert server_use["input"] == {"command": 'echo "65465-6544 * 65464-6+1.02255" | bc -l'}


async def test_signature_round_trips_byte_identical_into_next_request():
    fx = load_fixture("anthropic", "thinking-then-tool-use")
    result = await replay(provider(), ask(), fx.body, split="1")
    message = result.finish.message
    call = message.tool_uses[0]
    follow = _followup(message, [ToolResultPart(call.id, "4.2.0", name=call.name)])
    body = provider().build_http_request(follow)[2]
    thinking, tool_use = body["messages"][1]["content"]
    assert thinking == {
        "type": "thinking",
        "thinking": fx.expected["thinking"],
        "signature": fx.expected["thinking_signature"],
    }
    assert tool_use == {"type": "tool_use", "id": call.id, "name": "fixed_version", "input": {}}
    assert body["messages"][2]["content"][0]["tool_use_id"] == call.id


def _followup(message: Message, results: list | None = None) -> ModelRequest:
    user = Message("user", (results or []) + [TextPart("go on")])
    return ModelRequest(model="m", messages=[Message("user", [TextPart("hi")]), message, user])


# --- in-band errors and cut streams -------------------------------------------


def _head(text: str) -> list[dict]:
    return [
        {"type": "message_start", "message": {"model": "claude-test", "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    ]


@pytest.mark.parametrize("split", ["whole", "1"])
async def test_error_event_raises_after_partial_text(split):
    body = sse(*_head("Partial"), {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    result = await replay(provider(), ask(), body, split=split)
    assert result.text == "Partial"
    assert result.finish is None
    assert result.error.kind == "server"
    assert result.error.retryable is False  # output had started
    assert "Overloaded" in str(result.error)


async def test_stream_without_message_stop_is_a_network_error():
    fx = load_fixture("anthropic", "text-basic")
    cut = fx.body[: fx.body.index(b"event: message_stop")]
    result = await replay(provider(), ask(), cut, split="random")
    assert result.text == "Hello"
    assert result.error.kind == "network"
    assert result.finish is None


async def test_invalid_tool_json_reaches_the_tool_as_raw():
    body = sse(
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    )
    result = await replay(provider(), ask(), body)
    assert result.tool_calls[0].args == {"_raw": "{\"a\": "}


# --- structured output --------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


def _structured_stream(args: str) -> bytes:
    return sse(
        {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 9, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t9", "name": STRUCTURED_TOOL, "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": args[:5]}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": args[5:]}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}},
        {"type": "message_stop"},
    )


async def test_structured_output_lands_in_finish_not_in_tool_calls():
    request = ask("2+2?", response_format=SCHEMA)
    body = provider().build_http_request(request)[2]
    assert body["tools"][-1]["name"] == STRUCTURED_TOOL
    assert body["tools"][-1]["input_schema"] == SCHEMA
    assert body["tool_choice"] == {"type": "tool", "name": STRUCTURED_TOOL}

    result = await replay(provider(), request, _structured_stream('{"answer": 4}'), split="1")
    assert result.finish.structured_output == {"answer": 4}
    assert result.starts == [] and result.tool_calls == []
    assert result.finish.reason == FinishReason.STOP
    assert json.loads(result.text) == {"answer": 4}
    assert result.finish.message.tool_uses == []  # nothing left unanswered in history


async def test_structured_output_non_object_schema_is_wrapped():
    schema = {"type": "array", "items": {"type": "string"}}
    request = ask("list", response_format={"name": "names", "schema": schema})
    body = provider().build_http_request(request)[2]
    assert body["tools"][-1]["input_schema"]["properties"]["value"] == schema
    result = await replay(provider(), request, _structured_stream('{"value": ["a", "b"]}'))
    assert result.finish.structured_output == ["a", "b"]


def test_structured_output_with_tools_or_thinking_is_not_forced_to_one_tool():
    with_tools = provider().build_http_request(ask(response_format=SCHEMA, tools=[WEATHER]))[2]
    assert with_tools["tool_choice"] == {"type": "any"}
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    body = provider().build_http_request(ask(response_format=SCHEMA, extra=thinking))[2]
    assert body["tool_choice"] == {"type": "auto"}
    assert STRUCTURED_TOOL in body["system"][0]["text"]


# --- request body ---------------------------------------------------------------

SIG = "EuYBCkQYAiJA+/sig=="


def history() -> list[Message]:
    return [
        Message("user", [TextPart("Weather in Paris and Rome?")]),
        Message(
            "assistant",
            [
                ThinkingPart("I should call the tool twice.", provider_details={"signature": SIG}),
                ThinkingPart("", provider_details={"redacted_data": "REDACTED=="}),
                ThinkingPart("unsigned thought from another provider"),
                TextPart("Checking."),
                ToolUsePart("toolu_1", "get_weather", {"city": "Paris"}),
                ToolUsePart("toolu_2", "get_weather", {"city": "Rome"}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultPart("toolu_1", "18C", name="get_weather"),
                ToolResultPart("toolu_2", "city not found", is_error=True, name="get_weather"),
            ],
        ),
        Message("assistant", [TextPart("Paris is 18C; Rome failed.")]),
        Message("user", [TextPart("Thanks. And tomorrow?")]),
    ]


def request(**kw) -> ModelRequest:
    base = dict(model="claude-test", messages=history(), system="Be brief.", tools=[WEATHER], temperature=0.3)
    base.update(kw)
    return ModelRequest(**base)


def _cache_marks(body: dict) -> int:
    return json.dumps(body).count('"cache_control"')


def test_request_url_headers_and_basics():
    url, headers, body = provider().build_http_request(request())
    assert url == "https://api.anthropic.com/v1/messages"
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert body["model"] == "claude-test" and body["stream"] is True
    assert body["max_tokens"] == 4096 and body["temperature"] == 0.3
    assert body["tools"][0]["name"] == "get_weather"
    assert body["tools"][0]["input_schema"] == WEATHER.input_schema


def test_request_history_replays_thinking_and_groups_tool_results():
    body = provider().build_http_request(request())[2]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "I should call the tool twice.", "signature": SIG}
    assert assistant[1] == {"type": "redacted_thinking", "data": "REDACTED=="}
    assert [b["type"] for b in assistant[2:]] == ["text", "tool_use", "tool_use"]  # unsigned thought dropped
    assert assistant[3] == {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    results = body["messages"][2]["content"]
    assert [(b["type"], b["tool_use_id"], b.get("is_error", False)) for b in results] == [
        ("tool_result", "toolu_1", False),
        ("tool_result", "toolu_2", True),
    ]


def test_tool_results_lead_a_merged_user_message():
    msgs = history()[:2] + [
        Message("user", [ToolResultPart("toolu_1", "18C")]),
        Message("user", [TextPart("also this"), ToolResultPart("toolu_2", "20C")]),
    ]
    body = provider().build_http_request(request(messages=msgs))[2]
    last = body["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert len(body["messages"]) == 3


def test_cache_auto_marks_system_last_tool_and_last_two_user_turns():
    body = provider().build_http_request(request())[2]
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [i for i, m in enumerate(body["messages"]) if any("cache_control" in b for b in m["content"])]
    assert marked == [2, 4]
    assert "cache_control" in body["messages"][4]["content"][-1]
    assert _cache_marks(body) == 4


def test_cache_marks_never_exceed_four_even_with_structured_output():
    body = provider().build_http_request(request(response_format=SCHEMA))[2]
    assert _cache_marks(body) <= 4
    assert "cache_control" in body["tools"][-1]


def test_cache_none_sends_no_markers():
    body = provider().build_http_request(request(cache_strategy="none"))[2]
    assert _cache_marks(body) == 0
    assert body["system"] == "Be brief."


def test_thinking_extra_raises_max_tokens_and_drops_temperature():
    extra = {"thinking": {"type": "enabled", "budget_tokens": 8000}}
    body = provider().build_http_request(request(extra=extra))[2]
    assert body["thinking"] == extra["thinking"]
    assert body["max_tokens"] > 8000
    assert "temperature" not in body


def test_missing_key_is_an_auth_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(NbagentError) as err:
        AnthropicProvider("claude-test").build_http_request(ask())
    assert err.value.kind == "auth"


def test_key_from_environment_and_never_in_repr(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env-9876543210zyx")
    p = AnthropicProvider("claude-test")
    assert p.build_http_request(ask())[1]["x-api-key"] == "sk-ant-env-9876543210zyx"
    assert "9876543210" not in repr(p)


# --- error bodies ---------------------------------------------------------------


def _error(status: int, etype: str, message: str, headers: dict | None = None) -> NbagentError:
    body = json.dumps({"type": "error", "error": {"type": etype, "message": message}}).encode()
    return provider().parse_error(status, body, headers or {})


@pytest.mark.parametrize(
    "status, etype, message, kind, retryable",
    [
        (401, "authentication_error", "invalid x-api-key", "auth", False),
        (403, "permission_error", "no access", "auth", False),
        (429, "rate_limit_error", "Number of request tokens has exceeded your limit", "rate_limit", True),
        (529, "overloaded_error", "Overloaded", "server", True),
        (500, "api_error", "Internal server error", "server", True),
        (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", "context_length", False),
        (400, "invalid_request_error", "messages: roles must alternate", "invalid_request", False),
    ],
)
def test_error_bodies(status, etype, message, kind, retryable):
    error = _error(status, etype, message)
    assert (error.kind, error.retryable, error.http_code) == (kind, retryable, status)
    assert message in str(error)


@pytest.mark.parametrize("name", ["anthropic-400-invalid-request", "anthropic-404-not-found"])
def test_recorded_error_bodies(name):
    fx = load_error_fixture(name)
    body = json.dumps(fx["body"]).encode()
    error = provider().parse_error(fx["http_status"], body, fx.get("response_headers") or {})
    assert error.kind == "invalid_request" and not error.retryable
    assert fx["body"]["error"]["message"] in str(error)


async def test_429_reply_honours_retry_after_then_gives_up():
    body = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}).encode()
    p = provider(max_retries=0)
    result = await replay(p, ask(), body, status=429, headers={"retry-after": "7"})
    assert result.error.kind == "rate_limit" and result.error.retry_after == 7
    assert len(result.requests) == 1


async def test_events_without_event_lines_dispatch_on_data_type():
    fx = load_fixture("anthropic", "text-then-tool-use")
    stripped = b"\n".join(line for line in fx.body.split(b"\n") if not line.startswith(b"event:"))
    result = await replay(provider(), ask(), stripped, split="random")
    assert result.text == fx.expected["text"]
    assert [c.args for c in result.tool_calls] == [{"location": "Paris"}]
