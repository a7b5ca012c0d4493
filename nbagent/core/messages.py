"""Provider-neutral message history: what is actually sent to a model.

A ``Message`` is a role (``"user"`` or ``"assistant"``) and a list of parts.
Parts are plain dataclasses; ``provider_details`` carries what one provider
needs to replay a part byte-identically (an Anthropic thinking signature or
redacted-thinking data, a Gemini thought signature). Providers translate
parts into their own wire shapes; nothing above them sees wire JSON.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .text import clean_text

_edits = [0]  # how many times a field of a message or part already set was assigned again


def edit_count() -> int:
    """How many in-place field edits messages and parts have seen (``part.text = ...``): a history
    observer (token counts, prompt-cache prefixes) rechecks everything when this moved."""
    return _edits[0]


def note_edit() -> None:
    """Say that messages were edited where observers cannot see it (a parts list of an older message
    changed in place): the next token count and prefix check recheck the whole history."""
    _edits[0] += 1


class _EditCounted:
    """Counts assignments to fields already set; setting fields in ``__init__`` is not an edit."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        if name in self.__dict__:
            _edits[0] += 1
        object.__setattr__(self, name, value)


@dataclass
class TextPart(_EditCounted):
    text: str
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="text", init=False)


@dataclass
class ThinkingPart(_EditCounted):
    """Model reasoning. Shown to the user, never replayed as assistant text."""

    text: str
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="thinking", init=False)


@dataclass
class ToolUsePart(_EditCounted):
    id: str
    name: str
    args: dict = field(default_factory=dict)
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="tool_use", init=False)


@dataclass
class ToolResultPart(_EditCounted):
    tool_use_id: str
    content: str
    is_error: bool = False
    name: str = ""
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="tool_result", init=False)


@dataclass
class ImagePart(_EditCounted):
    media_type: str
    data: str  # base64
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="image", init=False)


Part = TextPart | ThinkingPart | ToolUsePart | ToolResultPart | ImagePart

_PART_TYPES = {
    "text": TextPart,
    "thinking": ThinkingPart,
    "tool_use": ToolUsePart,
    "tool_result": ToolResultPart,
    "image": ImagePart,
}


@dataclass
class Message(_EditCounted):
    role: str  # "user" | "assistant"
    parts: list = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_uses(self) -> list[ToolUsePart]:
        return [p for p in self.parts if isinstance(p, ToolUsePart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    def to_dict(self) -> dict:
        return {"role": self.role, "parts": [part_to_dict(p) for p in self.parts]}

    @classmethod
    def from_dict(cls, d: dict) -> Message:
        """The inverse of ``to_dict``; raises TypeError / ValueError on anything else."""
        if not isinstance(d, dict) or d.get("role") not in ("user", "assistant"):
            raise ValueError(f"a message must be an object with role user or assistant, not {d!r:.80}")
        parts = d.get("parts", [])
        if not isinstance(parts, list):
            raise TypeError("a message's parts must be a list")
        return cls(d["role"], [part_from_dict(p) for p in parts])


def part_to_dict(part: Part) -> dict:
    d = {"type": part.type, **vars(part)}
    if not d.get("provider_details"):
        d.pop("provider_details", None)
    return d


_FIELD_TYPES = {"text": str, "id": str, "name": str, "tool_use_id": str, "content": str, "media_type": str,
                "data": str, "args": dict, "provider_details": dict, "is_error": bool}


def part_from_dict(d: dict) -> Part:
    """The inverse of ``part_to_dict``, checking the type of every field."""
    if not isinstance(d, dict):
        raise TypeError(f"a message part must be an object, got {type(d).__name__}")
    d = dict(d)
    kind = d.pop("type", None)
    try:
        cls = _PART_TYPES[kind]
    except (KeyError, TypeError):
        raise ValueError(f"unknown message part type {kind!r}") from None
    for key, value in d.items():
        want = _FIELD_TYPES.get(key)
        if want is not None and not isinstance(value, want):
            raise TypeError(f"{kind} part field {key!r} must be {want.__name__}, got {type(value).__name__}")
    return cls(**d)


def clean_parts(parts) -> list:
    """The parts with their texts made UTF-8 safe (see ``clean_text``); unchanged parts kept as they are."""
    out = []
    for part in parts:
        for name in ("text", "content"):
            value = getattr(part, name, None)
            if isinstance(value, str) and clean_text(value) is not value:
                part = dataclasses.replace(part, **{name: clean_text(value)})
        out.append(part)
    return out
