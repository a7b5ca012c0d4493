"""Messages API usage objects -> ``UsageMetadata``."""

from __future__ import annotations

from ...core.steps import UsageMetadata


def normalize_usage(raw: dict) -> UsageMetadata:
    """Anthropic usage -> UsageMetadata (prompt includes cache reads and writes)."""
    inp = int(raw.get("input_tokens") or 0)
    read = int(raw.get("cache_read_input_tokens") or 0)
    write = int(raw.get("cache_creation_input_tokens") or 0)
    out = int(raw.get("output_tokens") or 0)
    details = raw.get("output_tokens_details") or {}
    thinking = int(details.get("thinking_tokens") or 0) if isinstance(details, dict) else 0
    prompt = inp + read + write
    return UsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=max(0, out - thinking),
        total_token_count=prompt + out,
        cached_content_token_count=read,
        thoughts_token_count=thinking,
        cache_write_token_count=write,
    )
