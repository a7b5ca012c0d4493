"""How a Responses reply ended -> ``FinishReason``.

The API has no finish reason: a ``completed`` response stopped (or called tools, or refused), an
``incomplete`` one says why in ``incomplete_details.reason``, which ``FINISH_REASONS`` maps.
"""

from __future__ import annotations

from ...core.steps import FinishReason

FINISH_REASONS = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def finish_reason(status: str, *, incomplete_reason: str | None, called_tools: bool,
                  refused: bool) -> FinishReason:
    """An incomplete response: its reason mapped (unknown: OTHER); otherwise a refusal is CONTENT_FILTER,
    called tools TOOL_CALLS, anything else STOP."""
    if status == "incomplete":
        return FINISH_REASONS.get(incomplete_reason or "", FinishReason.OTHER)
    if refused:
        return FinishReason.CONTENT_FILTER
    return FinishReason.TOOL_CALLS if called_tools else FinishReason.STOP
