"""When the model history grows past its budget, compress it before the next model call."""

from __future__ import annotations

from typing import Any
from collections.abc import Iterable

from ..core.chat_session import ChatSession
from ..core.compression import count_tools
from ..core.errors import ContextLengthExceeded, NbagentError
from ..core.steps import CompactionStats

DEFAULT_CONTEXT_WINDOW = 128_000
TARGET_FRACTION = 0.6  # compress to this share of the budget, so it is not redone every call
BUDGET_FRACTION = 0.75  # the share of the window (less the reply's reserve) a request may fill


def compaction_budget(context_window: int | None, max_tokens: int | None, fraction: float = BUDGET_FRACTION) -> int:
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


def prompt_overflow(prompt: str, system: str | None, tokenizer: Any, tool_specs: Iterable[Any],
                    context_window: int | None, max_tokens: int | None) -> NbagentError | None:
    """A ``context_length`` error when ``prompt`` alone (with the system prompt, the tool
    definitions and the reply's reserve) cannot fit the model's known window: compaction never
    shortens the new prompt, so sending it would only fail at the server. None when it fits or
    the window is unknown."""
    if not context_window:
        return None
    reserve = max_tokens or min(4096, context_window // 4)
    need = tokenizer.count(prompt) + tokenizer.count(system or "") + count_tools(tokenizer, tool_specs)
    if need + reserve <= context_window:
        return None
    return ContextLengthExceeded(
        f"the prompt is too long for the model: about {need:,} tokens with the system prompt and tools, "
        f"{reserve:,} kept for the reply, window {context_window:,} tokens; nothing was sent "
        f"({len(prompt):,} characters)")
