"""The derived per-turn columns of the usage table: cost, price source, prompt cache, context gauge.

Computed on whole columns at once from the token arrays the column table
already read (see :mod:`columns`); each (model, provider) is priced once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any
from collections.abc import Mapping

from .coded import Coded


@dataclass
class TurnArrays:
    """Float arrays, one value per turn (``window``: the record's, NaN when unknown)."""

    turn: Any
    started: Any
    finished: Any
    input: Any
    cached: Any
    written: Any
    generated: Any
    model_calls: Any
    context: Any
    window: Any
    pair: Any  # int64: each turn's index into ``pairs``
    pairs: list[tuple[str, str]]  # the distinct (model, provider) pairs
    prefix_change: Any  # Coded: the PrefixChange (or None) at the turn's first model call


class TurnMetrics:
    def __init__(self, pricing: Mapping | None, arrays: TurnArrays) -> None:
        self.pricing = pricing
        self.a = arrays

    @cached_property
    def prices(self) -> Any:
        from .row_prices import row_prices

        return row_prices(self.a.pair, self.a.pairs, self.pricing, self.a.input, self.a.model_calls)

    @property
    def cost_usd(self) -> Any:
        from .pricing import token_cost

        r, a = self.prices.rates, self.a
        return token_cost(r[:, 0], r[:, 1], r[:, 2], r[:, 3], a.input, a.cached, a.written, a.generated)

    @property
    def price_source(self) -> Any:
        return Coded(self.a.pair, self.prices.sources)

    @property
    def cache_hit_ratio(self) -> Any:
        from .cache import hit_ratio

        return hit_ratio(self.a.cached, self.a.input)

    @property
    def cache_saved_usd(self) -> Any:
        from .cache import saved_usd

        return saved_usd(self.prices.rates, self.a.cached, self.a.written)

    @cached_property
    def _busts(self) -> tuple[Any, Any]:
        from .cache import busts
        a = self.a
        busted, cause, causes = busts(a.turn, a.started, a.finished, a.input, a.cached, a.written, a.context,
                                      a.model_calls, a.prefix_change.codes, a.prefix_change.values)
        return busted, Coded(cause, causes)

    @property
    def cache_busted(self) -> Any:
        return self._busts[0]

    @property
    def cache_bust_cause(self) -> Any:
        return self._busts[1]

    @cached_property
    def context_window(self) -> Any:
        import numpy as np

        return np.where(np.isnan(self.a.window), self.prices.context_windows, self.a.window)

    @property
    def context_fill(self) -> Any:
        import numpy as np

        window, context = self.context_window, self.a.context
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((window > 0) & (context > 0), context / window, np.nan)
