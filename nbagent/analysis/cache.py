"""Prompt-cache analytics per turn: hit ratio, dollars saved, and cache busts with their cause.

A turn's **predecessor** is the nearest earlier turn of the same conversation
that sent input tokens (turns that failed before any usage are skipped). Rows
belong to one conversation while their turn numbers count up by one, so the
turns of many sessions in one table (``load_sessions``) never mix.

A turn is **cache busted** when its predecessor had cache activity (reads or
writes), the turn itself sent input, and either the loop saw the request prefix
change at the turn's first model call (``prefix_change``) or the turn read less
than half of the prefix it could have reused: its cache reads per model call are
below ``BUST_FRACTION`` x the predecessor's ``context_tokens`` (the last
request's input plus its reply, which the next request starts with).

The **cause** of a bust is the turn's ``prefix_change`` (``system``, ``tools``,
``history``, ``compaction``, ``model``) when the loop recorded one; else
``expired`` when more than the cache lifetime passed between the predecessor's
end and the turn's start (``CACHE_TTL_S``: 5 minutes, Anthropic's default
cache and OpenAI's lower bound of 5-10 minutes of inactivity); else
``unknown`` (e.g. a provider that evicted early, or a prefix changed outside
nbagent's loop).
"""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

BUST_FRACTION = 0.5
CACHE_TTL_S = 300.0
EXPIRED = "expired"
UNKNOWN = "unknown"


def hit_ratio(cached: Any, input_tokens: Any) -> Any:
    """Cache reads / input tokens, NaN when the turn sent no input."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(input_tokens > 0, cached / input_tokens, np.nan)


def saved_usd(rates: Any, cached: Any, written: Any) -> Any:
    """USD the turn saved by prompt caching: reads cost less than input, writes cost more.

    ``cached * (input - cached_rate) - written * (write_rate - input)``, from
    rates per 1M tokens (see :mod:`row_prices`); NaN where the price is unknown.
    """
    return (cached * (rates[:, 0] - rates[:, 1]) - written * (rates[:, 2] - rates[:, 0])) / 1e6


def predecessors(turns: Any, input_tokens: Any) -> Any:
    """Each row's predecessor row (see the module docs), -1 for none."""
    import numpy as np

    n = len(turns)
    if not n:
        return np.zeros(0, dtype=np.int64)
    turns = np.asarray(turns, dtype=np.int64)
    segment = np.cumsum(np.r_[True, turns[1:] != turns[:-1] + 1])  # a new conversation starts
    sent = np.where(np.asarray(input_tokens) > 0, np.arange(n), -1)
    last = np.r_[-1, np.maximum.accumulate(sent)[:-1]]  # the last row before this one that sent input
    same = (last >= 0) & (segment[np.maximum(last, 0)] == segment)
    return np.where(same, last, -1)


def busts(turns: Any, started: Any, finished: Any, input_tokens: Any, cached: Any, written: Any,
          context_tokens: Any, model_calls: Any, change_codes: Any,
          changes: Sequence[Any]) -> tuple[Any, Any, list]:
    """Which turns were cache busted and why, see the module docs.

    ``change_codes`` index each row's ``prefix_change`` in ``changes`` (a PrefixChange or None).
    Returns the bool array ``cache_busted``, and each row's cause as a code into the list
    returned last (the changes, then ``expired``, ``unknown`` and None for rows not busted).
    """
    import numpy as np

    prev = predecessors(turns, input_tokens)
    has = prev >= 0
    p = np.maximum(prev, 0)
    active = has & ((cached[p] + written[p]) > 0) & (input_tokens > 0)
    reusable = np.where(context_tokens[p] > 0, context_tokens[p], input_tokens[p] / np.maximum(model_calls[p], 1))
    per_call = cached / np.maximum(model_calls, 1)
    named = np.array([c is not None and c != "" for c in changes], dtype=bool)
    changed = named[change_codes] if len(changes) else np.zeros(len(prev), dtype=bool)
    busted = active & (changed | (per_call < BUST_FRACTION * reusable))
    ended = np.where(np.isnan(finished[p]), started[p], finished[p])
    with np.errstate(invalid="ignore"):
        expired = (started - ended) > CACHE_TTL_S
    k = len(changes)
    cause = np.where(changed, change_codes, np.where(expired, k, k + 1))
    return busted, np.where(busted, cause, k + 2), [*changes, EXPIRED, UNKNOWN, None]
