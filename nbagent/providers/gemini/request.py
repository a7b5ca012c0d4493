"""The JSON body of a ``streamGenerateContent`` call, the history as Gemini ``contents``.

The body: ``systemInstruction``, ``contents`` (roles ``user`` / ``model``),
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
their user turn, with the call's name and its id when Gemini gave one (not a
synthesized one: Gemini matches results by name and order).
"""

from __future__ import annotations

import re
from typing import Any
from collections.abc import Sequence

from ...core.messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from ..base import ModelRequest

# Google's documented value for replaying calls that have no real signature.
PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"

_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")


def build_body(request: ModelRequest, model: str) -> dict:
    """The JSON body of one ``streamGenerateContent`` call."""
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


def build_contents(messages: Sequence[Message], model: str = "") -> list[dict]:
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
