"""Anthropic Messages API (``POST /v1/messages``, streamed).

Request: the system prompt, the messages, tools, ``max_tokens`` (required by
the API; 4096 unless the request says otherwise), temperature and any
``request.extra`` fields merged into the body last (e.g. ``{"thinking":
{"type": "enabled", "budget_tokens": 2048}}``; with thinking on,
``max_tokens`` is raised above the budget and temperature is left out, as
the API demands).

Replay: thinking blocks go back byte-identical with their ``signature``
(``ThinkingPart.provider_details["signature"]``), redacted thinking with its
``data`` (``provider_details["redacted_data"]``); thinking without a
signature (e.g. from another provider) is dropped. Tool results of one turn
are sent first in one user message.

Server-side blocks (``server_tool_use``, ``*_tool_result``, ``compaction``
and other unknown block types) are *not* client tool calls: they are kept on
the message as an empty ``TextPart`` whose ``provider_details
["anthropic_block"]`` holds the block (input / content completed from the
deltas), and sent back unchanged, so ``pause_turn`` and code execution keep
their context. Citations deltas are ignored (the cited text stays).

Structured output (``request.response_format``, a JSON schema) uses a tool
named ``structured_output`` whose input schema is the requested schema
(wrapped in ``{"value": ...}`` when it is not an object). The call is forced
(``tool_choice`` ``tool``, or ``any`` alongside other tools, ``auto`` plus an
instruction when thinking is on, which forbids forcing). Its input becomes
``Finish.structured_output``, is streamed as JSON text and kept as a
``TextPart``; it never becomes a tool call.

Caching (``cache_strategy="auto"``): ``cache_control`` breakpoints on the
system block, the last tool and the last block of the last two user
messages (at most 4, the API's limit); ``"none"`` sends none.

Usage: ``message_start`` usage overwritten by every non-null field of
``message_delta`` usage (output tokens are cumulative, never added).
A redacted thinking block is not shown (no delta). A tool call cut by
``max_tokens`` (no ``content_block_stop``) gets a start but no end event
and is left out of the final message.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..core.errors import NbagentError
from ..core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from ..core.steps import FinishReason, ToolCall, UsageMetadata
from .base import (
    Event,
    Finish,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from .http import HTTPProvider, classify_error, parse_json
from .sse import SSEEvent

__all__ = ["AnthropicProvider", "AnthropicStreamParser", "STRUCTURED_TOOL", "normalize_usage"]

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
STRUCTURED_TOOL = "structured_output"
_EPHEMERAL = {"type": "ephemeral"}

_STOP_REASONS = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
}


class AnthropicProvider(HTTPProvider):
    """Claude models over the Messages API (key: argument or ``ANTHROPIC_API_KEY``)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    context_window = 200_000

    def __init__(self, model: str = "claude-sonnet-4-5", *, api_key: str | None = None, **kwargs: Any):
        super().__init__(model, api_key=api_key or os.environ.get("ANTHROPIC_API_KEY"), **kwargs)

    def build_http_request(self, request: ModelRequest) -> tuple[str, dict, dict]:
        if not self.api_key and self.base_url == self.default_base_url:
            raise NbagentError(
                "no Anthropic API key: pass api_key= or set ANTHROPIC_API_KEY",
                kind="auth",
                provider=self.name,
            )
        headers = {
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return f"{self.base_url}/v1/messages", headers, build_body(request, request.model or self.model)

    def new_parser(self, request: ModelRequest) -> "AnthropicStreamParser":
        spec = _structured_schema(request)
        return AnthropicStreamParser(structured=spec is not None, unwrap=bool(spec and spec[1]))


# --- request -----------------------------------------------------------------


def build_body(request: ModelRequest, model: str | None = None) -> dict:
    """The JSON body of one streaming Messages call."""
    extra = dict(request.extra or {})
    thinking = extra.get("thinking")
    thinking_on = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    cache = request.cache_strategy != "none"

    body: dict[str, Any] = {
        "model": model or request.model,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        "stream": True,
    }
    budget = thinking.get("budget_tokens") if thinking_on else None
    if isinstance(budget, int) and body["max_tokens"] <= budget:
        body["max_tokens"] = budget + DEFAULT_MAX_TOKENS

    system = request.system or ""
    structured = _structured_schema(request)
    tools = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema or _EMPTY}
        for t in request.tools
    ]
    if structured is not None:
        tools.append(
            {
                "name": STRUCTURED_TOOL,
                "description": "Give the final answer as structured data matching the schema.",
                "input_schema": structured[0],
            }
        )
        if thinking_on:  # thinking forbids forcing a tool
            body["tool_choice"] = {"type": "auto"}
            note = f"Give your final answer by calling the {STRUCTURED_TOOL} tool."
            system = f"{system}\n\n{note}" if system else note
        elif request.tools:
            body["tool_choice"] = {"type": "any"}
        else:
            body["tool_choice"] = {"type": "tool", "name": STRUCTURED_TOOL}

    if system:
        if cache:
            body["system"] = [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}]
        else:
            body["system"] = system
    if tools:
        if cache:
            tools[-1] = {**tools[-1], "cache_control": dict(_EPHEMERAL)}
        body["tools"] = tools
    body["messages"] = build_messages(request.messages)
    if cache:
        _mark_user_turns(body["messages"], 2)
    if request.temperature is not None and not thinking_on:
        body["temperature"] = request.temperature
    body.update(extra)
    return body


_EMPTY = {"type": "object", "properties": {}}


def build_messages(messages: list[Message]) -> list[dict]:
    """Wire messages: empty ones dropped, neighbours with one role merged."""
    out: list[dict] = []
    for msg in messages:
        role = "assistant" if msg.role == "assistant" else "user"
        blocks = _assistant_blocks(msg.parts) if role == "assistant" else _user_blocks(msg.parts)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            merged = out[-1]["content"] + blocks
            if role == "user":  # tool results must lead a user message
                merged = _results_first(merged)
            out[-1]["content"] = merged
        else:
            out.append({"role": role, "content": blocks})
    return out


def _results_first(blocks: list[dict]) -> list[dict]:
    return [b for b in blocks if b.get("type") == "tool_result"] + [
        b for b in blocks if b.get("type") != "tool_result"
    ]


def _user_blocks(parts: list) -> list[dict]:
    blocks: list[dict] = []
    for part in parts:
        if isinstance(part, ToolResultPart):
            block = {"type": "tool_result", "tool_use_id": part.tool_use_id, "content": part.content}
            if part.is_error:
                block["is_error"] = True
            blocks.append(block)
        elif isinstance(part, TextPart) and part.text.strip():
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            blocks.append(_image(part))
    return _results_first(blocks)


def _assistant_blocks(parts: list) -> list[dict]:
    blocks: list[dict] = []
    for part in parts:
        details = part.provider_details or {}
        if isinstance(part, ThinkingPart):
            if details.get("redacted_data"):
                blocks.append({"type": "redacted_thinking", "data": details["redacted_data"]})
            elif details.get("signature"):
                blocks.append(
                    {"type": "thinking", "thinking": part.text, "signature": details["signature"]}
                )
        elif isinstance(part, TextPart):
            if isinstance(details.get("anthropic_block"), dict):
                blocks.append(details["anthropic_block"])
            elif part.text.strip():
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolUsePart):
            blocks.append({"type": "tool_use", "id": part.id, "name": part.name, "input": part.args or {}})
        elif isinstance(part, ImagePart):
            blocks.append(_image(part))
    return blocks


def _image(part: ImagePart) -> dict:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
    }


def _mark_user_turns(messages: list[dict], count: int) -> None:
    """Put a cache breakpoint on the last block of the last ``count`` user turns."""
    for msg in reversed(messages):
        if count == 0:
            return
        if msg["role"] != "user" or not msg["content"]:
            continue
        last = msg["content"][-1]
        msg["content"][-1] = {**last, "cache_control": dict(_EPHEMERAL)}
        count -= 1


def _structured_schema(request: ModelRequest) -> tuple[dict, bool] | None:
    """(tool input schema, wrapped?) for ``response_format``, or None."""
    fmt = request.response_format
    if not fmt:
        return None
    schema = fmt.get("schema") if isinstance(fmt.get("schema"), dict) and "type" not in fmt else fmt
    if schema.get("type") == "object":
        return schema, False
    wrapped = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    return wrapped, True


# --- response ----------------------------------------------------------------


def normalize_usage(raw: dict) -> UsageMetadata:
    """Anthropic usage -> UsageMetadata (prompt includes cache reads and writes)."""
    inp = int(raw.get("input_tokens") or 0)
    read = int(raw.get("cache_read_input_tokens") or 0)
    write = int(raw.get("cache_creation_input_tokens") or 0)
    out = int(raw.get("output_tokens") or 0)
    details = raw.get("output_tokens_details") or {}
    thinking = int(details.get("thinking_tokens") or 0) if isinstance(details, dict) else 0
    prompt = inp + read + write
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=max(0, out - thinking),
        total_token_count=prompt + out,
        cached_content_token_count=read,
        thoughts_token_count=thinking,
        cache_write_token_count=write,
    )


class _Block:
    __slots__ = ("type", "text", "signature", "data", "id", "name", "json", "raw", "done")

    def __init__(self, raw: dict) -> None:
        self.type = raw.get("type") or "unknown"
        self.raw = raw
        self.text = str(raw.get("text") or raw.get("thinking") or "")
        self.signature = str(raw.get("signature") or "")
        self.data = str(raw.get("data") or "")
        self.id = str(raw.get("id") or "")
        self.name = str(raw.get("name") or "")
        self.json = ""
        self.done = False


class AnthropicStreamParser:
    """Anthropic SSE events in, nbagent events out (one response body)."""

    def __init__(self, structured: bool = False, unwrap: bool = False) -> None:
        self.structured = structured
        self.unwrap = unwrap  # the schema was wrapped in {"value": ...}
        self.blocks: dict[int, _Block] = {}
        self.usage: dict = {}
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.model = ""
        self.stopped = False
        self.structured_output: Any = None
        self._output_started = False

    def feed(self, sse: SSEEvent) -> list[Event]:
        data = parse_json(sse.data, "anthropic")
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or sse.event
        if kind == "error" or sse.event == "error":
            raise self._stream_error(data)
        handler = getattr(self, "_on_" + str(kind), None)
        return handler(data) if handler else []  # ping and unknown events

    def close(self) -> list[Event]:
        if not self.stopped:
            raise NbagentError(
                "the Anthropic stream ended before message_stop: the reply is incomplete "
                "(connection cut or proxy timeout)",
                kind="network",
                provider="anthropic",
            )
        message = Message("assistant", self._parts())
        reason = _STOP_REASONS.get(self.stop_reason or "", FinishReason.OTHER)
        if reason == FinishReason.TOOL_CALLS and not message.tool_uses:
            reason = FinishReason.STOP  # only the structured-output tool was called
        return [
            Finish(
                reason=reason,
                raw_reason=self.stop_reason,
                message=message,
                structured_output=self.structured_output,
                model=self.model,
            )
        ]

    # -- events -------------------------------------------------------------

    def _on_message_start(self, data: dict) -> list[Event]:
        message = data.get("message") or {}
        self.model = str(message.get("model") or "")
        self.usage = dict(message.get("usage") or {})
        return [self._usage_event()]

    def _on_message_delta(self, data: dict) -> list[Event]:
        delta = data.get("delta") or {}
        if delta.get("stop_reason"):
            self.stop_reason = delta["stop_reason"]
        if delta.get("stop_sequence") is not None:
            self.stop_sequence = delta["stop_sequence"]
        usage = data.get("usage") or {}
        self.usage.update({k: v for k, v in usage.items() if v is not None})
        return [self._usage_event()] if usage else []

    def _on_message_stop(self, data: dict) -> list[Event]:
        self.stopped = True
        return []

    def _on_content_block_start(self, data: dict) -> list[Event]:
        index = int(data.get("index", len(self.blocks)))
        block = _Block(dict(data.get("content_block") or {}))
        self.blocks[index] = block
        if block.type == "text" and block.text:
            self._output_started = True
            return [TextDelta(block.text)]
        if block.type == "thinking" and block.text:
            self._output_started = True
            return [ThinkingDelta(block.text)]
        if block.type == "tool_use" and not self._is_structured(block):
            self._output_started = True
            return [ToolCallStart(key=index, id=block.id, name=block.name)]
        return []

    def _on_content_block_delta(self, data: dict) -> list[Event]:
        index = int(data.get("index", -1))
        block = self.blocks.get(index)
        delta = data.get("delta") or {}
        if block is None:
            return []
        dtype = delta.get("type")
        if dtype == "text_delta":
            text = str(delta.get("text") or "")
            block.text += text
            if text:
                self._output_started = True
                return [TextDelta(text)]
        elif dtype == "thinking_delta":
            text = str(delta.get("thinking") or "")
            block.text += text
            if text:
                self._output_started = True
                return [ThinkingDelta(text)]
        elif dtype == "signature_delta":
            block.signature = str(delta.get("signature") or "")  # assigned, not appended
        elif dtype == "input_json_delta":
            fragment = str(delta.get("partial_json") or "")
            block.json += fragment
            if block.type == "tool_use" and fragment and not self._is_structured(block):
                return [ToolCallDelta(key=index, args_delta=fragment)]
        elif dtype == "compaction_delta":
            block.text += str(delta.get("content") or "")
        return []  # citations_delta and unknown deltas

    def _on_content_block_stop(self, data: dict) -> list[Event]:
        index = int(data.get("index", -1))
        block = self.blocks.get(index)
        if block is None:
            return []
        block.done = True
        if block.type != "tool_use":
            return []
        args = _parse_args(block.json, block.raw.get("input"))
        if self._is_structured(block):
            value = args.get("value") if self.unwrap else args
            self.structured_output = value
            block.text = json.dumps(value, ensure_ascii=False)
            self._output_started = True
            return [TextDelta(block.text)]
        return [ToolCallEnd(key=index, call=ToolCall(block.id, block.name, args))]

    # -- helpers ------------------------------------------------------------

    def _is_structured(self, block: _Block) -> bool:
        return self.structured and block.name == STRUCTURED_TOOL

    def _usage_event(self) -> Usage:
        return Usage(
            usage=normalize_usage(self.usage),
            raw=dict(self.usage),
        )

    def _stream_error(self, data: dict) -> NbagentError:
        err = data.get("error") if isinstance(data.get("error"), dict) else {}
        etype = str(err.get("type") or "error")
        message = str(err.get("message") or etype)
        error = classify_error(None, f"Anthropic stream error ({etype}): {message}",
                               codes=[etype], provider="anthropic")
        if self._output_started:  # a partial reply was shown: do not retry it
            error.retryable = False
        return error

    def _parts(self) -> list:
        parts: list = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.type == "text":
                parts.append(TextPart(block.text))
            elif block.type == "thinking":
                details = {"signature": block.signature} if block.signature else {}
                parts.append(ThinkingPart(block.text, provider_details=details))
            elif block.type == "redacted_thinking":
                parts.append(ThinkingPart("", provider_details={"redacted_data": block.data}))
            elif block.type == "tool_use":
                if not block.done:
                    continue  # cut by max_tokens: cannot be run or replayed
                if self._is_structured(block):
                    parts.append(TextPart(block.text))
                else:
                    args = _parse_args(block.json, block.raw.get("input"))
                    parts.append(ToolUsePart(block.id, block.name, args))
            elif block.done:
                parts.append(TextPart("", provider_details={"anthropic_block": _opaque(block)}))
        return parts


def _parse_args(text: str, start_input: Any) -> dict:
    """Accumulated ``partial_json`` -> dict.

    "" means the start block's input (``{}``); JSON that is not an object
    becomes ``{"_raw": text}`` (as in the OpenAI provider) so the tool
    complains to the model instead of the turn failing.
    """
    if not text.strip():
        return dict(start_input) if isinstance(start_input, dict) else {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"_raw": text}


def _opaque(block: _Block) -> dict:
    """A server-side block as the API wants it back."""
    raw = dict(block.raw)
    if block.json.strip():
        try:
            raw["input"] = json.loads(block.json)
        except ValueError:
            pass
    if block.type == "compaction" and block.text:
        raw["content"] = block.text
    return raw
