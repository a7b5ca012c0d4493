"""Chat Completions chunks in, nbagent events out (the response half of the wire).

Quirks handled, each covered by a recorded fixture: usage in any chunk
(``choices: []`` chunk, finish chunk, content chunk, ``x_groq.usage``),
``reasoning_content`` / ``reasoning`` deltas, tool-call ids and names repeated
on every delta, ``null`` or empty arguments, missing or repeated finish
reasons, in-band errors on an HTTP 200 stream, ``n > 1`` (only choice 0 is used).

A ``refusal`` streams as ``RefusalDelta`` (not answer text) and ends the call
with ``FinishReason.CONTENT_FILTER``. Tool arguments that are not a JSON object
become ``{"_raw": "<the string received>"}``, so the tool call still reaches
the caller and the model sees the tool's complaint -- except when
``finish_reason`` is ``length``: then the call was cut by the token limit and
is reported in ``Finish.cut_tool_calls`` instead (never run or replayed).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from ...core.errors import NbagentError, NetworkError, ProtocolError
from ...core.messages import Message, TextPart, ThinkingPart, ToolUsePart
from ...core.steps import CutToolCall, ToolCall
from ..base import (
    REFUSAL,
    UNPARSED_ARGUMENTS,
    Event,
    Finish,
    RefusalDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    parse_tool_arguments,
)
from ..http_errors import error_from_payload
from ..sse import SSEEvent
from ..stream_json import UNDECODED, parse_json
from .finish import finish_reason
from .spec import SPEC


_TEXT_ONLY = frozenset({"content", "role"})


@dataclass
class _Call:
    key: int
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIChatStreamParser:
    """Turns Chat Completions chunks into nbagent events (see module docstring)."""

    def __init__(self, provider: str = "openai", structured: bool = False) -> None:
        self.provider = provider
        self.structured = structured
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.thinking: list[str] = []
        self.reasoning_details: dict[tuple, dict] = {}
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.model = ""
        self.done = False
        self.pending_error: NbagentError | None = None

    def feed(self, sse: SSEEvent, payload: Any = UNDECODED) -> list[Event]:
        if self.pending_error is not None:
            raise self.pending_error
        if self.done:
            return []
        if payload is UNDECODED:
            data = sse.data.strip()
            if data.startswith("[DONE]"):
                self.done = True
                return []
            payload = parse_json(data, self.provider)
        if not isinstance(payload, dict):
            raise ProtocolError(
                f"unexpected stream chunk: {sse.data.strip()[:200]!r}", provider=self.provider
            )
        events: list[Event] = []
        model = payload.get("model")
        if model:
            self.model = str(model)
        for choice in payload.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice, events)
        usage = payload.get("usage")
        groq = payload.get("x_groq")
        if not isinstance(usage, dict) and isinstance(groq, dict):
            usage = groq.get("usage")  # Groq without stream_options
        if isinstance(usage, dict) and usage:
            self.usage = usage
            events.append(Usage(SPEC.read_usage(usage), raw=usage))
        if payload.get("error") or sse.event == "error":
            # raised on the next call, after this chunk's deltas were delivered
            self.pending_error = error_from_payload(payload, provider=self.provider)
        return events

    def _choice(self, choice: dict, events: list[Event]) -> None:
        """Add choice 0's events to ``events``, in the delta's order: thinking, text, refusal, tool calls."""
        delta = choice.get("delta") or {}
        more = not _TEXT_ONLY.issuperset(delta)  # most deltas hold text (and the role) only
        if more:
            self._reasoning(delta, events)
        text = delta.get("content")
        if isinstance(text, str) and text:
            self.text.append(text)
            events.append(TextDelta(text))
        if more:
            self._refusal_and_calls(delta, events)
        finish = choice.get("finish_reason")
        if finish:
            self.finish_reason = str(finish)

    def _reasoning(self, delta: dict, events: list[Event]) -> None:
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.thinking.append(reasoning)
            events.append(ThinkingDelta(reasoning))
        for detail in delta.get("reasoning_details") or []:
            if isinstance(detail, dict):
                self._merge_reasoning_detail(detail)

    def _refusal_and_calls(self, delta: dict, events: list[Event]) -> None:
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:  # Snowflake sends "" on every chunk
            self.refusal.append(refusal)
            events.append(RefusalDelta(refusal))
        for tc in delta.get("tool_calls") or []:
            if isinstance(tc, dict):
                events.extend(self._tool_delta(tc))

    def _tool_delta(self, tc: dict) -> list[Event]:
        events: list[Event] = []
        fn = tc.get("function") or {}
        key = tc.get("index")
        if not isinstance(key, int):  # no index: match by id, else a new call
            key = next((c.key for c in self.calls.values() if tc.get("id") and c.id == tc["id"]), None)
            if key is None:
                key = max(self.calls, default=-1) + 1
        call = self.calls.get(key)
        if call is None:
            call = self.calls[key] = _Call(key, str(tc.get("id") or ""), str(fn.get("name") or ""))
            events.append(ToolCallStart(key, call.id, call.name))
        else:  # set once; servers that repeat id/name on every delta are ignored
            call.id = call.id or str(tc.get("id") or "")
            call.name = call.name or str(fn.get("name") or "")
        args = fn.get("arguments")
        if isinstance(args, dict):
            args = json.dumps(args)
        if isinstance(args, str) and args:
            call.arguments.append(args)
            events.append(ToolCallDelta(key, args))
        return events

    def _merge_reasoning_detail(self, detail: dict) -> None:
        key = (detail.get("index", 0), detail.get("type"), detail.get("id"))
        merged = self.reasoning_details.setdefault(key, {})
        for k, v in detail.items():
            if k in ("text", "summary", "data") and isinstance(v, str) and isinstance(merged.get(k), str):
                merged[k] += v
            elif v is not None or k not in merged:
                merged[k] = v

    def close(self) -> list[Event]:
        if self.pending_error is not None:
            raise self.pending_error
        if not self.done and self.finish_reason is None:
            raise NetworkError(
                "the stream ended before the model finished (no finish_reason and no [DONE])",
                provider=self.provider,
            )
        parts: list = []
        thinking = "".join(self.thinking)
        if thinking or self.reasoning_details:
            details = {}
            if self.reasoning_details:
                details["reasoning_details"] = list(self.reasoning_details.values())
            parts.append(ThinkingPart(thinking, provider_details=details))
        text, refusal = "".join(self.text), "".join(self.refusal)
        parts += [TextPart(text)] if text else []
        parts += [TextPart(refusal, provider_details={REFUSAL: True})] if refusal else []
        events, cut = self._close_calls(parts)
        reason = finish_reason(self.finish_reason, called_tools=bool(self.calls), refused=bool(refusal))
        events.append(
            Finish(
                reason=reason,
                raw_reason=self.finish_reason,
                message=Message("assistant", parts),
                structured_output=_structured(text) if self.structured else None,
                model=self.model,
                cut_tool_calls=cut,
            )
        )
        return events

    def _close_calls(self, parts: list) -> tuple[list[Event], list[CutToolCall]]:
        """End events for the complete calls (added to ``parts``) and the calls the token limit cut."""
        events: list[Event] = []
        cut: list[CutToolCall] = []
        for key in sorted(self.calls):
            call = self.calls[key]
            call.id = call.id or f"call_{key}_{uuid.uuid4().hex[:8]}"  # some servers send none
            raw = "".join(call.arguments)
            args = parse_tool_arguments(raw)
            if self.finish_reason == "length" and args == {UNPARSED_ARGUMENTS: raw}:
                cut.append(CutToolCall(call.id, call.name, raw))
                continue
            parts.append(ToolUsePart(call.id, call.name, args))
            events.append(ToolCallEnd(key, ToolCall(call.id, call.name, args)))
        return events, cut


def _structured(text: str) -> Any:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", stripped)
    try:
        return json.loads(stripped)
    except ValueError:
        return None
