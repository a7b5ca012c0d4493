"""Responses API usage objects -> ``UsageMetadata``."""

from __future__ import annotations

from typing import Any

from ...core.steps import UsageMetadata


def normalize_usage(raw: dict) -> UsageMetadata:
    """Responses usage -> UsageMetadata (input includes cached tokens, output includes reasoning)."""
    inp, out = _int(raw.get("input_tokens")), _int(raw.get("output_tokens"))
    in_details = raw.get("input_tokens_details") or {}
    out_details = raw.get("output_tokens_details") or {}
    reasoning = min(_int(out_details.get("reasoning_tokens")), out) if out else 0
    return UsageMetadata(
        prompt_token_count=inp,
        candidates_token_count=out - reasoning,
        total_token_count=_int(raw.get("total_tokens")) or inp + out,
        cached_content_token_count=_int(in_details.get("cached_tokens")),
        thoughts_token_count=reasoning,
        cache_write_token_count=_int(in_details.get("cache_write_tokens")),
    )


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
