"""Google Gemini Developer API (``models/{model}:streamGenerateContent?alt=sse``).

The key travels in the ``x-goog-api-key`` header (argument, ``GEMINI_API_KEY``
or ``GOOGLE_API_KEY``), never in the URL, so it cannot leak into errors.

Request: ``systemInstruction``, ``contents`` (roles ``user`` / ``model``),
tools as ``functionDeclarations`` (``parametersJsonSchema``: plain JSON
Schema), ``generationConfig`` (temperature, ``maxOutputTokens``,
``responseMimeType`` + ``responseJsonSchema`` for structured output,
``thinkingConfig.includeThoughts`` when reasoning is wanted and the model
thinks, i.e. Gemini 2.5 and later) and ``request.extra`` merged in last
(one level deep, so ``{"generationConfig": {"topK": 8}}`` adds a field).

Replay: every ``thoughtSignature`` goes back on the part it came on
(``provider_details["thought_signature"]``): a function call, a text part, or
a thought part (a signed thought part is replayed whole; unsigned thoughts
are not replayed). On Gemini 3, a model turn whose calls carry no signature
at all (history from another provider) gets Google's documented placeholder
signature so the request is not rejected. Function results go back as
``functionResponse`` parts ``{"result": ...}`` / ``{"error": ...}``, first in
their user turn, with the call's name and its id when Gemini gave one.

Parsing: each event is a delta ``GenerateContentResponse``. Text parts are
text, ``thought: true`` parts are thinking; consecutive chunks of one kind are
joined into one part unless a chunk brings its own signature. Function calls
arrive whole (start + end events); a call without an id gets a synthesized
one (``call_<hex>_<n>``, ``provider_details["synthetic_id"]``) that is not
sent back to Gemini, which matches results by name and order. ``finishReason``
may repeat on every chunk: reading goes on to the end of the body, and a body
that ends without one is an incomplete reply (a ``network`` error). Unprefixed
JSON error objects mid-stream raise ``NbagentError`` after the partial output;
a ``499 CANCELLED`` the server sends on its own is a ``server`` error,
retryable only while nothing was output. A prompt blocked before any
candidate (``promptFeedback.blockReason``) ends with
``FinishReason.CONTENT_FILTER`` and ``Finish.prompt_blocked`` ("Gemini
blocked this prompt (SAFETY)"); no reply text is made up and nothing is
added to the history.

Caching: Gemini caches repeated prompt prefixes implicitly (2.5 and later);
there is nothing to send, and the hits show up as
``cached_content_token_count``. ``cache_strategy`` is therefore ignored.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from typing import Any
from collections.abc import Mapping

from ..core.errors import NbagentError
from ..core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from ..core.steps import FinishReason, ToolCall, UsageMetadata
from .base import (
    Event,
    Finish,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from .http import HTTPProvider, error_from_payload, parse_json
from .sse import SSEEvent

__all__ = ["GeminiProvider", "GeminiStreamParser", "normalize_usage"]

# Google's documented value for replaying calls that have no real signature.
PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"

_FILTERED = {
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
}
_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


class GeminiProvider(HTTPProvider):
    """Gemini models over the Developer API (key: argument, ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``)."""

    name = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    sse_raw_lines = True
    context_window = 1_048_576

    def __init__(self, model: str = "gemini-2.5-flash", *, api_key: str | None = None, **kwargs: Any):
        key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        super().__init__(model, api_key=key, **kwargs)

    def build_http_request(self, request: ModelRequest) -> tuple[str, dict, dict]:
        if not self.api_key and self.base_url == self.default_base_url:
            raise NbagentError(
                "no Gemini API key: pass api_key= or set GEMINI_API_KEY (or GOOGLE_API_KEY)",
                kind="auth",
                provider=self.name,
            )
        model = (request.model or self.model).removeprefix("models/")
        url = f"{self.base_url}/models/{model}:streamGenerateContent?alt=sse"
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if self.api_key:
            headers["x-goog-api-key"] = self.api_key
        return url, headers, build_body(request, model)

    def new_parser(self, request: ModelRequest) -> GeminiStreamParser:
        return GeminiStreamParser(structured=bool(request.response_format))

    def parse_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> NbagentError:
        error = super().parse_error(status, body, headers)
        delay = retry_delay_from_body(body)
        if delay is not None:
            error.retry_after = delay
        return error


def retry_delay_from_body(body: bytes) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` ``retryDelay`` ("13s"), if any."""
    try:
        payload = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    if isinstance(payload, list) and payload:
        payload = payload[0]
    err = payload.get("error") if isinstance(payload, dict) else None
    details = err.get("details") if isinstance(err, dict) else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, dict) and "RetryInfo" in str(detail.get("@type", "")):
            match = _DURATION.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


# --- request -----------------------------------------------------------------


def build_body(request: ModelRequest, model: str | None = None) -> dict:
    """The JSON body of one ``streamGenerateContent`` call."""
    model = model or request.model
    body: dict[str, Any] = {"contents": build_contents(request.messages, model)}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "parametersJsonSchema": t.input_schema or {"type": "object", "properties": {}},
                    }
                    for t in request.tools
                ]
            }
        ]
    config: dict[str, Any] = {}
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.max_tokens:
        config["maxOutputTokens"] = request.max_tokens
    if request.response_format:
        fmt = request.response_format
        schema = fmt["schema"] if isinstance(fmt.get("schema"), dict) and "type" not in fmt else fmt
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = schema
    if request.include_reasoning and _thinks(model):
        config["thinkingConfig"] = {"includeThoughts": True}
    if config:
        body["generationConfig"] = config
    for key, value in (request.extra or {}).items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return body


def _version(model: str) -> tuple[int, int]:
    match = _VERSION.search(model.lower())
    return (int(match.group(1)), int(match.group(2) or 0)) if match else (0, 0)


def _thinks(model: str) -> bool:
    """Gemini 2.5 and later think; so do the unversioned ``gemini-*-latest`` aliases."""
    version = _version(model)
    return version >= (2, 5) or (version == (0, 0) and model.lower().endswith("-latest"))


def build_contents(messages: list[Message], model: str = "") -> list[dict]:
    """Wire ``contents``: empty turns dropped, neighbours with one role merged."""
    calls = {
        part.id: part
        for msg in messages
        if msg.role == "assistant"
        for part in msg.parts
        if isinstance(part, ToolUsePart)
    }
    needs_signature = _version(model) >= (3, 0)
    out: list[dict] = []
    for msg in messages:
        if msg.role == "assistant":
            role, parts = "model", _model_parts(msg.parts, needs_signature)
        else:
            role, parts = "user", _user_parts(msg.parts, calls)
        if not parts:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": parts})
    return out


def _user_parts(parts: list, calls: dict[str, ToolUsePart]) -> list[dict]:
    responses: list[dict] = []
    others: list[dict] = []
    for part in parts:
        if isinstance(part, ToolResultPart):
            call = calls.get(part.tool_use_id)
            response: dict[str, Any] = {
                "name": part.name or (call.name if call else ""),
                "response": {"error" if part.is_error else "result": part.content},
            }
            synthetic = call is None or call.provider_details.get("synthetic_id")
            if part.tool_use_id and not synthetic:
                response["id"] = part.tool_use_id
            responses.append({"functionResponse": response})
        elif isinstance(part, TextPart) and part.text:
            others.append({"text": part.text})
        elif isinstance(part, ImagePart):
            others.append({"inlineData": {"mimeType": part.media_type, "data": part.data}})
    return responses + others


def _model_parts(parts: list, needs_signature: bool) -> list[dict]:
    out: list[dict] = []
    for part in parts:
        signature = (part.provider_details or {}).get("thought_signature")
        if isinstance(part, ThinkingPart):
            if not signature:
                continue  # thought summaries are for the user, not the model
            wire: dict[str, Any] = {"text": part.text, "thought": True}
        elif isinstance(part, TextPart):
            if (not part.text and not signature) or part.provider_details.get("anthropic_block"):
                continue
            wire = {"text": part.text}
        elif isinstance(part, ToolUsePart):
            call: dict[str, Any] = {"name": part.name, "args": part.args or {}}
            if part.id and not part.provider_details.get("synthetic_id"):
                call["id"] = part.id
            wire = {"functionCall": call}
        elif isinstance(part, ImagePart):
            wire = {"inlineData": {"mimeType": part.media_type, "data": part.data}}
        else:
            continue
        if signature:
            wire["thoughtSignature"] = signature
        out.append(wire)
    calls = [p for p in out if "functionCall" in p]
    if needs_signature and calls and not any("thoughtSignature" in p for p in calls):
        calls[0]["thoughtSignature"] = PLACEHOLDER_SIGNATURE
    return out


# --- response ----------------------------------------------------------------


def normalize_usage(raw: dict) -> UsageMetadata:
    """Gemini ``usageMetadata`` -> UsageMetadata (candidates exclude thoughts)."""
    prompt = int(raw.get("promptTokenCount") or 0) + int(raw.get("toolUsePromptTokenCount") or 0)
    candidates = int(raw.get("candidatesTokenCount") or 0)
    thoughts = int(raw.get("thoughtsTokenCount") or 0)
    total = int(raw.get("totalTokenCount") or 0) or prompt + candidates + thoughts
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=candidates,
        total_token_count=total,
        cached_content_token_count=int(raw.get("cachedContentTokenCount") or 0),
        thoughts_token_count=thoughts,
    )


def map_finish_reason(raw: str | None, called_tools: bool) -> FinishReason:
    if raw == "STOP":
        return FinishReason.TOOL_CALLS if called_tools else FinishReason.STOP
    if raw == "MAX_TOKENS":
        return FinishReason.LENGTH
    if raw in _FILTERED:
        return FinishReason.CONTENT_FILTER
    return FinishReason.OTHER


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

    def feed(self, sse: SSEEvent) -> list[Event]:
        payload = parse_json(sse.data, "gemini")
        chunks = payload if isinstance(payload, list) else [payload]
        events: list[Event] = []
        for chunk in chunks:
            if not isinstance(chunk, dict):
                continue
            if "error" in chunk:
                raise self._stream_error(chunk)
            events.extend(self._chunk(chunk))
        return events

    def close(self) -> list[Event]:
        self._join_text()
        if self.finish_reason is None:
            if not self.block_reason:
                raise NbagentError(
                    "the Gemini stream ended without a finishReason: the reply is incomplete "
                    "(connection cut or proxy timeout)",
                    kind="network",
                    provider="gemini",
                )
            why = f"{self.block_reason}: {self.block_message}" if self.block_message else self.block_reason
            return [Finish(reason=FinishReason.CONTENT_FILTER, raw_reason=self.block_reason,
                           message=Message("assistant", self.parts), model=self.model,
                           prompt_blocked=f"Gemini blocked this prompt ({why}); no reply was generated.")]
        called = any(isinstance(p, ToolUsePart) for p in self.parts)
        reason, raw = map_finish_reason(self.finish_reason, called), self.finish_reason
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

    def _chunk(self, chunk: dict) -> list[Event]:
        events: list[Event] = []
        if chunk.get("modelVersion"):
            self.model = str(chunk["modelVersion"])
        feedback = chunk.get("promptFeedback") or {}
        if feedback.get("blockReason"):
            self.block_reason = str(feedback["blockReason"])
            self.block_message = str(feedback.get("blockReasonMessage") or "")
        candidates = chunk.get("candidates") or []
        candidate = candidates[0] if candidates and isinstance(candidates[0], dict) else {}
        for part in (candidate.get("content") or {}).get("parts") or []:
            if isinstance(part, dict):
                events.extend(self._part(part))
        if candidate.get("finishReason"):
            self.finish_reason = str(candidate["finishReason"])
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict) and usage and usage != self.usage:
            self.usage = dict(usage)
            events.append(Usage(usage=normalize_usage(self.usage), raw=dict(self.usage)))
        return events

    def _part(self, part: dict) -> list[Event]:
        signature = part.get("thoughtSignature")
        details = {"thought_signature": signature} if signature else {}
        call = part.get("functionCall")
        if isinstance(call, dict):
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
            return [
                ToolCallStart(key=n, id=call_id, name=name),
                ToolCallEnd(key=n, call=ToolCall(call_id, name, args)),
            ]
        if "text" not in part:
            return []  # inline images, executable code, ... are not shown
        text = str(part.get("text") or "")
        kind = ThinkingPart if part.get("thought") else TextPart
        last = self.parts[-1] if self.parts else None
        if type(last) is kind and not signature:
            self._more.append(text)
        elif text or signature:
            self._join_text()
            self.parts.append(kind(text, provider_details=details))
        if not text:
            return []
        return [ThinkingDelta(text) if kind is ThinkingPart else TextDelta(text)]

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
