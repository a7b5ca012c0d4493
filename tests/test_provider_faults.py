"""Providers against a real misbehaving HTTP server: retries, cuts, stalls, garbage.

Every test runs for each wire format in ``WIRES``: OpenAI's is defined here;
another provider joins by adding a module ``tests/fault_wire_<name>.py``
that defines ``WIRE = WireFormat(...)`` (see fault_server.WireFormat).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import socket
import time
from email.utils import formatdate
from pathlib import Path

import pytest

from fault_server import (
    FaultServer,
    WireFormat,
    collect,
    request_for,
    text_of,
    drop_after,
    empty_200,
    fault_server,  # noqa: F401 - pytest fixture
    reply,
    sse,
    stall_after,
)
from nbagent.providers.base import Finish, ToolCallEnd, ToolCallStart
from nbagent.providers.http import error_from_payload, retry_after_from_headers
from nbagent.providers.openai import OpenAIProvider

KEY = "sk-fault-test-key-0123456789abcdef"

# --- the OpenAI wire format --------------------------------------------------------


def _data(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    return _data({"model": "gpt-fault", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _openai_prefix(pieces: list[str]) -> bytes:
    return _chunk({"role": "assistant", "content": ""}) + b"".join(_chunk({"content": p}) for p in pieces)


def _openai_text(pieces: list[str]) -> bytes:
    usage = {"prompt_tokens": 5, "completion_tokens": len(pieces), "total_tokens": 5 + len(pieces)}
    return (
        _openai_prefix(pieces)
        + _chunk({}, "stop")
        + _data({"model": "gpt-fault", "choices": [], "usage": usage})
        + b"data: [DONE]\n\n"
    )


def _openai_tool_prefix() -> bytes:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather", "arguments": ""}}
    return (
        _chunk({"role": "assistant", "content": None, "tool_calls": [call]})
        + _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Par'}}]})
    )


def _openai_error(status: int, message: str) -> bytes:
    codes = {401: "invalid_api_key", 429: "rate_limit_exceeded"}
    return json.dumps({"error": {"message": message, "type": "error", "code": codes.get(status)}}).encode()


OPENAI_WIRE = WireFormat(
    name="openai",
    make_provider=lambda base_url, **kw: OpenAIProvider("gpt-fault", base_url=base_url + "/v1", **kw),
    text_body=_openai_text,
    text_prefix=_openai_prefix,
    tool_args_prefix=_openai_tool_prefix,
    garbage_body=lambda: _openai_prefix(["ok"]) + b"data: <html>502 Bad Gateway</html>\n\n",
    error_body=_openai_error,
)


def _discover_wires() -> list[WireFormat]:
    wires = [OPENAI_WIRE]
    for path in sorted(Path(__file__).parent.glob("fault_wire_*.py")):
        wires.append(importlib.import_module(path.stem).WIRE)
    return wires


WIRES = _discover_wires()
wire_param = pytest.mark.parametrize("wire", WIRES, ids=[w.name for w in WIRES])


# --- helpers -------------------------------------------------------------------------


def make(wire: WireFormat, server: FaultServer, **kwargs):
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("retry_base_delay", 0.01)
    kwargs.setdefault("read_timeout", 5.0)
    return wire.make_provider(server.url, **kwargs)


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
    with socket.socket() as s:  # a port nobody listens on
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
    fault_server.push(reply(429, body), sse(_openai_text(["never"])))
    events, error = await collect(make(OPENAI_WIRE, fault_server))
    assert (error.kind, error.retryable) == ("rate_limit", False)
    assert len(fault_server.requests) == 1


async def test_request_reaches_the_server_intact(fault_server):
    fault_server.push(sse(_openai_text(["hi"])))
    await collect(make(OPENAI_WIRE, fault_server))
    (req,) = fault_server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.json["messages"] == [{"role": "user", "content": "hi"}]


def test_retry_after_header_parsing():
    assert retry_after_from_headers({"retry-after": "7"}) == 7.0
    assert retry_after_from_headers({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    later = retry_after_from_headers({"retry-after": formatdate(time.time() + 30, usegmt=True)})
    assert 20 < later <= 31
    assert retry_after_from_headers({"retry-after": "soon"}) is None
    assert retry_after_from_headers({}) is None



async def test_long_retry_after_is_capped(fault_server):
    fault_server.push(reply(429, _openai_error(429, "wait an hour"), {"retry-after": "3600"}),
                      sse(_openai_text(["done"])))
    provider = make(OPENAI_WIRE, fault_server)
    provider.max_retry_after = 0.01
    events, error = await collect(provider)
    assert error is None and text_of(events) == "done"
    assert len(fault_server.requests) == 2


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
