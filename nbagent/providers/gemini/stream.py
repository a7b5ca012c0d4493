"""Gemini stream events in, nbagent events out (the response half of the wire).

Each event is a delta ``GenerateContentResponse``. Text parts are text,
``thought: true`` parts are thinking; consecutive chunks of one kind are
joined into one part unless a chunk brings its own signature. Function calls
arrive whole (start + end events); a call without an id gets a synthesized
one (``call_<hex>_<n>``, ``provider_details["synthetic_id"]``) that is not
sent back to Gemini. ``finishReason`` may repeat on every chunk: reading goes
on to the end of the body, and a body that ends without one is an incomplete
reply (a ``network`` error). Unprefixed JSON error objects mid-stream raise
``NbagentError`` after the partial output; a ``499 CANCELLED`` the server
sends on its own is a ``server`` error, retryable only while nothing was
output. A prompt blocked before any candidate (``promptFeedback.blockReason``)
ends with ``FinishReason.CONTENT_FILTER`` and ``Finish.prompt_blocked``
("Gemini blocked this prompt (SAFETY)"); no reply text is made up and nothing
is added to the history.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from ...core.errors import NbagentError, NetworkError
from ...core.messages import Message, TextPart, ThinkingPart, ToolUsePart
from ...core.steps import FinishReason, ToolCall
from ..base import Event, Finish, TextDelta, ThinkingDelta, ToolCallEnd, ToolCallStart, Usage
from ..http_errors import error_from_payload
from ..sse import SSEEvent
from ..stream_json import UNDECODED, parse_json
from .finish import finish_reason
from .spec import SPEC


class GeminiStreamParser:
    """Gemini SSE events (``raw`` ones included) in, nbagent events out."""

    def __init__(self, structured: bool = False) -> None:
        self.structured = structured
        self.parts: list = []
        self._more: list[str] = []  # text continuing the last part, joined once (see _join_text)
        self.usage: dict = {}
        self.finish_reason: str | None = None
        self.block_reason: str | None = None
        self.block_message = ""
        self.model = ""
        self._prefix = secrets.token_hex(4)
        self._calls = 0

    def feed(self, sse: SSEEvent, payload: Any = UNDECODED) -> list[Event]:
        if payload is UNDECODED:
            payload = parse_json(sse.data, "gemini")
        events: list[Event] = []
        for chunk in payload if isinstance(payload, list) else (payload,):
            if not isinstance(chunk, dict):
                continue
            if "error" in chunk:
                raise self._stream_error(chunk)
            self._chunk(chunk, events)
        return events

    def close(self) -> list[Event]:
        self._join_text()
        if self.finish_reason is None:
            if not self.block_reason:
                raise NetworkError(
                    "the Gemini stream ended without a finishReason: the reply is incomplete "
                    "(connection cut or proxy timeout)",
                    provider="gemini",
                )
            why = f"{self.block_reason}: {self.block_message}" if self.block_message else self.block_reason
            return [Finish(reason=FinishReason.CONTENT_FILTER, raw_reason=self.block_reason,
                           message=Message("assistant", self.parts), model=self.model,
                           prompt_blocked=f"Gemini blocked this prompt ({why}); no reply was generated.")]
        called = any(isinstance(p, ToolUsePart) for p in self.parts)
        reason, raw = finish_reason(self.finish_reason, called_tools=called), self.finish_reason
        message = Message("assistant", self.parts)
        structured = None
        if self.structured and message.text.strip():
            try:
                structured = json.loads(message.text)
            except ValueError:
                structured = None
        return [Finish(reason=reason, raw_reason=raw, message=message, structured_output=structured,
                       model=self.model)]

    # -- internals ----------------------------------------------------------

    def _chunk(self, chunk: dict, events: list[Event]) -> None:
        """Add one ``GenerateContentResponse``'s events to ``events``."""
        model = chunk.get("modelVersion")
        if model:
            self.model = str(model)
        feedback = chunk.get("promptFeedback")
        if feedback and feedback.get("blockReason"):
            self.block_reason = str(feedback["blockReason"])
            self.block_message = str(feedback.get("blockReasonMessage") or "")
        candidates = chunk.get("candidates")
        candidate = candidates[0] if candidates and isinstance(candidates[0], dict) else None
        if candidate is not None:
            content = candidate.get("content")
            for part in (content.get("parts") if content else None) or ():
                if isinstance(part, dict):
                    self._part(part, events)
            finish = candidate.get("finishReason")
            if finish:
                self.finish_reason = str(finish)
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict) and usage and usage != self.usage:
            self.usage = dict(usage)
            events.append(Usage(usage=SPEC.read_usage(self.usage), raw=dict(self.usage)))

    def _part(self, part: dict, events: list[Event]) -> None:
        """Add one content part's events to ``events``: text, a thought, or a whole function call."""
        signature = part.get("thoughtSignature")
        call = part.get("functionCall")
        if isinstance(call, dict):
            self._call(call, signature, events)
            return
        if "text" not in part:
            return  # inline images, executable code, ... are not shown
        text = part["text"]
        if type(text) is not str:
            text = str(text or "")
        kind = ThinkingPart if part.get("thought") else TextPart
        parts = self.parts
        if not signature and parts and type(parts[-1]) is kind:
            self._more.append(text)
        elif text or signature:
            self._join_text()
            parts.append(kind(text, provider_details={"thought_signature": signature} if signature else {}))
        if text:
            events.append(ThinkingDelta(text) if kind is ThinkingPart else TextDelta(text))

    def _call(self, call: dict, signature: Any, events: list[Event]) -> None:
        details: dict[str, Any] = {"thought_signature": signature} if signature else {}
        n = self._calls
        self._calls += 1
        call_id = str(call.get("id") or "")
        if not call_id:
            call_id = f"call_{self._prefix}_{n}"
            details["synthetic_id"] = True
        name = str(call.get("name") or "")
        given = call.get("args")
        args = given if isinstance(given, dict) else {}
        self._join_text()
        self.parts.append(ToolUsePart(call_id, name, args, provider_details=details))
        events += [ToolCallStart(key=n, id=call_id, name=name), ToolCallEnd(key=n, call=ToolCall(call_id, name, args))]

    def _join_text(self) -> None:
        """Fold the text that continued the last part into it (one join, not a copy per chunk)."""
        if self._more:
            last = self.parts[-1]
            last.text = last.text + "".join(self._more)
            self._more = []

    def _stream_error(self, chunk: dict) -> NbagentError:
        error = error_from_payload(chunk, status=None, provider="gemini")
        body = chunk.get("error")
        err = body if isinstance(body, dict) else {}
        if err.get("code") == 499 or str(err.get("status") or "").upper() == "CANCELLED":
            when = "after part of the reply" if self.parts else "before any output"
            # not the caller's doing: it is still reading
            error = error.with_kind("server", retryable=True, message=(
                f"Gemini cancelled the request on its side (499 CANCELLED) {when}: {error.message}"))
        else:
            error = error.with_kind(error.kind, message=f"Gemini stream error: {error.message}")
        error.retryable = error.retryable and not self.parts  # a partial reply was shown: no retry
        return error
