"""Anthropic Messages stream events in, nbagent events out (the response half of the wire).

Usage: ``message_start`` usage overwritten by every non-null field of
``message_delta`` usage (output tokens are cumulative, never added). A
redacted thinking block is not shown (no delta). A tool call cut by
``max_tokens`` (no ``content_block_stop``) gets a start but no end event, is
left out of the final message and is reported in ``Finish.cut_tool_calls``
with its partial JSON.

Server-side blocks (``server_tool_use``, ``*_tool_result``, ``compaction``
and other unknown block types) are *not* client tool calls: they are kept on
the message as an empty ``TextPart`` whose ``provider_details
["anthropic_block"]`` holds the block (input / content completed from the
deltas). Citations deltas are ignored (the cited text stays). The
structured-output tool's input becomes ``Finish.structured_output``, is
streamed as JSON text and kept as a ``TextPart``; it never becomes a tool call.
"""

from __future__ import annotations

import json
from typing import Any

from ...core.errors import NbagentError, NetworkError
from ...core.messages import Message, TextPart, ThinkingPart, ToolUsePart
from ...core.steps import CutToolCall, ToolCall
from ..base import (Event, Finish, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage,
                   parse_tool_arguments)
from ..http_errors import classify_error
from ..sse import SSEEvent
from ..stream_json import UNDECODED, parse_json
from .finish import finish_reason
from .spec import SPEC

STRUCTURED_TOOL = "structured_output"  # the tool that carries structured output


class _Block:
    __slots__ = ("type", "pieces", "signature", "data", "id", "name", "json_pieces", "raw", "done")

    def __init__(self, raw: dict) -> None:
        self.type = raw.get("type") or "unknown"
        self.raw = raw
        self.pieces = [str(raw.get("text") or raw.get("thinking") or "")]  # joined once, when read
        self.signature = str(raw.get("signature") or "")
        self.data = str(raw.get("data") or "")
        self.id = str(raw.get("id") or "")
        self.name = str(raw.get("name") or "")
        self.json_pieces: list[str] = []  # the tool input's JSON text, joined once when read
        self.done = False

    @property
    def json(self) -> str:
        if len(self.json_pieces) > 1:
            self.json_pieces = ["".join(self.json_pieces)]
        return self.json_pieces[0] if self.json_pieces else ""

    @property
    def text(self) -> str:
        if len(self.pieces) > 1:
            self.pieces = ["".join(self.pieces)]
        return self.pieces[0]

    @text.setter
    def text(self, value: str) -> None:
        self.pieces = [value]


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

    def feed(self, sse: SSEEvent, payload: Any = UNDECODED) -> list[Event]:
        data = parse_json(sse.data, "anthropic") if payload is UNDECODED else payload
        if not isinstance(data, dict):
            return []
        kind = data.get("type") or sse.event
        if kind == "error" or sse.event == "error":
            raise self._stream_error(data)
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        return handler(self, data) if handler else []  # ping and unknown events

    def close(self) -> list[Event]:
        if not self.stopped:
            raise NetworkError(
                "the Anthropic stream ended before message_stop: the reply is incomplete "
                "(connection cut or proxy timeout)",
                provider="anthropic",
            )
        message = Message("assistant", self._parts())
        reason = finish_reason(self.stop_reason, called_tools=bool(message.tool_uses))
        return [
            Finish(
                reason=reason,
                raw_reason=self.stop_reason,
                message=message,
                structured_output=self.structured_output,
                model=self.model,
                cut_tool_calls=[CutToolCall(b.id, b.name, b.json) for _, b in sorted(self.blocks.items())
                                if b.type == "tool_use" and not b.done and not self._is_structured(b)],
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
        index = data.get("index", -1)
        block = self.blocks.get(index if type(index) is int else int(index))
        delta = data.get("delta") or {}
        if block is None:
            return []
        dtype = delta.get("type")
        if dtype == "text_delta":
            text = delta.get("text") or ""
            if type(text) is not str:
                text = str(text)
            block.pieces.append(text)
            if text:
                self._output_started = True
                return [TextDelta(text)]
        elif dtype == "thinking_delta":
            text = str(delta.get("thinking") or "")
            block.pieces.append(text)
            if text:
                self._output_started = True
                return [ThinkingDelta(text)]
        elif dtype == "signature_delta":
            block.signature = str(delta.get("signature") or "")  # assigned, not appended
        elif dtype == "input_json_delta":
            fragment = str(delta.get("partial_json") or "")
            block.json_pieces.append(fragment)
            if block.type == "tool_use" and fragment and not self._is_structured(block):
                return [ToolCallDelta(key=index, args_delta=fragment)]
        elif dtype == "compaction_delta":
            block.pieces.append(str(delta.get("content") or ""))
        return []  # citations_delta and unknown deltas

    def _on_content_block_stop(self, data: dict) -> list[Event]:
        index = int(data.get("index", -1))
        block = self.blocks.get(index)
        if block is None:
            return []
        block.done = True
        if block.type != "tool_use":
            return []
        args = parse_tool_arguments(block.json, _start_input(block))
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
            usage=SPEC.read_usage(self.usage),
            raw=dict(self.usage),
        )

    def _stream_error(self, data: dict) -> NbagentError:
        error_body = data.get("error")
        err = error_body if isinstance(error_body, dict) else {}
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
                    args = parse_tool_arguments(block.json, _start_input(block))
                    parts.append(ToolUsePart(block.id, block.name, args))
            elif block.done:
                parts.append(TextPart("", provider_details={"anthropic_block": _opaque(block)}))
        return parts


def _start_input(block: _Block) -> dict | None:
    """The input a ``tool_use`` block started with (used when no ``partial_json`` followed)."""
    start = block.raw.get("input")
    return start if isinstance(start, dict) else None


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


_HANDLERS = {name[4:]: fn for name, fn in vars(AnthropicStreamParser).items() if name.startswith("_on_")}
