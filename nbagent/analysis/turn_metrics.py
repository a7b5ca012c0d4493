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
        from .row_prices import pair_prices

        return pair_prices(self.a.pairs, self.pricing)

    def _rates(self, rows: slice) -> Any:
        a = self.a
        return self.prices.row_rates(a.pair[rows], a.input[rows], a.model_calls[rows])

    @property
    def cost_usd(self) -> Any:
        from .pricing import token_cost
        from .row_prices import blockwise

        a = self.a

        def block(rows: slice) -> Any:
            r = self._rates(rows)
            return token_cost(r[:, 0], r[:, 1], r[:, 2], r[:, 3], a.input[rows], a.cached[rows], a.written[rows],
                              a.generated[rows])
        return blockwise(len(a.pair), block)

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
        from .row_prices import blockwise

        a = self.a
        return blockwise(len(a.pair), lambda rows: saved_usd(self._rates(rows), a.cached[rows], a.written[rows]))

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

        window = self.prices.windows.take(self.a.pair) if len(self.a.pair) else np.zeros(0)
        np.copyto(window, self.a.window, where=~np.isnan(self.a.window))  # the record's own wins
        return window

    @property
    def context_fill(self) -> Any:
        import numpy as np

        window, context = self.context_window, self.a.context
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((window > 0) & (context > 0), context / window, np.nan)
