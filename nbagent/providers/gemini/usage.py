"""Gemini ``usageMetadata`` -> ``UsageMetadata``."""

from __future__ import annotations

from ...core.steps import UsageMetadata


def normalize_usage(raw: dict) -> UsageMetadata:
    """Gemini ``usageMetadata`` -> UsageMetadata (candidates exclude thoughts)."""
    prompt = int(raw.get("promptTokenCount") or 0) + int(raw.get("toolUsePromptTokenCount") or 0)
    candidates = int(raw.get("candidatesTokenCount") or 0)
    thoughts = int(raw.get("thoughtsTokenCount") or 0)
    total = int(raw.get("totalTokenCount") or 0) or prompt + candidates + thoughts
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=candidates,
        total_token_count=total,
        cached_content_token_count=int(raw.get("cachedContentTokenCount") or 0),
        thoughts_token_count=thoughts,
    )
