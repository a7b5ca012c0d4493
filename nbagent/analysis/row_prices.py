"""Prices of the rows of a usage table: each distinct (model, provider) looked up once.

The rates of a row are USD per 1M tokens in the order of :func:`pricing.token_cost`
(input, cached input, cache write, output), NaN where the model has no price. A
tiered price (more per token above a prompt size) takes the tier of the row's
input tokens per model call.

A million rows' rates are a (n, 4) array of 32 MB, fresh memory each time; the columns
priced from them (cost, cache savings) are computed a block of rows at a time
(:func:`blockwise`), each block's rates and temporaries small enough to be reused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Mapping, Sequence

BLOCK = 65536  # rows priced at a time


@dataclass
class PairPrices:
    rates: Any  # float64 array (pairs, 4): input, cached, cache write, output; NaN = no price
    sources: list  # price_source per pair (str | None)
    windows: Any  # float64 array (pairs): the catalog's context window, NaN = unknown
    tiered: list[tuple[int, Any]]  # (pair, Price) of the tiered prices

    def row_rates(self, codes: Any, input_tokens: Any, model_calls: Any) -> Any:
        """The (rows, 4) rates of rows whose (model, provider) are ``codes`` into the pairs."""
        import numpy as np

        row_rates = self.rates.take(codes, axis=0) if len(codes) else np.zeros((0, 4))
        if self.tiered:
            per_call = np.asarray(input_tokens, dtype=np.float64) / np.maximum(np.asarray(model_calls), 1)
            for k, price in self.tiered:
                for start, tier in price.tiers:  # ascending: a later tier overwrites an earlier one
                    rows = (codes == k) & (per_call > start)
                    row_rates[rows] = _rates(tier)
        return row_rates


def pair_prices(pairs: Sequence[tuple[str, str]], pricing: Mapping | None) -> PairPrices:
    """Rates, price source and catalog context window of each (model, provider) pair."""
    import numpy as np

    from . import pricing as prices

    rates = np.full((len(pairs), 4), np.nan)
    sources: list = []
    windows = np.full(len(pairs), np.nan)
    tiered: list[tuple[int, Any]] = []
    for k, (model, provider) in enumerate(pairs):
        price = prices.get_price(model, provider, pricing)
        sources.append(prices.price_source(model, provider, pricing))
        window = prices.context_window(model, provider)
        windows[k] = math.nan if window is None else window
        if price is not None:
            rates[k] = _rates(price)
            if price.tiers:
                tiered.append((k, price))
    return PairPrices(rates, sources, windows, tiered)


def blockwise(n: int, compute: Callable[[slice], Any]) -> Any:
    """A float64 column of ``n`` rows, ``compute(rows)`` giving the values of each block of rows."""
    import numpy as np

    out = np.empty(n)
    for start in range(0, n, BLOCK):
        rows = slice(start, min(start + BLOCK, n))
        out[rows] = compute(rows)
    return out


def _rates(price: Any) -> tuple[float, float, float, float]:
    return price.input, price.cached_rate, price.cache_write_rate, price.output
