"""Messages API ``stop_reason`` values -> ``FinishReason``."""

from __future__ import annotations

from ...core.steps import FinishReason

FINISH_REASONS = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
}


def finish_reason(raw: str | None, *, called_tools: bool) -> FinishReason:
    """The mapped stop reason (unknown: OTHER); ``tool_use`` without a client tool call (only the
    structured-output tool was called) is STOP."""
    reason = FINISH_REASONS.get(raw or "", FinishReason.OTHER)
    return FinishReason.STOP if reason == FinishReason.TOOL_CALLS and not called_tools else reason
