"""The JSON body of a streaming Messages call, the history as Messages blocks.

The body: the system prompt, the messages, tools, ``max_tokens`` (required by
the API; 4096 unless the request says otherwise), temperature and any
``request.extra`` fields merged in last (e.g. ``{"thinking": {"type":
"enabled", "budget_tokens": 2048}}``; with thinking on, ``max_tokens`` is
raised above the budget and temperature is left out, as the API demands).

Replay: thinking blocks go back byte-identical with their ``signature``
(``ThinkingPart.provider_details["signature"]``), redacted thinking with its
``data`` (``provider_details["redacted_data"]``); thinking without a
signature (e.g. from another provider) is dropped. Tool results of one turn
are sent first in one user message. Server-side blocks kept on a ``TextPart``
(``provider_details["anthropic_block"]``) go back unchanged.

Structured output: a tool named ``structured_output`` whose input schema is
the requested schema (wrapped in ``{"value": ...}`` when it is not an
object), forced (``tool_choice`` ``tool``, or ``any`` alongside other tools,
``auto`` plus an instruction when thinking is on, which forbids forcing).

Caching (``cache_strategy="auto"``): ``cache_control`` breakpoints on the
system block, the last tool and the last block of the last two user
messages (at most 4, the API's limit); ``"none"`` sends none.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

from ...core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from ..base import ModelRequest
from .stream import STRUCTURED_TOOL

DEFAULT_MAX_TOKENS = 4096
_EPHEMERAL = {"type": "ephemeral"}


def build_body(request: ModelRequest, model: str) -> dict:
    """The JSON body of one streaming Messages call."""
    extra = dict(request.extra or {})
    thinking = extra.get("thinking")
    thinking_on = isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
    cache = request.cache_strategy != "none"

    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        "stream": True,
    }
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) and thinking_on else None
    if isinstance(budget, int) and body["max_tokens"] <= budget:
        body["max_tokens"] = budget + DEFAULT_MAX_TOKENS

    system = request.system or ""
    structured = structured_schema(request)
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


def build_messages(messages: Sequence[Message]) -> list[dict]:
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
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_use_id,
                                     "content": part.content}
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


def structured_schema(request: ModelRequest) -> tuple[dict, bool] | None:
    """(tool input schema, wrapped?) for ``response_format``, or None."""
    fmt = request.response_format
    if not fmt:
        return None
    inner = fmt.get("schema")
    schema = inner if isinstance(inner, dict) and "type" not in fmt else fmt
    if schema.get("type") == "object":
        return schema, False
    wrapped = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    return wrapped, True
