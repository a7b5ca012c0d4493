"""Tool calls a small model writes as text, read back into real calls.

Small local models often write a tool call as answer text instead of in the form their server parses:
a fenced ``json`` block, or their template's tags (``<tool_call>{...}</tool_call>``). Such a message
becomes real calls only when all of these hold:

- the whole message (surrounding whitespace aside) is one or more such blocks: a call inside prose,
  or prose around a block, stays text;
- each block is one JSON object ``{"name": ..., "arguments": {...}}`` (``parameters`` is read as
  ``arguments``; a missing one is ``{}``);
- each name is a tool offered in the request, and its arguments are valid against that tool's schema.

Anything else -- an unknown tool, a block that is not JSON (a Python triple-quoted string inside),
arguments that do not fit -- leaves the text as it was: nothing runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..core.json_schema import validate_value
from .base import ToolSpec

__all__ = ["TextToolCall", "could_be_tool_call", "read_tool_calls"]

# one block: a fenced code block (```json, ```tool_call, or bare ```) or a <tool_call> tag pair
_BLOCK = re.compile(
    r"\s*(?:```[ \t]*(?:json|tool_call|tool_code)?[ \t]*\n(?P<fenced>.*?)\n?[ \t]*```"
    r"|<tool_call>(?P<tagged>.*?)</tool_call>)\s*",
    re.DOTALL | re.IGNORECASE,
)
_OPENERS = ("```", "<tool_call>")
_FENCE_LANGUAGES = {"", "json", "tool_call", "tool_code"}


@dataclass(frozen=True)
class TextToolCall:
    """A tool call read from text: the tool's name and its checked arguments."""

    name: str
    arguments: dict[str, Any]


def could_be_tool_call(text: str) -> bool:
    """Whether ``text`` (the start of a message) may still turn out to be nothing but tool calls: after
    any complete blocks, the rest is blank, or the start of a fence whose language is ``json`` (or none)
    or of a ``<tool_call>`` tag, with at most a ``{`` opening its body so far."""
    pos = 0
    while (match := _BLOCK.match(text, pos)) is not None and match.end() > pos:
        pos = match.end()
    head = text[pos:].lstrip()
    for opener in _OPENERS:
        if opener.startswith(head):
            return True
        if head.startswith(opener):
            rest = head[len(opener):]
            if opener == "```":
                info, newline, rest = rest.partition("\n")
                info = info.strip().lower()
                if not newline:  # the language is still being written
                    return any(language.startswith(info) for language in _FENCE_LANGUAGES)
                if info not in _FENCE_LANGUAGES:
                    return False
            rest = rest.lstrip()
            return not rest or rest.startswith("{")
    return False


def read_tool_calls(text: str, tools: list[ToolSpec]) -> list[TextToolCall] | None:
    """The calls ``text`` is made of, or None when it is not (see the module docstring)."""
    specs = {t.name: t for t in tools}
    if not specs or not text.strip():
        return None
    calls: list[TextToolCall] = []
    pos = 0
    while pos < len(text):
        match = _BLOCK.match(text, pos)
        if match is None or match.end() == pos:
            return None
        call = _one_call(match.group("fenced") if match.group("fenced") is not None else match.group("tagged"), specs)
        if call is None:
            return None
        calls.append(call)
        pos = match.end()
    return calls or None


def _one_call(body: str, specs: dict[str, ToolSpec]) -> TextToolCall | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict) or set(value) - {"name", "arguments", "parameters"}:
        return None
    name = value.get("name")
    spec = specs.get(name) if isinstance(name, str) else None
    if spec is None:
        return None
    args = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):  # the OpenAI wire's arguments-as-a-string, written out
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if args is None:
        args = {}
    if not isinstance(args, dict) or validate_value(args, spec.input_schema or {"type": "object"}, ""):
        return None
    return TextToolCall(spec.name, args)
