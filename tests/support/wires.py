"""Each provider's wire format for the fault tests (tests/providers/test_http_faults.py).

OpenAI Chat Completions, Anthropic Messages, Gemini and the OpenAI Responses API.

A ``WireFormat`` says how to build a provider against the fault server and
how its streamed answers and error envelopes look as raw bytes. Every test
of the shared faults runs once per wire in ``WIRES``; another provider joins
by adding its ``WireFormat`` there. The body builders are public so a test
can script a wire's own faults with them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from nbagent.providers.anthropic import AnthropicProvider
from nbagent.providers.gemini import GeminiProvider
from nbagent.providers.openai_chat import OpenAIProvider
from nbagent.providers.openai_responses import OpenAIResponsesProvider


@dataclass
class WireFormat:
    """How one provider's wire format looks, for the shared fault tests.

    ``make_provider(base_url, **kwargs)`` builds a provider talking to the
    fault server (kwargs: api_key, read_timeout, max_retries,
    retry_base_delay). The body builders return raw response bytes.
    """

    name: str
    make_provider: Callable[..., Any]
    text_body: Callable[[list[str]], bytes]  # a complete answer made of these text deltas
    text_prefix: Callable[[list[str]], bytes]  # started, these deltas sent, not finished
    tool_args_prefix: Callable[[], bytes]  # a tool call cut inside its arguments
    garbage_body: Callable[[], bytes]  # some text, then a payload that is not JSON
    error_body: Callable[[int, str], bytes]  # the provider's error envelope


# --- OpenAI Chat Completions ------------------------------------------------------------


def _data(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    return _data({"model": "gpt-fault", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def openai_prefix(pieces: list[str]) -> bytes:
    return _chunk({"role": "assistant", "content": ""}) + b"".join(_chunk({"content": p}) for p in pieces)


def openai_text(pieces: list[str]) -> bytes:
    usage = {"prompt_tokens": 5, "completion_tokens": len(pieces), "total_tokens": 5 + len(pieces)}
    return (
        openai_prefix(pieces)
        + _chunk({}, "stop")
        + _data({"model": "gpt-fault", "choices": [], "usage": usage})
        + b"data: [DONE]\n\n"
    )


def openai_tool_prefix() -> bytes:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather", "arguments": ""}}
    return (
        _chunk({"role": "assistant", "content": None, "tool_calls": [call]})
        + _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Par'}}]})
    )


def openai_error(status: int, message: str) -> bytes:
    codes = {401: "invalid_api_key", 429: "rate_limit_exceeded"}
    return json.dumps({"error": {"message": message, "type": "error", "code": codes.get(status)}}).encode()


OPENAI_WIRE = WireFormat(
    name="openai",
    make_provider=lambda base_url, **kw: OpenAIProvider("gpt-fault", base_url=base_url + "/v1", **kw),
    text_body=openai_text,
    text_prefix=openai_prefix,
    tool_args_prefix=openai_tool_prefix,
    garbage_body=lambda: openai_prefix(["ok"]) + b"data: <html>502 Bad Gateway</html>\n\n",
    error_body=openai_error,
)


# --- Anthropic Messages -----------------------------------------------------------------


def anthropic_event(obj: dict) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


def anthropic_prefix(pieces: list[str]) -> bytes:
    start = {"type": "message_start",
             "message": {"model": "claude-fault", "usage": {"input_tokens": 5, "output_tokens": 1}}}
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    deltas = [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
              for p in pieces]
    return b"".join(anthropic_event(e) for e in [start, {"type": "ping"}, block, *deltas])


def anthropic_text(pieces: list[str]) -> bytes:
    tail = [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    ]
    return anthropic_prefix(pieces) + b"".join(anthropic_event(e) for e in tail)


def anthropic_tool_prefix() -> bytes:
    start = {"type": "message_start", "message": {"model": "claude-fault", "usage": {"input_tokens": 5}}}
    block = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}}
    delta = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": '{"city": "Par'}}
    return b"".join(anthropic_event(e) for e in [start, block, delta])


def anthropic_error(status: int, message: str) -> bytes:
    types = {401: "authentication_error", 429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}
    return json.dumps({"type": "error", "error": {"type": types.get(status, "invalid_request_error"),
                                                  "message": message}}).encode()


ANTHROPIC_WIRE = WireFormat(
    name="anthropic",
    make_provider=lambda base_url, **kw: AnthropicProvider("claude-fault", base_url=base_url, **kw),
    text_body=anthropic_text,
    text_prefix=anthropic_prefix,
    tool_args_prefix=anthropic_tool_prefix,
    garbage_body=lambda: anthropic_prefix(["ok"]) + b"event: content_block_delta\ndata: <html>502</html>\n\n",
    error_body=anthropic_error,
)


# --- Gemini streamGenerateContent -------------------------------------------------------


def _gdata(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\r\n\r\n"


def _gemini_chunk(text: str, finish: str | None = None) -> bytes:
    candidate: dict = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}
    return _gdata({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-fault"})


def gemini_prefix(pieces: list[str]) -> bytes:
    return b"".join(_gemini_chunk(p) for p in pieces)


def gemini_text(pieces: list[str]) -> bytes:
    return gemini_prefix(pieces) + _gemini_chunk("", "STOP")


def gemini_tool_prefix() -> bytes:
    # Gemini sends a call whole; a cut after it (no finishReason) is still incomplete.
    part = {"functionCall": {"name": "weather", "args": {"city": "Paris"}}}
    return _gdata({"candidates": [{"content": {"parts": [part], "role": "model"}}]})


def gemini_error(status: int, message: str) -> bytes:
    statuses = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
    return json.dumps({"error": {"code": status, "message": message,
                                 "status": statuses.get(status, "INVALID_ARGUMENT")}}, indent=2).encode()


GEMINI_WIRE = WireFormat(
    name="gemini",
    make_provider=lambda base_url, **kw: GeminiProvider("gemini-fault", base_url=base_url + "/v1beta", **kw),
    text_body=gemini_text,
    text_prefix=gemini_prefix,
    tool_args_prefix=gemini_tool_prefix,
    garbage_body=lambda: gemini_prefix(["ok"]) + b"data: <html>502 Bad Gateway</html>\r\n\r\n",
    error_body=gemini_error,
)


# --- OpenAI Responses ----------------------------------------------------------------


def responses_event(obj: dict) -> bytes:
    return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()


def responses_prefix(pieces: list[str], item_id: str = "msg_1") -> bytes:
    created = {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-fault", "status": "in_progress"}}
    added = {"type": "response.output_item.added", "output_index": 0,
             "item": {"id": item_id, "type": "message", "role": "assistant", "content": []}}
    deltas = [{"type": "response.output_text.delta", "item_id": item_id, "output_index": 0, "content_index": 0,
               "delta": p} for p in pieces]
    return b"".join(responses_event(e) for e in [created, added, *deltas])


def responses_completed(output: list[dict], usage: dict | None = None, status: str = "completed",
                        incomplete: str | None = None) -> bytes:
    usage = usage or {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 7}
    response = {"id": "resp_1", "model": "gpt-fault", "status": status, "output": output, "usage": usage,
                "incomplete_details": {"reason": incomplete} if incomplete else None}
    return responses_event({"type": f"response.{status}", "response": response})


def responses_text(pieces: list[str]) -> bytes:
    item = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "".join(pieces), "annotations": []}]}
    done = {"type": "response.output_item.done", "output_index": 0, "item": item}
    return responses_prefix(pieces) + responses_event(done) + responses_completed([item])


def responses_tool_prefix() -> bytes:
    item = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "weather", "arguments": ""}
    events = [{"type": "response.created", "response": {"id": "resp_1", "model": "gpt-fault"}},
              {"type": "response.output_item.added", "output_index": 0, "item": item},
              {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0,
               "delta": '{"city": "Par'}]
    return b"".join(responses_event(e) for e in events)


RESPONSES_WIRE = WireFormat(
    name="openai-responses",
    make_provider=lambda base_url, **kw: OpenAIResponsesProvider("gpt-fault", base_url=base_url + "/v1", **kw),
    text_body=responses_text,
    text_prefix=responses_prefix,
    tool_args_prefix=responses_tool_prefix,
    garbage_body=lambda: responses_prefix(["ok"]) + b"event: response.output_text.delta\ndata: <html>502</html>\n\n",
    error_body=openai_error,
)


WIRES = [OPENAI_WIRE, ANTHROPIC_WIRE, GEMINI_WIRE, RESPONSES_WIRE]
