"""Providers against a real misbehaving HTTP server: retries, cuts, stalls, garbage.

The faults every provider shares (rate limits, 5xx, auth, cut connections,
garbage, empty bodies, HTML pages, stalls) run once per wire format in
``support.wires.WIRES`` (OpenAI, Anthropic, Gemini, OpenAI Responses); another
provider joins by adding its ``WireFormat`` there. Below them, each wire format's own in-band errors and headers, then the
error-envelope parsing.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from email.utils import formatdate

import pytest

from nbagent.core.errors import NbagentError
from nbagent.providers.base import Finish, Retrying, ToolCallEnd, ToolCallStart
from nbagent.providers.http import error_from_payload, retry_after_from_headers
from support.fault_server import (
    FaultServer,
    collect,
    drop_after,
    empty_200,
    reply,
    request_for,
    silent,
    sse,
    stall_after,
    text_of,
)
from support.wires import (
    ANTHROPIC_WIRE,
    GEMINI_WIRE,
    OPENAI_WIRE,
    WIRES,
    WireFormat,
    anthropic_error,
    anthropic_event,
    anthropic_prefix,
    anthropic_text,
    RESPONSES_WIRE,
    gemini_prefix,
    gemini_text,
    openai_error,
    openai_text,
    responses_event,
    responses_prefix,
    responses_text,
)

KEY = "sk-fault-test-key-0123456789abcdef"  # every wire, in the shared faults
ANTHROPIC_KEY = "sk-ant-fault-key-0123456789abcdef"
GEMINI_KEY = "AIzaSyFAULT-key-0123456789abcdefghij"
KEYS = {"anthropic": ANTHROPIC_KEY, "gemini": GEMINI_KEY, "openai-responses": KEY}

wire_param = pytest.mark.parametrize("wire", WIRES, ids=[w.name for w in WIRES])


# --- helpers -------------------------------------------------------------------------


def make(wire: WireFormat, server: FaultServer, **kwargs):
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("retry_base_delay", 0.01)
    kwargs.setdefault("read_timeout", 5.0)
    return wire.make_provider(server.url, **kwargs)


def make_with_own_key(wire: WireFormat, server: FaultServer, **kwargs):
    """``make`` with the wire's own key shape (``KEYS``), for one wire's own faults."""
    return make(wire, server, api_key=KEYS[wire.name], **kwargs)


def assert_key_hidden(wire: WireFormat, error: NbagentError, provider) -> None:
    for text in (str(error), repr(error), error.message, repr(provider)):
        assert KEYS[wire.name] not in text


# --- the faults ----------------------------------------------------------------------


@wire_param
async def test_rate_limited_then_success(wire, fault_server):
    fault_server.push(
        reply(429, wire.error_body(429, "Rate limit reached, retry shortly"), {"retry-after-ms": "20"}),
        sse(wire.text_body(["Hello", " world"])),
    )
    events, error = await collect(make(wire, fault_server))
    assert error is None
    assert text_of(events) == "Hello world"
    assert isinstance(events[-1], Finish)
    assert len(fault_server.requests) == 2


@wire_param
async def test_server_error_twice_then_success(wire, fault_server):
    fault_server.push(
        reply(500, wire.error_body(500, "The server had an error")),
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


async def batches_of(provider) -> list:
    """Every batch of one call through ``stream_batches`` (the loop's path), flattened."""
    events = []
    try:
        async for batch in provider.stream_batches(request_for(provider)):
            events += batch
    finally:
        await provider.aclose()
    return events


@wire_param
async def test_each_retry_is_announced_before_its_wait_and_the_answer_follows(wire, fault_server):
    fault_server.push(reply(503, wire.error_body(503, "Service temporarily unavailable")),
                      silent(0.0), sse(wire.text_body(["back"])))  # 503, then a hang-up before any reply
    events = await batches_of(make(wire, fault_server, max_retries=2))
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [(r.attempt, r.attempts) for r in retries] == [(2, 3), (3, 3)]
    assert "503" in retries[0].reason or "unavailable" in retries[0].reason.lower()
    assert retries[1].reason.startswith("could not reach 127.0.0.1")  # the server that hung up, named
    assert retries[1].notice.endswith("retrying in " + f"{retries[1].wait_s:.2g}" + " s, 3 of 3")
    assert all(r.host.startswith("127.0.0.1") for r in retries)
    assert events.index(retries[1]) < min(i for i, e in enumerate(events) if not isinstance(e, Retrying))
    assert text_of(events) == "back" and isinstance(events[-1], Finish)


async def test_the_flat_stream_leaves_the_retry_notices_out(fault_server):
    fault_server.push(reply(503, OPENAI_WIRE.error_body(503, "busy")), sse(OPENAI_WIRE.text_body(["ok"])))
    events, error = await collect(make(OPENAI_WIRE, fault_server))
    assert error is None and text_of(events) == "ok"
    assert not any(isinstance(e, Retrying) for e in events) and len(fault_server.requests) == 2


@wire_param
async def test_auth_error_is_not_retried_and_hides_the_key(wire, fault_server):
    fault_server.push(reply(401, wire.error_body(401, f"Incorrect API key provided: {KEY}")))
    provider = make(wire, fault_server)
    events, error = await collect(provider)
    assert (error.kind, error.retryable, error.http_code) == ("auth", False, 401)
    assert len(fault_server.requests) == 1
    for text in (str(error), repr(error), error.message, repr(provider)):
        assert KEY not in text
    assert "Incorrect API key provided" in str(error)


@wire_param
async def test_disconnect_mid_text(wire, fault_server):
    fault_server.push(drop_after(wire.text_prefix(["Hel", "lo"])), sse(wire.text_body(["never"])))
    events, error = await collect(make(wire, fault_server))
    assert text_of(events) == "Hello"  # the partial text was yielded first
    assert error.kind == "network" and not error.retryable
    assert len(fault_server.requests) == 1  # output had started: no retry


@wire_param
async def test_disconnect_mid_tool_arguments(wire, fault_server):
    fault_server.push(drop_after(wire.tool_args_prefix()), sse(wire.text_body(["never"])))
    events, error = await collect(make(wire, fault_server))
    assert error.kind == "network"
    assert any(isinstance(e, ToolCallStart) for e in events)
    assert not any(isinstance(e, Finish) for e in events)
    if wire.name != "gemini":  # Gemini sends a call whole; the others' arguments were cut
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
    assert events == []
    assert error.kind in ("protocol", "network")
    assert "empty" in error.message
    assert len(fault_server.requests) == 1


@wire_param
async def test_html_page_with_status_200_is_a_protocol_error_naming_its_type(wire, fault_server):
    page = b"<!DOCTYPE html><html><head><title>Sign in | Corporate Proxy</title></head><body>...</body></html>"
    fault_server.push(reply(200, page, {"Content-Type": "text/html; charset=utf-8"}), sse(wire.text_body(["never"])))
    events, error = await collect(make(wire, fault_server))
    assert events == []
    assert error.kind == "protocol" and not error.retryable
    assert "text/html" in error.message and "Corporate Proxy" in error.message
    assert "connection" not in error.message and "incomplete" not in error.message
    assert len(fault_server.requests) == 1


@wire_param
async def test_stalled_stream_times_out(wire, fault_server):
    fault_server.push(stall_after(wire.text_prefix(["slow"]), seconds=10))
    events, error = await collect(make(wire, fault_server, read_timeout=0.5))
    assert text_of(events) == "slow"
    assert error.kind == "timeout"
    assert len(fault_server.requests) == 1


@wire_param
async def test_slow_drip_within_the_read_timeout_succeeds(wire, fault_server):
    fault_server.push(sse(wire.text_body(["drip", " drip"]), chunk_size=40, delay=0.01))
    events, error = await collect(make(wire, fault_server, read_timeout=2.0))
    assert error is None and text_of(events) == "drip drip"


@wire_param
async def test_connection_refused_is_a_network_error(wire):
    with socket.socket() as s:  # bound, never listening: refused, and no other server can take the port meanwhile
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        provider = wire.make_provider(f"http://127.0.0.1:{port}", api_key=KEY, retry_base_delay=0.0)
        events, error = await collect(provider)
    assert events == [] and error.kind == "network"
    assert "3 attempts" in error.message


@wire_param
def test_one_provider_across_event_loops(wire, fault_server):
    fault_server.push(sse(wire.text_body(["one"])), sse(wire.text_body(["two"])))
    provider = make(wire, fault_server)

    async def turn():
        return text_of([e async for e in provider.stream(request_for(provider))])

    assert asyncio.run(turn()) == "one"
    assert asyncio.run(turn()) == "two"  # a new loop gets a new pooled client
    asyncio.run(provider.aclose())


# --- OpenAI specifics --------------------------------------------------------------------


async def test_exhausted_quota_is_not_retried(fault_server):
    body = {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                      "code": "insufficient_quota"}}
    fault_server.push(reply(429, body), sse(openai_text(["never"])))
    events, error = await collect(make(OPENAI_WIRE, fault_server))
    assert (error.kind, error.retryable) == ("rate_limit", False)
    assert len(fault_server.requests) == 1


async def test_request_reaches_the_server_intact(fault_server):
    fault_server.push(sse(openai_text(["hi"])))
    await collect(make(OPENAI_WIRE, fault_server))
    (req,) = fault_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.json["messages"] == [{"role": "user", "content": "hi"}]


async def test_long_retry_after_is_capped(fault_server):
    fault_server.push(reply(429, openai_error(429, "wait an hour"), {"retry-after": "3600"}),
                      sse(openai_text(["done"])))
    provider = make(OPENAI_WIRE, fault_server)
    provider.max_retry_after = 0.01
    events, error = await collect(provider)
    assert error is None and text_of(events) == "done"
    assert len(fault_server.requests) == 2


# --- Anthropic specifics ---------------------------------------------------------------


async def test_anthropic_request_reaches_the_server(fault_server):
    fault_server.push(sse(anthropic_text(["hi"])))
    await collect(make_with_own_key(ANTHROPIC_WIRE, fault_server))
    (req,) = fault_server.requests
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == ANTHROPIC_KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert req.json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    ]


async def test_anthropic_overloaded_529_then_success(fault_server):
    fault_server.push(reply(529, anthropic_error(529, "Overloaded")), sse(anthropic_text(["ok"])))
    events, error = await collect(make_with_own_key(ANTHROPIC_WIRE, fault_server))
    assert error is None and text_of(events) == "ok"
    assert len(fault_server.requests) == 2


async def test_anthropic_error_event_mid_stream_is_not_retried(fault_server):
    body = anthropic_prefix(["Par", "tial"]) + anthropic_event(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    fault_server.push(sse(body), sse(anthropic_text(["never"])))
    events, error = await collect(make_with_own_key(ANTHROPIC_WIRE, fault_server))
    assert text_of(events) == "Partial"
    assert (error.kind, error.retryable) == ("server", False)
    assert len(fault_server.requests) == 1


async def test_anthropic_prompt_too_long_is_context_length(fault_server):
    body = anthropic_error(400, "prompt is too long: 250000 tokens > 200000 maximum")
    fault_server.push(reply(400, body))
    events, error = await collect(make_with_own_key(ANTHROPIC_WIRE, fault_server))
    assert (error.kind, error.retryable, error.http_code) == ("context_length", False, 400)


# --- Gemini specifics ---------------------------------------------------------------------


async def test_gemini_key_travels_in_a_header_not_the_url(fault_server):
    fault_server.push(sse(gemini_text(["hi"])))
    await collect(make_with_own_key(GEMINI_WIRE, fault_server))
    (req,) = fault_server.requests
    assert req.path == "/v1beta/models/gemini-fault:streamGenerateContent?alt=sse"
    assert req.headers["x-goog-api-key"] == GEMINI_KEY
    assert GEMINI_KEY not in req.path
    assert req.json["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


async def test_gemini_retry_delay_from_the_body_then_success(fault_server):
    body = json.dumps({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED",
                                 "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                              "retryDelay": "0.05s"}]}}).encode()
    fault_server.push(reply(429, body), sse(gemini_text(["ok"])))
    events, error = await collect(make_with_own_key(GEMINI_WIRE, fault_server))
    assert error is None and text_of(events) == "ok"
    assert len(fault_server.requests) == 2


async def test_gemini_invalid_key_400_is_auth_and_not_retried(fault_server):
    body = json.dumps({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                 "status": "INVALID_ARGUMENT",
                                 "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                              "reason": "API_KEY_INVALID"},
                                             {"@type": "type.googleapis.com/google.rpc.DebugInfo",
                                              "detail": f"Invalid API key: {GEMINI_KEY}"}]}}, indent=2)
    fault_server.push(reply(400, body), sse(gemini_text(["never"])))
    provider = make_with_own_key(GEMINI_WIRE, fault_server)
    events, error = await collect(provider)
    assert (error.kind, error.retryable, error.http_code) == ("auth", False, 400)
    assert len(fault_server.requests) == 1
    assert_key_hidden(GEMINI_WIRE, error, provider)


async def test_gemini_raw_json_error_mid_stream(fault_server):
    error_json = b'{\n  "error": {\n    "code": 503,\n    "message": "The model is overloaded.",\n' \
                 b'    "status": "UNAVAILABLE"\n  }\n}\n'
    fault_server.push(sse(gemini_prefix(["First ", "Second "]) + error_json, chunk_size=9),
                      sse(gemini_text(["never"])))
    events, error = await collect(make_with_own_key(GEMINI_WIRE, fault_server))
    assert text_of(events) == "First Second "
    assert error.kind == "server" and not error.retryable
    assert "overloaded" in str(error)
    assert len(fault_server.requests) == 1


GEMINI_CANCEL = b'data: {"error": {"code": 499, "message": "The operation was cancelled.", "status": "CANCELLED"}}\r\n\r\n'


async def test_gemini_server_side_cancel_before_any_output_is_retried(fault_server):
    fault_server.push(sse(GEMINI_CANCEL), sse(gemini_text(["ok"])))
    events, error = await collect(make_with_own_key(GEMINI_WIRE, fault_server))
    assert error is None and text_of(events) == "ok"
    assert len(fault_server.requests) == 2


async def test_gemini_server_side_cancel_after_output_is_a_clear_error(fault_server):
    fault_server.push(sse(gemini_prefix(["Half "]) + GEMINI_CANCEL), sse(gemini_text(["never"])))
    events, error = await collect(make_with_own_key(GEMINI_WIRE, fault_server))
    assert text_of(events) == "Half "
    assert (error.kind, error.retryable) == ("server", False)
    assert "cancelled the request on its side (499 CANCELLED) after part of the reply" in error.message
    assert len(fault_server.requests) == 1


async def test_gemini_cancel_before_output_gives_up_after_the_retries(fault_server):
    fault_server.push(*[sse(GEMINI_CANCEL) for _ in range(2)])
    events, error = await collect(make_with_own_key(GEMINI_WIRE, fault_server, max_retries=1))
    assert (error.kind, error.retryable) == ("server", True)
    assert "before any output" in error.message and "2 attempts" in error.message


# --- OpenAI Responses specifics -------------------------------------------------------------


RESPONSES_ERROR = {"type": "error", "code": "server_error", "message": "The server had an error", "param": None}


async def test_responses_error_event_before_output_is_retried(fault_server):
    created = responses_event({"type": "response.created", "response": {"id": "r", "model": "gpt-fault"}})
    fault_server.push(sse(created + responses_event(RESPONSES_ERROR)), sse(responses_text(["fine"])))
    events, error = await collect(make(RESPONSES_WIRE, fault_server))
    assert error is None and text_of(events) == "fine"
    assert len(fault_server.requests) == 2


async def test_responses_error_event_after_output_keeps_the_text(fault_server):
    fault_server.push(sse(responses_prefix(["Par", "tial"]) + responses_event(RESPONSES_ERROR)),
                      sse(responses_text(["never"])))
    events, error = await collect(make(RESPONSES_WIRE, fault_server))
    assert text_of(events) == "Partial"
    assert (error.kind, error.retryable) == ("server", False) and "The server had an error" in error.message
    assert len(fault_server.requests) == 1


async def test_responses_request_reaches_the_server(fault_server):
    fault_server.push(sse(responses_text(["hi"])))
    await collect(make(RESPONSES_WIRE, fault_server))
    (req,) = fault_server.requests
    assert req.path == "/v1/responses" and req.headers["authorization"] == f"Bearer {KEY}"
    assert req.json["input"] == [{"role": "user", "content": "hi"}]
    assert req.json["store"] is False and req.json["stream"] is True


# --- error envelopes and retry headers ---------------------------------------------------


def test_retry_after_header_parsing():
    assert retry_after_from_headers({"retry-after": "7"}) == 7.0
    assert retry_after_from_headers({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    later = retry_after_from_headers({"retry-after": formatdate(time.time() + 30, usegmt=True)})
    assert 20 < later <= 31
    assert retry_after_from_headers({"retry-after": "soon"}) is None
    assert retry_after_from_headers({}) is None


@pytest.mark.parametrize(
    "payload,status,kind,retryable,retry_after",
    [
        # Gemini per-minute quota with RetryInfo: retry after the given delay
        ({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
             "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "31s"}]}},
         429, "rate_limit", True, 31.0),
        # ... a daily quota is final
        ({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
             "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}},
         429, "rate_limit", False, None),
        # Gemini reports a bad key as 400 INVALID_ARGUMENT + API_KEY_INVALID
        ({"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "API key not valid.",
                    "details": [{"reason": "API_KEY_INVALID"}]}}, 400, "auth", False, None),
        # Anthropic's in-band overloaded error on a 200 stream
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
         None, "server", True, None),
        ({"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}},
         400, "context_length", False, None),
        ({"error": "model 'x' not found"}, 404, "invalid_request", False, None),
    ],
)
def test_error_envelopes(payload, status, kind, retryable, retry_after):
    error = error_from_payload(payload, status=status, provider="test")
    assert (error.kind, error.retryable, error.retry_after) == (kind, retryable, retry_after)
