"""What a reader takes from one agent log: its model calls, and the lines it skipped by reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any


@dataclass
class AgentCall:
    """One model call as an agent's log records it. ``input_tokens`` counts every input token
    (cache reads and writes included), ``output_tokens`` the generated tokens but reasoning."""

    at: float  # epoch seconds
    model: str
    provider: str
    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    tool_calls: int = 0
    prompt: str = ""
    message_id: str | None = None  # Claude Code: counted once per (message id, request id)
    request_id: str | None = None
    sidechain: bool = False  # a subagent's call (a Claude Code sidechain or /btw aside, a Codex subagent)
    fast: bool = False  # Claude Code's fast mode ("speed": "fast")

    @property
    def raw_total(self) -> int:
        return self.input_tokens + self.output_tokens + self.thinking_tokens

    def turn_dict(self, turn: int) -> dict:
        """The call as one turn of nbagent's ledger (``TurnRecord.to_dict``'s shape)."""
        return {
            "turn": turn, "prompt": self.prompt, "model": self.model, "provider": self.provider,
            "started_at": self.at, "finished_at": self.at, "model_calls": 1, "tool_calls": self.tool_calls,
            "status": "done",
            "usage": {"prompt_token_count": self.input_tokens, "candidates_token_count": self.output_tokens,
                      "total_token_count": self.raw_total, "cached_content_token_count": self.cached_tokens,
                      "thoughts_token_count": self.thinking_tokens,
                      "cache_write_token_count": self.cache_write_tokens},
        }


@dataclass
class AgentLog:
    """One log file read: its calls in file order and its skipped lines by reason."""

    source: str  # "claude-code", "codex", ...
    path: Path
    session_id: str
    project: str  # the project folder (Claude Code) or working folder (Codex)
    calls: list[AgentCall] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    subagent: bool = False  # the whole log is a subagent's (Codex; Claude Code marks each record)
    turns: list | None = field(default=None, repr=False, compare=False)  # the calls as ledger turns, once made


class Torn:
    """The value of a last line without its newline that is not whole JSON (a writer may be finishing it)."""


TORN = Torn()


MAX_LINE_BYTES = 64 << 20  # a longer line (a huge tool output) is skipped and counted, never parsed


class TooLong:
    """The value of a line over :data:`MAX_LINE_BYTES`."""


TOO_LONG = TooLong()


def unreadable(record: object) -> str:
    """Why a line that is not a JSON object is skipped."""
    if record is TOO_LONG:
        return f"line over {MAX_LINE_BYTES >> 20} MiB"
    return "torn last line" if record is TORN else "corrupt line"


def iso_seconds(value: Any) -> float | None:
    """Epoch seconds of an ISO 8601 timestamp ("2026-01-09T10:00:00.000Z"); None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def count_of(value: Any) -> int | None:
    """A token count as JSON gives it: a non-negative int (not a bool), else None."""
    return value if type(value) is int and value >= 0 else None
