"""OpenAI Responses API (``POST /v1/responses``, streamed), also for compatible servers.

Only this API streams the reasoning summaries of OpenAI's reasoning models:
``model="openai-responses:gpt-5-mini"``; ``base_url`` points it at a
compatible server. Keys follow the Chat Completions provider
(``OPENAI_API_KEY`` is not sent to a loopback server).

Stateless: every call sends the whole history with ``store: false``. For
reasoning models (o-series, gpt-5 except gpt-5-chat; ``reasoning=True`` /
``False`` overrides the guess) the request also asks for
``include: ["reasoning.encrypted_content"]`` and, unless
``include_reasoning`` is off, ``reasoning: {"summary": "auto"}``
(``reasoning_summary="detailed"`` or ``None`` changes that).

Replay: a reasoning item goes back byte-identical, exactly as
``response.output_item.done`` gave it
(``ThinkingPart.provider_details["openai_item"]``), before the item that
followed it; one with nothing to replay (no encrypted or raw content, or
followed by a built-in tool item) is shown but not sent. Assistant text goes
back as a ``message`` item with its ``id`` and ``phase``, a refusal as a
``refusal`` content part (not as answer text), calls as ``function_call``
items (``call_id`` is the ToolUsePart id, the ``fc_...`` item id is kept
in ``provider_details["item_id"]``), results as ``function_call_output``.
Parts from other providers (no item id) go as plain assistant messages, a
refusal among them as its text; their thinking is not sent.

Structured output uses ``text.format`` (``json_schema``); caching sends the
session id as ``prompt_cache_key`` to api.openai.com (not with
``cache_strategy="none"``). The stream half is ``openai_responses_stream``.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from .base import REFUSAL, ModelRequest
from .http import StreamParser
from .openai import OpenAIProvider
from .openai_responses_stream import (ITEM_ID, OPENAI_ITEM, PHASE, ResponsesStreamParser,
                                      normalize_responses_usage)

__all__ = ["OpenAIResponsesProvider", "ResponsesStreamParser", "build_input", "normalize_responses_usage"]


def is_reasoning_model(model: str) -> bool:
    """o1 / o3 / o4 ... and gpt-5 (not gpt-5-chat) reason; others do not (a guess by name)."""
    name = model.lower().rpartition("/")[2]
    if name.startswith("gpt-5"):
        return not name.startswith("gpt-5-chat")
    return (len(name) > 1 and name[0] == "o" and name[1].isdigit()) or name.startswith("codex")


class OpenAIResponsesProvider(OpenAIProvider):
    """The Responses API over SSE (see the module docstring for options)."""

    name = "openai-responses"

    def __init__(self, model: str = "gpt-5-mini", *, api_key: str | None = None, base_url: str | None = None,
                 reasoning: bool | None = None, reasoning_summary: str | None = "auto", **kwargs: Any):
        super().__init__(model, api_key=api_key, base_url=base_url, **kwargs)
        self.reasoning = reasoning
        self.reasoning_summary = reasoning_summary

    def build_http_request(self, request: ModelRequest) -> tuple[str, dict, dict]:
        return f"{self.base_url}/responses", self.request_headers(), self.build_body(request)

    def build_body(self, request: ModelRequest) -> dict:
        """The JSON body of one streaming ``/responses`` call."""
        model = request.model or self.model
        body: dict[str, Any] = {"model": model, "input": build_input(request.messages), "stream": True,
                                "store": False}
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                              "parameters": t.input_schema or {"type": "object", "properties": {}}}
                             for t in request.tools]
        if self.reasoning if self.reasoning is not None else is_reasoning_model(model):
            body["include"] = ["reasoning.encrypted_content"]
            if request.include_reasoning and self.reasoning_summary:
                body["reasoning"] = {"summary": self.reasoning_summary}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_output_tokens"] = request.max_tokens
        if request.response_format:
            body["text"] = {"format": text_format(request.response_format)}
        if request.cache_strategy != "none" and request.session_id and self.is_openai:
            body["prompt_cache_key"] = request.session_id
        body.update(request.extra)
        return body

    def new_parser(self, request: ModelRequest) -> StreamParser:
        return ResponsesStreamParser(provider=self.name, structured=bool(request.response_format))


def text_format(schema: dict) -> dict:
    """``text.format`` for a JSON schema (or a Chat Completions ``response_format``)."""
    if schema.get("type") == "json_schema" and isinstance(schema.get("json_schema"), dict):
        return {"type": "json_schema", **schema["json_schema"]}  # Chat Completions shape
    if schema.get("type") in ("json_schema", "json_object") and "properties" not in schema:
        return schema  # already a text.format
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(schema.get("title") or "response"))
    return {"type": "json_schema", "name": name[:64] or "response", "schema": schema}


# --- the history as input items ------------------------------------------------------


def build_input(messages: list[Message]) -> list[dict]:
    """nbagent messages -> Responses ``input`` items (see the module docstring)."""
    items: list[dict] = []
    for message in messages:
        if message.role == "assistant":
            items += _assistant_items(message.parts)
            continue
        items += [{"type": "function_call_output", "call_id": p.tool_use_id, "output": p.content}
                  for p in message.parts if isinstance(p, ToolResultPart)]
        rest = [p for p in message.parts if isinstance(p, (TextPart, ImagePart))]
        if rest:
            items.append({"role": "user", "content": _user_content(rest)})
    return items


def _user_content(parts: list) -> str | list:
    if not any(isinstance(p, ImagePart) for p in parts):
        return "\n\n".join(p.text for p in parts)
    return [{"type": "input_text", "text": p.text} if isinstance(p, TextPart)
            else {"type": "input_image", "image_url": f"data:{p.media_type};base64,{p.data}"}
            for p in parts]


def _assistant_items(parts: list) -> list[dict]:
    items: list[dict] = []
    for part in parts:
        details = part.provider_details or {}
        if isinstance(part, ThinkingPart):
            if isinstance(details.get(OPENAI_ITEM), dict):
                items.append(details[OPENAI_ITEM])  # byte-identical: encrypted content included
        elif isinstance(part, TextPart):
            _add_text(items, part, details)
        elif isinstance(part, ToolUsePart):
            call = {"type": "function_call", "call_id": part.id, "name": part.name,
                    "arguments": json.dumps(part.args or {}, ensure_ascii=False, separators=(",", ":"))}
            if details.get(ITEM_ID):
                call["id"] = details[ITEM_ID]
            items.append(call)
    return items


def _add_text(items: list[dict], part: TextPart, details: dict) -> None:
    """Append a text or refusal part: to its own output message item when it has one."""
    if not part.text:
        return
    refusal = bool(details.get(REFUSAL))
    item_id = details.get(ITEM_ID)
    if not item_id:  # from another provider: a plain assistant message
        items.append({"role": "assistant", "content": part.text})
        return
    content = ({"type": "refusal", "refusal": part.text} if refusal
               else {"type": "output_text", "text": part.text, "annotations": []})
    last = items[-1] if items else {}
    if last.get("type") == "message" and last.get("id") == item_id:
        last["content"].append(content)
        return
    item = {"type": "message", "role": "assistant", "id": item_id, "status": "completed", "content": [content]}
    if details.get(PHASE):
        item["phase"] = details[PHASE]
    items.append(item)
