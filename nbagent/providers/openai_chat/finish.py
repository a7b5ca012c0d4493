"""Chat Completions ``finish_reason`` values -> ``FinishReason``."""

from __future__ import annotations

from ...core.steps import FinishReason

FINISH_REASONS = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def finish_reason(raw: str | None, *, called_tools: bool, refused: bool = False) -> FinishReason:
    """A missing reason means stop (tool_calls when tools were called); an unknown one is OTHER;
    a refusal that ends with ``stop`` is CONTENT_FILTER."""
    if raw is None:
        reason = FinishReason.TOOL_CALLS if called_tools else FinishReason.STOP
    else:
        reason = FINISH_REASONS.get(raw, FinishReason.OTHER)
    return FinishReason.CONTENT_FILTER if refused and reason == FinishReason.STOP else reason
