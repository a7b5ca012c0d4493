"""Anthropic's and Gemini's own faults against a real HTTP server on loopback.

The faults every provider shares (rate limits, 5xx, auth, cut connections,
garbage, empty bodies, stalls) run for these wires in ``test_provider_faults``
through ``fault_wire_anthropic`` / ``fault_wire_gemini``; this file keeps each
wire format's own in-band errors and headers.
"""

from __future__ import annotations

import json

from fault_server import (
    FaultServer,
    WireFormat,
    collect,
    fault_server,  # noqa: F401 - pytest fixture
    reply,
    sse,
    text_of,
)
from nbagent.core.errors import NbagentError

ANTHROPIC_KEY = "sk-ant-fault-key-0123456789abcdef"
GEMINI_KEY = "AIzaSyFAULT-key-0123456789abcdefghij"

from fault_wire_anthropic import ANTHROPIC_WIRE, _anthropic_error, _anthropic_prefix, _anthropic_text, _event  # noqa: E402
from fault_wire_gemini import GEMINI_WIRE, _gemini_prefix, _gemini_text  # noqa: E402



KEYS = {"anthropic": ANTHROPIC_KEY, "gemini": GEMINI_KEY}


# --- helpers -------------------------------------------------------------------------


def make(wire: WireFormat, server: FaultServer, **kwargs):
    kwargs.setdefault("api_key", KEYS[wire.name])
    kwargs.setdefault("retry_base_delay", 0.01)
    kwargs.setdefault("read_timeout", 5.0)
    return wire.make_provider(server.url, **kwargs)


def assert_key_hidden(wire: WireFormat, error: NbagentError, provider) -> None:
    for text in (str(error), repr(error), error.message, repr(provider)):
        assert KEYS[wire.name] not in text


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
