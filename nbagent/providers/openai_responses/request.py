"""The JSON body of a streaming ``/responses`` call, the history as ``input`` items.

Stateless: every call sends the whole history with ``store: false``. For
reasoning models the body also asks for ``include:
["reasoning.encrypted_content"]`` and, unless ``include_reasoning`` is off,
``reasoning: {"summary": ...}``.

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
"""

from __future__ import annotations

import json
from typing import Any
from collections.abc import Sequence

from ...core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from ..base import REFUSAL, ModelRequest
from .stream import ITEM_ID, OPENAI_ITEM, PHASE


def build_body(request: ModelRequest, model: str, *, reasoning: bool, reasoning_summary: str | None,
               for_openai: bool) -> dict:
    """The body of one streaming ``/responses`` call.

    ``reasoning``: the model reasons (ask for its encrypted reasoning and, with
    ``include_reasoning``, a summary of the kind ``reasoning_summary`` names);
    ``for_openai``: the server is api.openai.com (``prompt_cache_key``).
    """
    body: dict[str, Any] = {"model": model, "input": build_input(request.messages), "stream": True,
                            "store": False}
    if request.system:
        body["instructions"] = request.system
    if request.tools:
        body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                          "parameters": t.input_schema or {"type": "object", "properties": {}}}
                         for t in request.tools]
    if reasoning:
        body["include"] = ["reasoning.encrypted_content"]
        if request.include_reasoning and reasoning_summary:
            body["reasoning"] = {"summary": reasoning_summary}
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.response_format:
        body["text"] = {"format": text_format(request.response_format)}
    if request.cache_strategy != "none" and request.session_id and for_openai:
        body["prompt_cache_key"] = request.session_id
    body.update(request.extra)
    return body


def text_format(schema: dict) -> dict:
    """``text.format`` for a JSON schema (or a Chat Completions ``response_format``)."""
    if schema.get("type") == "json_schema" and isinstance(schema.get("json_schema"), dict):
        return {"type": "json_schema", **schema["json_schema"]}  # Chat Completions shape
    if schema.get("type") in ("json_schema", "json_object") and "properties" not in schema:
        return schema  # already a text.format
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(schema.get("title") or "response"))
    return {"type": "json_schema", "name": name[:64] or "response", "schema": schema}


# --- the history as input items ------------------------------------------------------


def build_input(messages: Sequence[Message]) -> list[dict]:
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
