"""Gemini ``finishReason`` values -> ``FinishReason``."""

from __future__ import annotations

from ...core.steps import FinishReason

_FILTERED = ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
             "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION")

FINISH_REASONS = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    **{name: FinishReason.CONTENT_FILTER for name in _FILTERED},
}


def finish_reason(raw: str | None, *, called_tools: bool) -> FinishReason:
    """The mapped reason (unknown: OTHER); Gemini says ``STOP`` after function calls too: TOOL_CALLS."""
    reason = FINISH_REASONS.get(raw or "", FinishReason.OTHER)
    return FinishReason.TOOL_CALLS if reason == FinishReason.STOP and called_tools else reason
