"""Anthropic and Gemini providers against a real misbehaving HTTP server on loopback.

Same faults as ``test_provider_faults`` (which covers OpenAI): rate limits,
5xx, auth, cut connections, garbage, empty bodies, stalls, plus each wire
format's own in-band errors. ``ANTHROPIC_WIRE`` / ``GEMINI_WIRE`` follow
``fault_server.WireFormat``.
"""

from __future__ import annotations

import json

import pytest

from fault_server import (
    FaultServer,
    WireFormat,
    drop_after,
    empty_200,
    fault_server,  # noqa: F401 - pytest fixture
    reply,
    sse,
    stall_after,
)
from nbagent.errors import NbagentError
from nbagent.messages import Message, TextPart
from nbagent.providers.anthropic import AnthropicProvider
from nbagent.providers.base import Finish, ModelRequest, TextDelta, ToolCallEnd, ToolCallStart
from nbagent.providers.gemini import GeminiProvider

ANTHROPIC_KEY = "sk-ant-fault-key-0123456789abcdef"
GEMINI_KEY = "AIzaSyFAULT-key-0123456789abcdefghij"

# --- Anthropic wire -------------------------------------------------------------


def _event(obj: dict) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


def _anthropic_prefix(pieces: list[str]) -> bytes:
    start = {"type": "message_start",
             "message": {"model": "claude-fault", "usage": {"input_tokens": 5, "output_tokens": 1}}}
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    deltas = [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
              for p in pieces]
    return b"".join(_event(e) for e in [start, {"type": "ping"}, block, *deltas])


def _anthropic_text(pieces: list[str]) -> bytes:
    tail = [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]
    return _anthropic_prefix(pieces) + b"".join(_event(e) for e in tail)


def _anthropic_tool_prefix() -> bytes:
    start = {"type": "message_start", "message": {"model": "claude-fault", "usage": {"input_tokens": 5}}}
    block = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}}
    delta = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": '{"city": "Par'}}
    return b"".join(_event(e) for e in [start, block, delta])


def _anthropic_error(status: int, message: str) -> bytes:
    types = {401: "authentication_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}
    return json.dumps({"type": "error", "error": {"type": types.get(status, "invalid_request_error"),
                                                  "message": message}}).encode()


ANTHROPIC_WIRE = WireFormat(
    name="anthropic",
    make_provider=lambda base_url, **kw: AnthropicProvider("claude-fault", base_url=base_url, **kw),
    text_body=_anthropic_text,
    text_prefix=_anthropic_prefix,
    tool_args_prefix=_anthropic_tool_prefix,
    garbage_body=lambda: _anthropic_prefix(["ok"]) + b"event: content_block_delta\ndata: <html>502</html>\n\n",
    error_body=_anthropic_error,
)

# --- Gemini wire ------------------------------------------------------------------


def _gdata(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\r\n\r\n"


def _gemini_chunk(text: str, finish: str | None = None) -> bytes:
    candidate: dict = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}
    return _gdata({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-fault"})


def _gemini_prefix(pieces: list[str]) -> bytes:
    return b"".join(_gemini_chunk(p) for p in pieces)


def _gemini_text(pieces: list[str]) -> bytes:
    return _gemini_prefix(pieces) + _gemini_chunk("", "STOP")


def _gemini_tool_prefix() -> bytes:
    # Gemini sends a call whole; a cut after it (no finishReason) is still incomplete.
    part = {"functionCall": {"name": "weather", "args": {"city": "Paris"}}}
    return _gdata({"candidates": [{"content": {"parts": [part], "role": "model"}}]})


def _gemini_error(status: int, message: str) -> bytes:
    statuses = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
    return json.dumps({"error": {"code": status, "message": message,
                                 "status": statuses.get(status, "INVALID_ARGUMENT")}}, indent=2).encode()


GEMINI_WIRE = WireFormat(
    name="gemini",
    make_provider=lambda base_url, **kw: GeminiProvider("gemini-fault", base_url=base_url + "/v1beta", **kw),
    text_body=_gemini_text,
    text_prefix=_gemini_prefix,
    tool_args_prefix=_gemini_tool_prefix,
    garbage_body=lambda: _gemini_prefix(["ok"]) + b"data: <html>502 Bad Gateway</html>\r\n\r\n",
    error_body=_gemini_error,
)

WIRES = [ANTHROPIC_WIRE, GEMINI_WIRE]
KEYS = {"anthropic": ANTHROPIC_KEY, "gemini": GEMINI_KEY}
wire_param = pytest.mark.parametrize("wire", WIRES, ids=[w.name for w in WIRES])


# --- helpers -------------------------------------------------------------------------


def make(wire: WireFormat, server: FaultServer, **kwargs):
    kwargs.setdefault("api_key", KEYS[wire.name])
    kwargs.setdefault("retry_base_delay", 0.01)
    kwargs.setdefault("read_timeout", 5.0)
    return wire.make_provider(server.url, **kwargs)


async def collect(provider) -> tuple[list, NbagentError | None]:
    events, error = [], None
    request = ModelRequest(provider.model, [Message("user", [TextPart("hi")])])
    try:
        async for event in provider.stream(request):
            events.append(event)
    except NbagentError as exc:
        error = exc
    finally:
        await provider.aclose()
    return events, error


def text_of(events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def assert_key_hidden(wire: WireFormat, error: NbagentError, provider) -> None:
    for text in (str(error), repr(error), error.message, repr(provider)):
        assert KEYS[wire.name] not in text


# --- shared faults -----------------------------------------------------------------


@wire_param
async def test_rate_limited_then_success(wire, fault_server):
    fault_server.push(
        reply(429, wire.error_body(429, "Rate limit reached"), {"retry-after": "0"}),
        sse(wire.text_body(["Hello", " world"])),
    )
    events, error = await collect(make(wire, fault_server))
    assert error is None and text_of(events) == "Hello world"
    assert isinstance(events[-1], Finish)
    assert len(fault_server.requests) == 2


@wire_param
async def test_server_error_twice_then_success(wire, fault_server):
    fault_server.push(
        reply(500, wire.error_body(500, "internal error")),
        reply(503, b"<html>Service Unavailable</html>", {"Content-Type": "text/html"}),
        sse(wire.text_body(["fine"])),
    )
    events, error = await collect(make(wire, fault_server))
    assert error is None and text_of(events) == "fine"
    assert len(fault_server.requests) == 3


@wire_param
async def test_server_errors_exhaust_the_retries(wire, fault_server):
    fault_server.push(*[reply(500, wire.error_body(500, "down")) for _ in range(3)])
    events, error = await collect(make(wire, fault_server, max_retries=2))
    assert events == []
    assert (error.kind, error.retryable, error.http_code) == ("server", True, 500)
    assert len(fault_server.requests) == 3


@wire_param
async def test_auth_error_is_not_retried_and_hides_the_key(wire, fault_server):
    key = KEYS[wire.name]
    fault_server.push(reply(401, wire.error_body(401, f"invalid key: {key}")))
    provider = make(wire, fault_server)
    events, error = await collect(provider)
    assert (error.kind, error.retryable, error.http_code) == ("auth", False, 401)
    assert len(fault_server.requests) == 1
    assert "invalid key" in str(error)
    assert_key_hidden(wire, error, provider)


@wire_param
async def test_disconnect_mid_text(wire, fault_server):
    fault_server.push(drop_after(wire.text_prefix(["Hel", "lo"])), sse(wire.text_body(["never"])))
    provider = make(wire, fault_server)
    events, error = await collect(provider)
    assert text_of(events) == "Hello"
    assert error.kind == "network" and not error.retryable
    assert not any(isinstance(e, Finish) for e in events)
    assert len(fault_server.requests) == 1
    assert_key_hidden(wire, error, provider)


@wire_param
async def test_disconnect_mid_tool_call(wire, fault_server):
    fault_server.push(drop_after(wire.tool_args_prefix()), sse(wire.text_body(["never"])))
    events, error = await collect(make(wire, fault_server))
    assert error.kind == "network"
    assert any(isinstance(e, ToolCallStart) for e in events)
    assert not any(isinstance(e, Finish) for e in events)
    if wire.name == "anthropic":  # arguments were cut: the call never completes
        assert not any(isinstance(e, ToolCallEnd) for e in events)
    assert len(fault_server.requests) == 1


@wire_param
async def test_garbage_payload_is_a_protocol_error(wire, fault_server):
    fault_server.push(sse(wire.garbage_body()))
    events, error = await collect(make(wire, fault_server))
    assert text_of(events) == "ok"
    assert error.kind == "protocol"
    assert len(fault_server.requests) == 1


@wire_param
async def test_empty_200_body_is_an_error_and_not_retried(wire, fault_server):
    fault_server.push(empty_200(), sse(wire.text_body(["never"])))
    events, error = await collect(make(wire, fault_server))
    assert events == [] and "empty" in error.message
    assert len(fault_server.requests) == 1


@wire_param
async def test_stalled_stream_times_out(wire, fault_server):
    fault_server.push(stall_after(wire.text_prefix(["slow"]), seconds=10))
    provider = make(wire, fault_server, read_timeout=0.5)
    events, error = await collect(provider)
    assert text_of(events) == "slow"
    assert error.kind == "timeout"
    assert len(fault_server.requests) == 1
    assert_key_hidden(wire, error, provider)


@wire_param
async def test_slow_drip_within_the_read_timeout_succeeds(wire, fault_server):
    fault_server.push(sse(wire.text_body(["drip", " drip"]), chunk_size=30, delay=0.01))
    events, error = await collect(make(wire, fault_server, read_timeout=2.0))
    assert error is None and text_of(events) == "drip drip"


# --- Anthropic specifics ---------------------------------------------------------------


async def test_anthropic_request_reaches_the_server(fault_server):
    fault_server.push(sse(_anthropic_text(["hi"])))
    await collect(make(ANTHROPIC_WIRE, fault_server))
    (req,) = fault_server.requests
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == ANTHROPIC_KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert req.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    ]


async def test_anthropic_overloaded_529_then_success(fault_server):
    fault_server.push(reply(529, _anthropic_error(529, "Overloaded")), sse(_anthropic_text(["ok"])))
    events, error = await collect(make(ANTHROPIC_WIRE, fault_server))
    assert error is None and text_of(events) == "ok"
    assert len(fault_server.requests) == 2


async def test_anthropic_error_event_mid_stream_is_not_retried(fault_server):
    body = _anthropic_prefix(["Par", "tial"]) + _event(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    fault_server.push(sse(body), sse(_anthropic_text(["never"])))
    events, error = await collect(make(ANTHROPIC_WIRE, fault_server))
    assert text_of(events) == "Partial"
    assert (error.kind, error.retryable) == ("server", False)
    assert len(fault_server.requests) == 1


async def test_anthropic_prompt_too_long_is_context_length(fault_server):
    body = _anthropic_error(400, "prompt is too long: 250000 tokens > 200000 maximum")
    fault_server.push(reply(400, body))
    events, error = await collect(make(ANTHROPIC_WIRE, fault_server))
    assert (error.kind, error.retryable, error.http_code) == ("context_length", False, 400)


# --- Gemini specifics ---------------------------------------------------------------------


async def test_gemini_key_travels_in_a_header_not_the_url(fault_server):
    fault_server.push(sse(_gemini_text(["hi"])))
    await collect(make(GEMINI_WIRE, fault_server))
    (req,) = fault_server.requests
    assert req.path == "/v1beta/models/gemini-fault:streamGenerateContent?alt=sse"
    assert req.headers["x-goog-api-key"] == GEMINI_KEY
    assert GEMINI_KEY not in req.path
    assert req.json["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


async def test_gemini_retry_delay_from_the_body_then_success(fault_server):
    body = json.dumps({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED",
                                 "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                              "retryDelay": "0.05s"}]}}).encode()
    fault_server.push(reply(429, body), sse(_gemini_text(["ok"])))
    events, error = await collect(make(GEMINI_WIRE, fault_server))
    assert error is None and text_of(events) == "ok"
    assert len(fault_server.requests) == 2


async def test_gemini_invalid_key_400_is_auth_and_not_retried(fault_server):
    body = json.dumps({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                 "status": "INVALID_ARGUMENT",
                                 "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                              "reason": "API_KEY_INVALID"},
                                             {"@type": "type.googleapis.com/google.rpc.DebugInfo",
                                              "detail": f"Invalid API key: {GEMINI_KEY}"}]}}, indent=2)
    fault_server.push(reply(400, body), sse(_gemini_text(["never"])))
    provider = make(GEMINI_WIRE, fault_server)
    events, error = await collect(provider)
    assert (error.kind, error.retryable, error.http_code) == ("auth", False, 400)
    assert len(fault_server.requests) == 1
    assert_key_hidden(GEMINI_WIRE, error, provider)


async def test_gemini_raw_json_error_mid_stream(fault_server):
    error_json = b'{\n  "error": {\n    "code": 503,\n    "message": "The model is overloaded.",\n' \
                 b'    "status": "UNAVAILABLE"\n  }\n}\n'
    fault_server.push(sse(_gemini_prefix(["First ", "Second "]) + error_json, chunk_size=9),
                      sse(_gemini_text(["never"])))
    events, error = await collect(make(GEMINI_WIRE, fault_server))
    assert text_of(events) == "First Second "
    assert error.kind == "server" and not error.retryable
    assert "overloaded" in str(error)
    assert len(fault_server.requests) == 1
