"""Prices of the rows of a usage table: each distinct (model, provider) looked up once.

The rates of a row are USD per 1M tokens in the order of :func:`pricing.token_cost`
(input, cached input, cache write, output), NaN where the model has no price. A
tiered price (more per token above a prompt size) takes the tier of the row's
input tokens per model call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping, Sequence


@dataclass
class RowPrices:
    rates: Any  # float64 array (n, 4): input, cached, cache write, output; NaN = no price
    sources: list  # price_source per pair (str | None)
    context_windows: Any  # float64 array: the catalog's context window, NaN = unknown


def row_prices(codes: Any, pairs: Sequence[tuple[str, str]], pricing: Mapping | None, input_tokens: Any,
               model_calls: Any) -> RowPrices:
    """Rates, price source and catalog context window of every row; ``codes`` index each row's
    (model, provider) in ``pairs``."""
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
    n = len(codes)
    row_rates = rates[codes] if n else np.zeros((0, 4))
    if tiered:
        per_call = np.asarray(input_tokens, dtype=np.float64) / np.maximum(np.asarray(model_calls), 1)
        for k, price in tiered:
            for start, tier in price.tiers:  # ascending: a later tier overwrites an earlier one
                rows = (codes == k) & (per_call > start)
                row_rates[rows] = _rates(tier)
    return RowPrices(row_rates, sources, windows[codes] if n else np.zeros(0))


def _rates(price: Any) -> tuple[float, float, float, float]:
    return price.input, price.cached_rate, price.cache_write_rate, price.output
