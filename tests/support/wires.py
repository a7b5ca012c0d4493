"""The Anthropic wire format for the shared fault tests (see test_provider_faults)."""

from __future__ import annotations

import json

from fault_server import WireFormat
from nbagent.providers.anthropic import AnthropicProvider


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

WIRE = ANTHROPIC_WIRE
