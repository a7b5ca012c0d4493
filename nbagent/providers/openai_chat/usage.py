"""Chat Completions usage objects -> ``UsageMetadata``."""

from __future__ import annotations

from typing import Any

from ...core.steps import UsageMetadata


def normalize_usage(raw: dict) -> UsageMetadata:
    """The UsageMetadata of a Chat Completions usage object.

    ``completion_tokens`` includes reasoning, so candidates = completion -
    reasoning; a reasoning count larger than the completion count (seen on
    OpenRouter) is capped so that candidates + thoughts == completion_tokens.
    DeepSeek's ``prompt_cache_hit_tokens`` counts as cached when
    ``prompt_tokens_details`` has no ``cached_tokens``.
    """
    prompt = _int(raw.get("prompt_tokens"))
    completion = _int(raw.get("completion_tokens"))
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cached = prompt_details.get("cached_tokens")
    if cached is None:
        cached = raw.get("prompt_cache_hit_tokens")
    reasoning = _int(completion_details.get("reasoning_tokens"))
    if completion:
        reasoning = min(reasoning, completion)
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=max(0, completion - reasoning),
        total_token_count=_int(raw.get("total_tokens")) or prompt + completion,
        cached_content_token_count=_int(cached),
        thoughts_token_count=reasoning,
        cache_write_token_count=_int(prompt_details.get("cache_write_tokens")),
    )


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
