"""The usage ledger: one record per turn, never trimmed."""

from __future__ import annotations

from dataclasses import dataclass, field

from .steps import UsageMetadata


@dataclass
class TurnRecord:
    """What one turn cost and how it went.

    ``status`` is one of ``running``, ``done``, ``waiting`` (stopped for a
    tool result or an approval), ``error`` or ``interrupted``.
    """

    turn: int
    prompt: str = ""
    model: str = ""
    provider: str = ""
    started_at: float = 0.0
    finished_at: float | None = None
    first_token_at: float | None = None
    usage: UsageMetadata = field(default_factory=UsageMetadata)
    cache_write_tokens: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    finish_reason: str | None = None
    status: str = "running"
    error: str = ""
    http_code: int = 0

    @property
    def duration(self) -> float | None:
        if self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    @property
    def time_to_first_token(self) -> float | None:
        if self.first_token_at is None:
            return None
        return self.first_token_at - self.started_at

    @property
    def output_tokens_per_s(self) -> float | None:
        """Generated tokens per second after the first token arrived."""
        if self.finished_at is None or self.first_token_at is None:
            return None
        span = self.finished_at - self.first_token_at
        out = self.usage.output_token_count
        if span <= 0 or out <= 0:
            return None
        return out / span

    def to_dict(self) -> dict:
        return {
            "turn": self.turn,
            "prompt": self.prompt,
            "model": self.model,
            "provider": self.provider,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "first_token_at": self.first_token_at,
            "usage": self.usage.to_dict(),
            "cache_write_tokens": self.cache_write_tokens,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "finish_reason": self.finish_reason,
            "status": self.status,
            "error": self.error,
            "http_code": self.http_code,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "TurnRecord":
        d = dict(d)
        d["usage"] = UsageMetadata.from_dict(d.get("usage")) or UsageMetadata()
        return cls(**d)
