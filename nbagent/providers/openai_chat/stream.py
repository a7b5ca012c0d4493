"""OpenAI Chat Completions (streaming), also for OpenAI-compatible servers.

Works against api.openai.com and servers that copy its wire format (vLLM,
llama.cpp, Ollama, OpenRouter, Groq, DeepSeek, ...). Quirks handled, each
covered by a recorded fixture: usage in any chunk (``choices: []`` chunk,
finish chunk, content chunk, ``x_groq.usage``), ``reasoning_content`` /
``reasoning`` deltas, tool-call ids and names repeated on every delta,
``null`` or empty arguments, missing or repeated finish reasons, in-band
errors on an HTTP 200 stream, ``n > 1`` (only choice 0 is used).

A ``refusal`` streams as ``RefusalDelta`` (not answer text), ends the call
with ``FinishReason.CONTENT_FILTER`` and is replayed in the assistant
message's own ``refusal`` field. Tool arguments that are not a JSON object
become ``{"_raw": "<the string received>"}``, so the tool call still reaches
the caller and the model sees the tool's complaint -- except when
``finish_reason`` is ``length``: then the call was cut by the token limit and
is reported in ``Finish.cut_tool_calls`` instead (never run or replayed).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..core.errors import NbagentError
from ..core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from ..core.steps import CutToolCall, FinishReason, ToolCall, UsageMetadata
from .base import (
    UNPARSED_ARGUMENTS,
    parse_tool_arguments,
    REFUSAL,
    Event,
    Finish,
    ModelRequest,
    RefusalDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from .http import HTTPProvider, StreamParser, error_from_payload, parse_json
from .sse import SSEEvent

__all__ = ["OpenAIProvider", "OpenAIChatParser", "normalize_openai_usage", "map_finish_reason"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}
_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def map_finish_reason(raw: str | None, has_tool_calls: bool) -> FinishReason:
    """Map a Chat Completions finish_reason; a missing one means stop / tool_calls."""
    if raw is None:
        return FinishReason.TOOL_CALLS if has_tool_calls else FinishReason.STOP
    return _FINISH.get(raw, FinishReason.OTHER)


def normalize_openai_usage(raw: dict) -> UsageMetadata:
    """The UsageMetadata of a Chat Completions usage object.

    ``completion_tokens`` includes reasoning, so candidates = completion -
    reasoning; a reasoning count larger than the completion count (seen on
    OpenRouter) is capped so that candidates + thoughts == completion_tokens.
    """
    prompt = _int(raw.get("prompt_tokens"))
    completion = _int(raw.get("completion_tokens"))
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cached = prompt_details.get("cached_tokens")
    if cached is None:
        cached = raw.get("prompt_cache_hit_tokens")
    reasoning = _int(completion_details.get("reasoning_tokens"))
    if completion:
        reasoning = min(reasoning, completion)
    usage = UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=max(0, completion - reasoning),
        total_token_count=_int(raw.get("total_tokens")) or prompt + completion,
        cached_content_token_count=_int(cached),
        thoughts_token_count=reasoning,
        cache_write_token_count=_int(prompt_details.get("cache_write_tokens")),
    )
    return usage


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _is_loopback(url: str) -> bool:
    try:
        return httpx.URL(url).host in _LOOPBACK
    except Exception:  # noqa: BLE001
        return False


# --- request -------------------------------------------------------------------


def _user_content(parts: list) -> str | list:
    if not any(isinstance(p, ImagePart) for p in parts):
        return "\n\n".join(p.text for p in parts)
    content: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            content.append({"type": "text", "text": p.text})
        else:
            url = f"data:{p.media_type};base64,{p.data}"
            content.append({"type": "image_url", "image_url": {"url": url}})
    return content


def messages_to_openai(
    messages: list[Message], system: str | None, *, reasoning_details: bool = True
) -> list[dict]:
    """Translate nbagent messages into Chat Completions messages.

    Thinking is never sent as text; OpenRouter-style ``reasoning_details``
    kept on a ThinkingPart are replayed when ``reasoning_details`` is true.
    """
    out: list[dict] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "assistant":
            out.append(_assistant_message(message, reasoning_details))
            continue
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                out.append(
                    {"role": "tool", "tool_call_id": part.tool_use_id, "content": part.content}
                )
        rest = [p for p in message.parts if isinstance(p, (TextPart, ImagePart))]
        if rest:
            out.append({"role": "user", "content": _user_content(rest)})
    return out


def _assistant_message(message: Message, with_details: bool) -> dict:
    texts = [p for p in message.parts if isinstance(p, TextPart)]
    text = "".join(p.text for p in texts if not p.provider_details.get(REFUSAL))
    refusal = "".join(p.text for p in texts if p.provider_details.get(REFUSAL))
    calls = [
        {
            "id": p.id,
            "type": "function",
            "function": {"name": p.name, "arguments": json.dumps(p.args or {})},
        }
        for p in message.parts
        if isinstance(p, ToolUsePart)
    ]
    msg: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if refusal:  # the API's own slot for it: never replayed as an answer
        msg["content"] = text or None
        msg["refusal"] = refusal
    if calls:
        msg["tool_calls"] = calls
    details = [
        d
        for p in (message.parts if with_details else [])
        if isinstance(p, ThinkingPart)
        for d in p.provider_details.get("reasoning_details", [])
    ]
    if details:  # OpenRouter replays reasoning this way; the text itself is never sent
        msg["reasoning_details"] = details
    return msg


def _response_format(schema: dict) -> dict:
    if schema.get("type") in ("json_schema", "json_object") and "properties" not in schema:
        return schema  # already an OpenAI response_format
    name = _SCHEMA_NAME.sub("_", str(schema.get("title") or "response"))[:64] or "response"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


# --- provider ----------------------------------------------------------------------


class OpenAIProvider(HTTPProvider):
    """Chat Completions over SSE; ``base_url`` points it at any compatible server.

    The key comes from ``api_key`` or ``OPENAI_API_KEY``; the environment key is
    not sent to a loopback server, and no ``Authorization`` header is sent
    without a key.
    """

    name = "openai"
    default_base_url = OPENAI_BASE_URL

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None, **kwargs):
        base = (base_url or OPENAI_BASE_URL).rstrip("/")
        if api_key is None and not _is_loopback(base):
            api_key = os.environ.get("OPENAI_API_KEY") or None
        super().__init__(model, api_key=api_key, base_url=base, **kwargs)

    @property
    def is_openai(self) -> bool:
        """True when talking to api.openai.com itself."""
        return httpx.URL(self.base_url).host == "api.openai.com"

    def request_headers(self) -> dict:
        """The headers of a streaming call; api.openai.com without a key is an ``auth`` error."""
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        elif self.is_openai:  # say so before trying, not "could not reach" three times later
            raise NbagentError("no OpenAI API key: pass api_key= or set OPENAI_API_KEY", kind="auth", provider=self.name)
        return headers

    def build_http_request(self, request: ModelRequest) -> tuple[str, dict, dict]:
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": messages_to_openai(
                request.messages, request.system, reasoning_details=not self.is_openai
            ),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            key = "max_completion_tokens" if self.is_openai else "max_tokens"
            body[key] = request.max_tokens
        if request.response_format:
            body["response_format"] = _response_format(request.response_format)
        if request.cache_strategy != "none" and request.session_id and self.is_openai:
            body["prompt_cache_key"] = request.session_id
        body.update(request.extra)
        return f"{self.base_url}/chat/completions", self.request_headers(), body

    def new_parser(self, request: ModelRequest) -> StreamParser:
        return OpenAIChatParser(provider=self.name, structured=bool(request.response_format))


# --- response ----------------------------------------------------------------------


@dataclass
class _Call:
    key: int
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIChatParser:
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

    def feed(self, sse: SSEEvent) -> list[Event]:
        if self.pending_error is not None:
            raise self.pending_error
        if self.done:
            return []
        data = sse.data.strip()
        if data.startswith("[DONE]"):
            self.done = True
            return []
        payload = parse_json(data, self.provider)
        if not isinstance(payload, dict):
            raise NbagentError(
                f"unexpected stream chunk: {data[:200]!r}", kind="protocol", provider=self.provider
            )
        events: list[Event] = []
        if payload.get("model"):
            self.model = str(payload["model"])
        for choice in payload.get("choices") or []:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                events.extend(self._choice(choice))
        usage = payload.get("usage")
        groq = payload.get("x_groq")
        if not isinstance(usage, dict) and isinstance(groq, dict):
            usage = groq.get("usage")  # Groq without stream_options
        if isinstance(usage, dict) and usage:
            self.usage = usage
            events.append(Usage(normalize_openai_usage(usage), raw=usage))
        if payload.get("error") or sse.event == "error":
            # raised on the next call, after this chunk's deltas were delivered
            self.pending_error = error_from_payload(payload, provider=self.provider)
        return events

    def _choice(self, choice: dict) -> list[Event]:
        events: list[Event] = []
        delta = choice.get("delta") or {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.thinking.append(reasoning)
            events.append(ThinkingDelta(reasoning))
        for detail in delta.get("reasoning_details") or []:
            if isinstance(detail, dict):
                self._merge_reasoning_detail(detail)
        text = delta.get("content")
        if isinstance(text, str) and text:
            self.text.append(text)
            events.append(TextDelta(text))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:  # Snowflake sends "" on every chunk
            self.refusal.append(refusal)
            events.append(RefusalDelta(refusal))
        for tc in delta.get("tool_calls") or []:
            if isinstance(tc, dict):
                events.extend(self._tool_delta(tc))
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        return events

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
            raise NbagentError(
                "the stream ended before the model finished (no finish_reason and no [DONE])",
                kind="network",
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
        reason = map_finish_reason(self.finish_reason, bool(self.calls))
        if refusal and reason == FinishReason.STOP:
            reason = FinishReason.CONTENT_FILTER
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
