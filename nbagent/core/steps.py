"""Steps, stream chunks and usage: the values a conversation is made of.

A *step* is one logical event of a turn (the user's prompt, one model call's
answer, one tool execution, a compaction, the turn's end). It is streamed as a
sequence of updates that share a ``step_index``; each update carries the full
accumulated ``content`` / ``thinking`` and the newest ``content_delta`` /
``thinking_delta``.

Conventions used by nbagent's own connections:

- the user's prompt: TEXT_RESPONSE, USER -> UNSPECIFIED;
- a model call: TEXT_RESPONSE (or TOOL_CALL when it asked for tools),
  MODEL -> USER, carrying thinking, text, the complete tool calls and the
  call's usage;
- a tool execution: TOOL_CALL, SYSTEM -> ENVIRONMENT, ``tool_calls=[call]``,
  ``content`` the result shown to the model, WAITING_FOR_USER while it waits
  for approval or a manual result;
- COMPACTION: SYSTEM -> ENVIRONMENT, ``metadata`` has tokens_before/after;
- FINISH: SYSTEM -> USER, ``metadata["finish_reason"]``; no usage of its own.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class StepType(str, Enum):
    TEXT_RESPONSE = "TEXT_RESPONSE"
    TOOL_CALL = "TOOL_CALL"
    SYSTEM_MESSAGE = "SYSTEM_MESSAGE"
    COMPACTION = "COMPACTION"
    FINISH = "FINISH"
    UNKNOWN = "UNKNOWN"


class StepSource(str, Enum):
    SYSTEM = "SYSTEM"
    USER = "USER"
    MODEL = "MODEL"
    UNKNOWN = "UNKNOWN"


class StepTarget(str, Enum):
    USER = "USER"
    ENVIRONMENT = "ENVIRONMENT"
    UNSPECIFIED = "UNSPECIFIED"
    UNKNOWN = "UNKNOWN"


class StepStatus(str, Enum):
    ACTIVE = "ACTIVE"
    DONE = "DONE"
    WAITING_FOR_USER = "WAITING_FOR_USER"
    ERROR = "ERROR"
    CANCELED = "CANCELED"
    TERMINAL_ERROR = "TERMINAL_ERROR"
    UNKNOWN = "UNKNOWN"


class FinishReason(str, Enum):
    STOP = "STOP"
    LENGTH = "LENGTH"
    TOOL_CALLS = "TOOL_CALLS"
    CONTENT_FILTER = "CONTENT_FILTER"
    INTERRUPTED = "INTERRUPTED"
    ERROR = "ERROR"
    OTHER = "OTHER"


@dataclass
class ToolCall:
    """A tool call the model asked for; ``args`` is the parsed JSON object."""

    id: str = ""
    name: str = ""
    args: dict = field(default_factory=dict)
    canonical_path: str | None = None

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "args": self.args,
            "canonical_path": self.canonical_path,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ToolCall":
        return cls(d.get("id", ""), d.get("name", ""), d.get("args") or {}, d.get("canonical_path"))


@dataclass
class UsageMetadata:
    """Token counts, normalized alike for every provider.

    ``prompt_token_count`` counts every input token (cached and cache-written
    included), ``cached_content_token_count`` the cache reads among them,
    ``thoughts_token_count`` the reasoning tokens and ``candidates_token_count``
    the other generated tokens.
    """

    prompt_token_count: int = 0
    candidates_token_count: int = 0
    total_token_count: int = 0
    cached_content_token_count: int = 0
    thoughts_token_count: int = 0

    def __add__(self, other: "UsageMetadata") -> "UsageMetadata":
        if not isinstance(other, UsageMetadata):
            return NotImplemented
        return UsageMetadata(*(a + b for a, b in zip(_usage_tuple(self), _usage_tuple(other))))

    def __sub__(self, other: "UsageMetadata") -> "UsageMetadata":
        if not isinstance(other, UsageMetadata):
            return NotImplemented
        return UsageMetadata(*(a - b for a, b in zip(_usage_tuple(self), _usage_tuple(other))))

    def __radd__(self, other):  # sum() starts from 0
        if other == 0:
            return UsageMetadata(*_usage_tuple(self))
        return NotImplemented

    @property
    def output_token_count(self) -> int:
        """Every generated token: candidates plus thoughts."""
        return self.candidates_token_count + self.thoughts_token_count

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "UsageMetadata | None":
        if d is None:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: int(v or 0) for k, v in d.items() if k in names})


def _usage_tuple(u: UsageMetadata) -> tuple[int, int, int, int, int]:
    return (
        u.prompt_token_count,
        u.candidates_token_count,
        u.total_token_count,
        u.cached_content_token_count,
        u.thoughts_token_count,
    )


@dataclass
class Step:
    """One logical event of a turn; see the module docstring for conventions."""

    id: str = ""
    step_index: int = 0
    type: StepType = StepType.UNKNOWN
    source: StepSource = StepSource.UNKNOWN
    target: StepTarget = StepTarget.UNKNOWN
    status: StepStatus = StepStatus.ACTIVE
    content: str = ""
    content_delta: str = ""
    thinking: str = ""
    thinking_delta: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: str = ""
    is_complete_response: bool | None = None
    structured_output: Any = None
    usage_metadata: UsageMetadata | None = None
    cascade_id: str = ""
    trajectory_id: str = ""
    http_code: int = 0
    # nbagent additions
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    turn: int = -1
    metadata: dict = field(default_factory=dict)

    @property
    def duration(self) -> float | None:
        """Seconds from creation to finish, once finished."""
        if self.finished_at is None:
            return None
        return self.finished_at - self.created_at

    def copy(self, **changes: Any) -> "Step":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """A JSON-ready dict (deltas dropped: they are transient)."""
        return {
            "id": self.id,
            "step_index": self.step_index,
            "type": self.type.value,
            "source": self.source.value,
            "target": self.target.value,
            "status": self.status.value,
            "content": self.content,
            "thinking": self.thinking,
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "error": self.error,
            "is_complete_response": self.is_complete_response,
            "structured_output": self.structured_output,
            "usage_metadata": None if self.usage_metadata is None else self.usage_metadata.to_dict(),
            "cascade_id": self.cascade_id,
            "trajectory_id": self.trajectory_id,
            "http_code": self.http_code,
            "created_at": self.created_at,
            "finished_at": self.finished_at,
            "turn": self.turn,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Step":
        return cls(
            id=d.get("id", ""),
            step_index=int(d.get("step_index", 0)),
            type=StepType(d.get("type", "UNKNOWN")),
            source=StepSource(d.get("source", "UNKNOWN")),
            target=StepTarget(d.get("target", "UNKNOWN")),
            status=StepStatus(d.get("status", "ACTIVE")),
            content=d.get("content", ""),
            thinking=d.get("thinking", ""),
            tool_calls=[ToolCall.from_dict(c) for c in d.get("tool_calls", [])],
            error=d.get("error", ""),
            is_complete_response=d.get("is_complete_response"),
            structured_output=d.get("structured_output"),
            usage_metadata=UsageMetadata.from_dict(d.get("usage_metadata")),
            cascade_id=d.get("cascade_id", ""),
            trajectory_id=d.get("trajectory_id", ""),
            http_code=int(d.get("http_code") or 0),
            created_at=float(d.get("created_at") or 0.0),
            finished_at=d.get("finished_at"),
            turn=int(d.get("turn", -1)),
            metadata=d.get("metadata") or {},
        )


@dataclass(frozen=True)
class Thought:
    """A fragment of the model's reasoning."""

    step_index: int
    text: str


@dataclass(frozen=True)
class Text:
    """A fragment of the model's answer to the user."""

    step_index: int
    text: str


@dataclass
class ChatResponse:
    """The result of a whole turn."""

    text: str = ""
    thinking: str = ""
    steps: list[Step] = field(default_factory=list)
    usage_metadata: UsageMetadata = field(default_factory=UsageMetadata)
    finish_reason: FinishReason = FinishReason.STOP
    structured_output: Any = None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [c for s in self.steps if s.source == StepSource.MODEL for c in s.tool_calls]

    def __str__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return self.text
