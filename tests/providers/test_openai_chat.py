"""OpenAIProvider against every recorded Chat Completions stream, and the bodies it sends."""

from __future__ import annotations

import json

import pytest

from support.fault_server import reply
from support.replay import fixture_names, load_error_fixture, load_fixture, replay
from nbagent.core.errors import NbagentError
from nbagent.core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from nbagent.providers.base import REFUSAL, ModelRequest, TextDelta, ThinkingDelta, ToolSpec
from nbagent.providers.openai_chat import OpenAIProvider
from nbagent.core.steps import FinishReason

KEY = "sk-test-openai-0123456789abcdef"
FIXTURES = [("openai", n) for n in fixture_names("openai")] + [
    ("openai_compat", n) for n in fixture_names("openai_compat")
]
RAW_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def provider(**kwargs) -> OpenAIProvider:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("retry_base_delay", 0.0)
    return OpenAIProvider("gpt-test", **kwargs)


def hello(**kwargs) -> ModelRequest:
    return ModelRequest("gpt-test", [Message("user", [TextPart("hi")])], **kwargs)


# --- recorded streams ------------------------------------------------------------


@pytest.mark.parametrize("split", ["whole", "random", "1"])
@pytest.mark.parametrize("kind,name", FIXTURES, ids=[f"{k}/{n}" for k, n in FIXTURES])
async def test_fixture_replay(kind, name, split):
    fx = load_fixture(kind, name)
    exp = fx.expected
    result = await replay(provider(), hello(), fx.body, split=split, seed=len(name))

    # a refusal is its own event, never answer text
    assert result.text == exp["text"]
    assert result.refusal == (exp.get("refusal") or "")
    assert result.thinking == (exp["thinking"] or "")

    if exp["usage"] is not None:
        _check_usage(result.usage, exp)

    if exp["error"] is not None:
        assert isinstance(result.error, NbagentError)
        assert exp["error"]["message"] in result.error.message
        assert result.finish is None
        # the partial output was delivered before the error
        assert any(isinstance(e, (TextDelta, ThinkingDelta)) for e in result.events)
        return

    assert result.error is None, result.error
    calls = exp["tool_calls"]
    assert [(c.id, c.name) for c in result.tool_calls] == [(c["id"], c["name"]) for c in calls]
    for got, want in zip(result.tool_calls, calls):
        parsed = want["arguments_parsed"]
        assert got.args == (parsed if parsed is not None else {"_raw": want["arguments"]})
    # ToolCallStart once per call, argument deltas add up to the raw arguments
    assert [s.id for s in result.starts] == [c["id"] for c in calls]
    assert [result.arg_deltas.get(s.key, "") for s in result.starts] == [
        c["arguments"] for c in calls
    ]

    finish = result.finish
    raw = exp["finish_reason"]
    default = FinishReason.TOOL_CALLS if calls else FinishReason.STOP
    want = RAW_FINISH[raw] if raw else default
    assert finish.reason == (FinishReason.CONTENT_FILTER if exp.get("refusal") else want)
    assert finish.raw_reason == raw
    assert finish.model == exp["model"]
    message = finish.message
    assert message.role == "assistant"
    assert message.text == result.text + result.refusal
    assert [p.text for p in message.parts if p.provider_details.get(REFUSAL)] == [result.refusal] * bool(result.refusal)
    assert [(p.id, p.name, p.args) for p in message.tool_uses] == [
        (c.id, c.name, c.args) for c in result.tool_calls
    ]
    thinking = [p for p in message.parts if isinstance(p, ThinkingPart)]
    assert "".join(p.text for p in thinking) == (exp["thinking"] or "")


def _check_usage(usage_event, exp):
    want = exp["usage"]
    assert usage_event is not None
    assert usage_event.raw == exp["raw_usage"]
    u = usage_event.usage
    output = want["output_tokens"]
    assert u.prompt_token_count == want["input_tokens"]
    assert u.generated_token_count == output
    assert u.total_token_count == want["total_tokens"]
    assert u.cached_content_token_count == (want["cache_read_tokens"] or 0)
    # reasoning larger than the completion count (OpenRouter) is capped at it
    assert u.thoughts_token_count == min(want["reasoning_tokens"] or 0, output)
    assert u.cache_write_token_count == (want["cache_write_tokens"] or 0)


async def test_in_band_error_comes_after_the_partial_deltas():
    fx = load_fixture("openai_compat", "groq-error-event-midstream")
    result = await replay(provider(), hello(), fx.body, split="random")
    assert result.thinking  # reasoning streamed before the error
    assert result.error.kind == "invalid_request"
    assert "Tool call validation failed" in str(result.error)


async def test_openrouter_error_chunk_delivers_its_usage_then_raises():
    fx = load_fixture("openai_compat", "openrouter-comments-reasoning-error-midstream")
    result = await replay(provider(), hello(), fx.body)
    assert result.usage.usage.prompt_token_count == 43
    assert result.error is not None and "Token limit reached" in result.error.message


async def test_openrouter_reasoning_details_are_kept_for_replay():
    fx = load_fixture("openai_compat", "openrouter-claude-reasoning-text")
    result = await replay(provider(), hello(), fx.body, split="7")
    (thinking,) = [p for p in result.finish.message.parts if isinstance(p, ThinkingPart)]
    details = thinking.provider_details["reasoning_details"]
    assert details[0]["text"] == thinking.text
    assert details[0].get("signature")


# --- synthetic streams -------------------------------------------------------------


def sse(*chunks) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)


def delta(**d) -> dict:
    return {"model": "m", "choices": [{"index": 0, "delta": d, "finish_reason": None}]}


async def test_invalid_tool_arguments_are_kept_raw():
    body = sse(
        delta(tool_calls=[{"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a": '}}]),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ) + b"data: [DONE]\n\n"
    result = await replay(provider(), hello(), body)
    assert result.tool_calls[0].args == {"_raw": '{"a": '}
    assert result.finish.cut_tool_calls == []


async def test_call_cut_by_the_token_limit_is_recorded_not_called():
    body = sse(
        delta(content="Writing the file."),
        delta(tool_calls=[{"index": 0, "id": "c0", "function": {"name": "ok", "arguments": "{}"}}]),
        delta(tool_calls=[{"index": 1, "id": "c1", "function": {"name": "make_file", "arguments": '{"a": '}}]),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    ) + b"data: [DONE]\n\n"
    result = await replay(provider(), hello(), body, split="7")
    assert result.finish.reason == FinishReason.LENGTH
    assert [c.name for c in result.tool_calls] == ["ok"]  # the complete call is still a call
    assert [(c.id, c.name, c.arguments) for c in result.finish.cut_tool_calls] == [("c1", "make_file", '{"a": ')]
    assert [p.name for p in result.finish.message.tool_uses] == ["ok"]


async def test_refusal_is_replayed_in_its_own_field():
    fx = load_fixture("openai", "refusal")
    result = await replay(provider(), hello(), fx.body, split="random")
    assert result.finish.reason == FinishReason.CONTENT_FILTER and result.finish.raw_reason == "stop"
    history = [Message("user", [TextPart("q")]), result.finish.message, Message("user", [TextPart("q2")])]
    body = (await _body(provider(), ModelRequest("m", history)))["json"]
    assert body["messages"][1] == {"role": "assistant", "content": None, "refusal": fx.expected["refusal"]}


async def test_stream_cut_before_finish_is_a_network_error():
    result = await replay(provider(), hello(), sse(delta(content="Hel")), split="1")
    assert result.text == "Hel"
    assert result.error.kind == "network"


async def test_garbage_data_is_a_protocol_error():
    body = sse(delta(content="ok")) + b"data: {not json\n\n"
    result = await replay(provider(), hello(), body)
    assert result.text == "ok"
    assert result.error.kind == "protocol"


async def test_structured_output_parsed_and_bad_json_is_none():
    schema = {"title": "Answer", "type": "object", "properties": {"n": {"type": "integer"}}}
    good = sse(delta(content='{"n": '), delta(content="4}")) + b"data: [DONE]\n\n"
    result = await replay(provider(), hello(response_format=schema), good)
    assert result.finish.structured_output == {"n": 4}
    bad = sse(delta(content="four")) + b"data: [DONE]\n\n"
    result = await replay(provider(), hello(response_format=schema), bad)
    assert result.finish.structured_output is None and result.finish.message.text == "four"


async def test_only_choice_zero_is_used():
    body = sse(
        {"choices": [{"index": 1, "delta": {"content": "B"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": "A"}, "finish_reason": "stop"}]},
        {"choices": [{"index": 1, "delta": {}, "finish_reason": "length"}]},
    )
    result = await replay(provider(), hello(), body)
    assert result.text == "A" and result.finish.reason == FinishReason.STOP


# --- HTTP errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,kind,retryable",
    [
        ("openai-chat-400-unsupported-value", "invalid_request", False),
        ("groq-400-tool-use-failed", "invalid_request", False),
        ("openrouter-429-upstream-rate-limited", "rate_limit", True),
    ],
)
async def test_recorded_http_errors(name, kind, retryable):
    fx = load_error_fixture(name)
    body = json.dumps(fx["body"]).encode()
    p = provider(max_retries=0)
    result = await replay(p, hello(), body, status=fx["http_status"], headers=fx["response_headers"])
    err = result.error
    assert (err.kind, err.retryable, err.http_code) == (kind, retryable, fx["http_status"])
    assert fx["body"]["error"]["message"] in err.message
    assert len(result.requests) == 1


@pytest.mark.parametrize(
    "status,error,kind,retryable",
    [
        (400, {"message": "This model's maximum context length is 128000 tokens.",
               "code": "context_length_exceeded"}, "context_length", False),
        (401, {"message": "Incorrect API key provided", "code": "invalid_api_key"}, "auth", False),
        (404, {"message": "The model does not exist", "code": "model_not_found"}, "invalid_request", False),
        (429, {"message": "You exceeded your current quota", "code": "insufficient_quota"}, "rate_limit", False),
        (503, {"message": "Slow down", "code": "slow_down"}, "server", True),
        (400, "ollama says no", "invalid_request", False),
    ],
)
async def test_error_mapping(status, error, kind, retryable):
    body = json.dumps({"error": error}).encode()
    result = await replay(provider(max_retries=0), hello(), body, status=status)
    assert (result.error.kind, result.error.retryable) == (kind, retryable)


async def test_retryable_status_is_retried_then_raised():
    result = await replay(provider(max_retries=2), hello(), b"oops", status=502)
    assert result.error.kind == "server" and len(result.requests) == 3
    assert "3 attempts" in result.error.message


async def test_json_reply_to_a_streaming_call():
    json_headers = {"content-type": "application/json"}
    error = json.dumps({"error": {"message": "model is loading", "code": 503}}).encode()
    result = await replay(provider(), hello(), error, headers=json_headers)
    assert (result.error.kind, result.error.message) == ("server", "model is loading")
    assert len(result.requests) == 1  # a 200 body was read: never retried
    completion = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    result = await replay(provider(), hello(), completion, headers=json_headers)
    assert result.error.kind == "protocol" and "event stream" in result.error.message


# --- request bodies ----------------------------------------------------------------


async def _body(p: OpenAIProvider, request: ModelRequest) -> dict:
    result = await replay(p, request, b"data: [DONE]\n\n")
    return result.requests[0]


async def test_request_body_with_tools_and_history():
    history = [
        Message("user", [TextPart("weather in Paris and Rome?")]),
        Message(
            "assistant",
            [
                ThinkingPart("the user wants two cities", provider_details={"x": 1}),
                TextPart("Checking."),
                ToolUsePart("call_1", "weather", {"city": "Paris"}),
                ToolUsePart("call_2", "weather", {"city": "Rome"}),
            ],
        ),
        Message(
            "user",
            [
                ToolResultPart("call_1", "18C", name="weather"),
                ToolResultPart("call_2", "boom", is_error=True, name="weather"),
                TextPart("and in Celsius please"),
            ],
        ),
    ]
    tool = ToolSpec("weather", "Current weather", {"type": "object", "properties": {"city": {"type": "string"}}})
    request = ModelRequest(
        "gpt-x", history, system="Be brief.", tools=[tool], temperature=0.2, max_tokens=100,
        extra={"seed": 7},
    )
    sent = await _body(provider(), request)
    body = sent["json"]
    assert sent["url"] == "https://api.openai.com/v1/chat/completions"
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"
    assert body["model"] == "gpt-x" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Rome"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "boom"},
        {"role": "user", "content": "and in Celsius please"},
    ]
    assert "the user wants two cities" not in json.dumps(body)
    assert body["tools"] == [
        {"type": "function", "function": {"name": "weather", "description": "Current weather",
                                          "parameters": tool.input_schema}}
    ]
    assert body["temperature"] == 0.2
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body
    assert body["seed"] == 7


async def test_assistant_with_only_tool_calls_has_null_content_and_images_are_data_urls():
    history = [
        Message("user", [TextPart("what is this?"), ImagePart("image/png", "AAAA")]),
        Message("assistant", [ThinkingPart("hmm"), ToolUsePart("c", "look", {})]),
        Message("user", [ToolResultPart("c", "a cat")]),
    ]
    body = (await _body(provider(), ModelRequest("m", history)))["json"]
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    assert body["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "look", "arguments": "{}"}}],
    }
    assert body["messages"][2] == {"role": "tool", "tool_call_id": "c", "content": "a cat"}


async def test_reasoning_details_replayed_to_openrouter_not_to_openai():
    details = [{"type": "reasoning.encrypted", "data": "opaque", "index": 0}]
    history = [
        Message("user", [TextPart("q")]),
        Message("assistant", [ThinkingPart("", provider_details={"reasoning_details": details}),
                              TextPart("a")]),
        Message("user", [TextPart("q2")]),
    ]
    router = provider(base_url="https://openrouter.ai/api/v1")
    body = (await _body(router, ModelRequest("m", history)))["json"]
    assert body["messages"][1] == {"role": "assistant", "content": "a", "reasoning_details": details}
    body = (await _body(provider(), ModelRequest("m", history)))["json"]
    assert body["messages"][1] == {"role": "assistant", "content": "a"}


async def test_tool_call_without_id_gets_one():
    body = sse(
        delta(tool_calls=[{"index": 0, "function": {"name": "f", "arguments": "{}"}}]),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    result = await replay(provider(), hello(), body)
    (call,) = result.tool_calls
    assert call.id and call.name == "f" and call.args == {}
    assert result.finish.message.tool_uses[0].id == call.id


async def test_response_format_json_schema():
    schema = {"title": "City Answer", "type": "object", "properties": {"city": {"type": "string"}}}
    body = (await _body(provider(), hello(response_format=schema)))["json"]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "City_Answer", "schema": schema},
    }


async def test_prompt_cache_key_only_on_openai_and_when_caching():
    body = (await _body(provider(), hello(session_id="sess-1")))["json"]
    assert body["prompt_cache_key"] == "sess-1"
    body = (await _body(provider(), hello(session_id="sess-1", cache_strategy="none")))["json"]
    assert "prompt_cache_key" not in body
    local = provider(base_url="http://127.0.0.1:8080/v1", api_key=None)
    body = (await _body(local, hello(session_id="sess-1", max_tokens=5)))["json"]
    assert "prompt_cache_key" not in body
    assert body["max_tokens"] == 5 and "max_completion_tokens" not in body


async def test_keys_local_servers_and_repr(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-0123456789")
    local = OpenAIProvider("m", base_url="http://localhost:8080/v1/")
    sent = await _body(local, hello())
    assert "authorization" not in sent["headers"]
    assert sent["url"] == "http://localhost:8080/v1/chat/completions"
    remote = OpenAIProvider("m", base_url="https://example.test/v1")
    assert (await _body(remote, hello()))["headers"]["authorization"] == "Bearer sk-from-env-0123456789"
    explicit = provider()
    assert KEY not in repr(explicit) and "sk-from-env" not in repr(remote)


@pytest.mark.parametrize("env_key", ["sk-from-env-0123456789", None], ids=["env-key-set", "no-env-key"])
def test_a_401_from_a_loopback_server_says_the_env_key_is_kept_back_and_asks_for_api_key(
        env_key, fault_server, monkeypatch):
    """A local vLLM started with --api-key answers 401 {"error": "Unauthorized"}: the error says why no
    key went (OPENAI_API_KEY is never sent to loopback) and how to pass one; the env key stays out of it."""
    from nbagent import Agent

    if env_key:
        monkeypatch.setenv("OPENAI_API_KEY", env_key)
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fault_server.push(reply(401, {"error": "Unauthorized"}))
    base = fault_server.url + "/v1"
    agent = Agent(model="openai:served-model", base_url=base)
    with pytest.raises(NbagentError) as err:
        agent.ask("hi")
    message = str(err.value)
    assert (err.value.kind, err.value.http_code) == ("auth", 401)
    assert "Unauthorized" in message and "loopback" in message and "api_key=" in message
    assert f'base_url="{base}"' in message and "--api-key" in message
    assert ("OPENAI_API_KEY is set" in message) == bool(env_key)
    assert "sk-from-env" not in message and "authorization" not in fault_server.requests[0].headers
    assert len(fault_server.requests) == 1  # an auth error is not retried


def test_a_401_after_an_explicit_key_has_no_loopback_advice(fault_server, monkeypatch):
    from nbagent import Agent

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-0123456789")
    fault_server.push(reply(401, {"error": "Unauthorized"}))
    agent = Agent(model="openai:served-model", base_url=fault_server.url + "/v1", api_key="sk-local-wrong-0000")
    with pytest.raises(NbagentError) as err:
        agent.ask("hi")
    assert err.value.kind == "auth" and "loopback" not in str(err.value) and "sk-local" not in str(err.value)
    assert fault_server.requests[0].headers["authorization"] == "Bearer sk-local-wrong-0000"


async def test_deltas_stream_before_the_finish():
    fx = load_fixture("openai", "text-basic-include-usage")
    result = await replay(provider(), hello(), fx.body, split="1")
    kinds = [type(e).__name__ for e in result.events]
    assert kinds[-1] == "Finish"
    assert kinds.index("TextDelta") < kinds.index("Usage")
    assert all(isinstance(e, TextDelta) for e in result.events[: kinds.count("TextDelta")])


@pytest.mark.parametrize("model", ["openai:gpt-4.1-mini", "openai-responses:gpt-5-mini"])
def test_no_key_for_openai_says_so_at_the_first_turn(model, monkeypatch):
    from nbagent import Agent

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = Agent(model=model)
    with pytest.raises(NbagentError) as err:
        agent.ask("hi")
    assert err.value.kind == "auth" and "OPENAI_API_KEY" in str(err.value)
    assert agent.conversation.turns[0].status == "error"
