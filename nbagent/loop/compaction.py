"""When the wire history grows past its budget, compress it before the next model call."""

from __future__ import annotations

from typing import Any, Iterable

from ..core.chat_session import ChatSession
from ..core.compression import count_tools
from ..core.steps import CompactionStats

DEFAULT_CONTEXT_WINDOW = 128_000
TARGET_FRACTION = 0.6  # compress to this share of the budget, so it is not redone every call


def compaction_budget(context_window: int | None, max_tokens: int | None, fraction: float) -> int:
    """Tokens the request may use: ``fraction`` of the window less the reply's reserve."""
    window = context_window or DEFAULT_CONTEXT_WINDOW
    reserve = max_tokens or min(4096, window // 4)
    return max(256, int((window - reserve) * fraction))


def compact_if_needed(session: ChatSession, tokenizer: Any, tool_specs: Iterable[Any],
                      budget: int) -> CompactionStats | None:
    """Compress ``session`` in place when it (with the tool definitions) exceeds ``budget``."""
    tools_tokens = count_tools(tokenizer, tool_specs)
    before = tokenizer.count_session(session) + tools_tokens
    if before <= budget:
        return None
    after = session.compress(int(budget * TARGET_FRACTION) - tools_tokens, tokenizer=tokenizer) + tools_tokens
    return CompactionStats(before, after, budget)
