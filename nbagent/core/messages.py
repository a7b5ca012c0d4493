"""Provider-neutral message history: what is actually sent to a model.

A ``Message`` is a role (``"user"`` or ``"assistant"``) and a list of parts.
Parts are plain dataclasses; ``provider_details`` carries what one provider
needs to replay a part byte-identically (an Anthropic thinking signature or
redacted-thinking data, a Gemini thought signature). Providers translate
parts into their own wire shapes; nothing above them sees wire JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union


@dataclass
class TextPart:
    text: str
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="text", init=False)


@dataclass
class ThinkingPart:
    """Model reasoning. Shown to the user, never replayed as assistant text."""

    text: str
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="thinking", init=False)


@dataclass
class ToolUsePart:
    id: str
    name: str
    args: dict = field(default_factory=dict)
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="tool_use", init=False)


@dataclass
class ToolResultPart:
    tool_use_id: str
    content: str
    is_error: bool = False
    name: str = ""
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="tool_result", init=False)


@dataclass
class ImagePart:
    media_type: str
    data: str  # base64
    provider_details: dict = field(default_factory=dict)
    type: str = field(default="image", init=False)


Part = Union[TextPart, ThinkingPart, ToolUsePart, ToolResultPart, ImagePart]

_PART_TYPES = {
    "text": TextPart,
    "thinking": ThinkingPart,
    "tool_use": ToolUsePart,
    "tool_result": ToolResultPart,
    "image": ImagePart,
}


@dataclass
class Message:
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
    def from_dict(cls, d: dict) -> "Message":
        return cls(d["role"], [part_from_dict(p) for p in d.get("parts", [])])


def part_to_dict(part: Part) -> dict:
    d = {"type": part.type, **vars(part)}
    if not d.get("provider_details"):
        d.pop("provider_details", None)
    return d


def part_from_dict(d: dict) -> Part:
    d = dict(d)
    kind = d.pop("type")
    try:
        cls = _PART_TYPES[kind]
    except KeyError:
        raise ValueError(f"unknown message part type {kind!r}") from None
    return cls(**d)
