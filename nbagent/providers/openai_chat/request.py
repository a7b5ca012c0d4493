"""The JSON body of a streaming Chat Completions call, the history as Chat Completions messages."""

from __future__ import annotations

import json
import re
from typing import Any
from collections.abc import Sequence

from ...core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from ..base import REFUSAL, ModelRequest

_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def build_body(request: ModelRequest, model: str, *, for_openai: bool) -> dict:
    """The body of one streaming ``/chat/completions`` call.

    ``for_openai``: the server is api.openai.com (``max_completion_tokens``, ``prompt_cache_key``,
    no OpenRouter ``reasoning_details``); otherwise the fields compatible servers understand.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": build_messages(request.messages, request.system, reasoning_details=not for_openai),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_completion_tokens" if for_openai else "max_tokens"] = request.max_tokens
    if request.response_format:
        body["response_format"] = response_format(request.response_format)
    if request.cache_strategy != "none" and request.session_id and for_openai:
        body["prompt_cache_key"] = request.session_id
    body.update(request.extra)
    return body


def build_messages(messages: Sequence[Message], system: str | None, *, reasoning_details: bool = True) -> list[dict]:
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
                out.append({"role": "tool", "tool_call_id": part.tool_use_id, "content": part.content})
        rest = [p for p in message.parts if isinstance(p, (TextPart, ImagePart))]
        if rest:
            out.append({"role": "user", "content": _user_content(rest)})
    return out


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


def response_format(schema: dict) -> dict:
    """``response_format`` for a JSON schema (one already in that shape is sent as it is)."""
    if schema.get("type") in ("json_schema", "json_object") and "properties" not in schema:
        return schema  # already an OpenAI response_format
    name = _SCHEMA_NAME.sub("_", str(schema.get("title") or "response"))[:64] or "response"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
