"""A usage summary with totals, and a ready plot of tokens and cost per turn."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any
from collections.abc import Mapping

from ..core.distribution import install_hint
from ..core.errors import ConfigError
from ..core.ledger import TurnRecord
from ..core.steps import TurnStatus, UsageMetadata
from ..core.mathtext import escape_dollars
from .frames import require_pandas, usage_frame


@dataclass
class UsageSummary:
    """Totals over turns. ``cost_usd`` sums the priced turns; ``unpriced_turns``
    counts the turns whose model has no price (NaN when no turn is priced);
    ``price_sources`` says where the prices came from (see ``pricing.price_source``)."""

    turns: int = 0
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    thinking_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float = math.nan
    unpriced_turns: int = 0
    mean_ttft_s: float = math.nan
    mean_output_tokens_per_s: float = math.nan
    duration_s: float = 0.0
    errors: int = 0
    interrupted: int = 0
    models: list = field(default_factory=list)
    price_sources: list = field(default_factory=list)

    @property
    def usage(self) -> UsageMetadata:
        """The totals as a ``UsageMetadata`` (equal to ``conv.total_usage``)."""
        return UsageMetadata(
            prompt_token_count=self.input_tokens,
            candidates_token_count=self.output_tokens,
            total_token_count=self.total_tokens,
            cached_content_token_count=self.cached_tokens,
            thoughts_token_count=self.thinking_tokens,
            cache_write_token_count=self.cache_write_tokens,
        )

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_series(self):
        pd = require_pandas()
        d = self.to_dict()
        d["models"] = ", ".join(self.models)
        return pd.Series(d, name="total", dtype=object)

    def _rows(self) -> list[tuple[str, str]]:
        def n(v):
            return f"{v:,}"

        def f(v, fmt):
            return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

        if math.isnan(self.cost_usd):
            cost = "unknown (no price for these models)"
        else:
            cost = f"${self.cost_usd:,.4f}"
            if self.unpriced_turns:
                cost += f" + {self.unpriced_turns} unpriced turn(s)"
            if self.price_sources:
                cost += f" (prices: {', '.join(self.price_sources)})"
        return [
            ("turns", n(self.turns) + (f" ({self.errors} error, {self.interrupted} interrupted)" if self.errors or self.interrupted else "")),
            ("models", ", ".join(self.models) or "–"),
            ("model calls / tool calls", f"{n(self.model_calls)} / {n(self.tool_calls)}"),
            ("input tokens", n(self.input_tokens) + f" ({n(self.cached_tokens)} cached, {n(self.cache_write_tokens)} cache writes)"),
            ("thinking tokens", n(self.thinking_tokens)),
            ("output tokens", n(self.output_tokens)),
            ("total tokens", n(self.total_tokens)),
            ("cost", cost),
            ("mean time to first token", f(self.mean_ttft_s, ".2f") + " s"),
            ("mean output tokens/s", f(self.mean_output_tokens_per_s, ".1f")),
            ("time in turns", f(self.duration_s, ".1f") + " s"),
        ]

    def _repr_markdown_(self) -> str:
        lines = ["| usage | total |", "|---|---|"]
        lines += [f"| {k} | {escape_dollars(v)} |" for k, v in self._rows()]  # money, not math
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from html import escape

        body = "".join(
            f"<tr><th style='text-align:left'>{escape(k)}</th><td style='text-align:right'>{escape(v)}</td></tr>"
            for k, v in self._rows()
        )
        return f"<table class='nbagent-usage-summary'><tbody>{body}</tbody></table>"

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self._rows())
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self._rows())


def usage_summary(records: list[TurnRecord], pricing: Mapping | None = None) -> UsageSummary:
    """Totals over the ledger (no pandas needed); displays as a table in notebooks."""
    from .pricing import get_price, price_source

    s = UsageSummary()
    prices: dict[tuple, Any] = {}
    ttfts, rates = [], []
    priced = False
    cost = 0.0
    models: dict[str, None] = {}
    sources: dict[str, None] = {}
    for r in records:
        u = r.usage
        s.turns += 1
        s.model_calls += r.model_calls
        s.tool_calls += r.tool_calls
        s.input_tokens += u.prompt_token_count
        s.cached_tokens += u.cached_content_token_count
        s.cache_write_tokens += u.cache_write_token_count
        s.thinking_tokens += u.thoughts_token_count
        s.output_tokens += u.candidates_token_count
        s.total_tokens += u.total_token_count
        if r.model:
            models[r.model] = None
        key = (r.model, r.provider)
        if key not in prices:
            prices[key] = (get_price(r.model or "", r.provider or "", pricing),
                           price_source(r.model or "", r.provider or "", pricing))
        price, source = prices[key]
        if price is None:
            s.unpriced_turns += 1
        else:
            priced = True
            sources[source] = None
            cost += price.at(u.prompt_token_count / max(r.model_calls, 1)).usage_cost(u)  # the tier, as usage_df
        if r.time_to_first_token is not None:
            ttfts.append(r.time_to_first_token)
        if r.output_tokens_per_s is not None:
            rates.append(r.output_tokens_per_s)
        if r.duration is not None:
            s.duration_s += r.duration
        s.errors += r.status == TurnStatus.ERROR
        s.interrupted += r.status == TurnStatus.INTERRUPTED
    s.cost_usd = cost if priced else math.nan
    s.mean_ttft_s = sum(ttfts) / len(ttfts) if ttfts else math.nan
    s.mean_output_tokens_per_s = sum(rates) / len(rates) if rates else math.nan
    s.models = list(models)
    s.price_sources = list(sources)
    return s


# --- plot ------------------------------------------------------------------------------


def plot_usage(records: list[TurnRecord], pricing: Mapping | None = None):
    """A matplotlib Figure: tokens per turn stacked by kind, and cost over turns."""
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(
            f"plot_usage needs matplotlib: {install_hint('plot')}"
        ) from None
    pd = require_pandas()
    import numpy as np

    df = usage_frame(records, pricing=pricing)
    fig = Figure(figsize=(9, 6), layout="constrained")
    ax_tokens, ax_cost = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    fig.suptitle("nbagent usage per turn")
    if df.empty:
        ax_tokens.text(0.5, 0.5, "no turns yet", ha="center", va="center", transform=ax_tokens.transAxes)
        return fig
    x = df.index.to_numpy()
    inp = df["input_tokens"].to_numpy(dtype=np.int64, na_value=0)
    cached = df["cached_tokens"].to_numpy(dtype=np.int64, na_value=0)
    kinds = pd.DataFrame(
        {
            "input (uncached)": np.maximum(inp - cached, 0),
            "cached input": cached,
            "thinking": df["thinking_tokens"].to_numpy(dtype=np.int64, na_value=0),
            "output": df["output_tokens"].to_numpy(dtype=np.int64, na_value=0),
        },
        index=pd.Index(x, name="turn"),
    )
    colors = ["#4c72b0", "#8fb0de", "#dd8452", "#55a868"]
    if len(df) <= 60:
        kinds.plot.bar(stacked=True, ax=ax_tokens, color=colors, width=0.8, rot=0)
        positions = np.arange(len(df))
    else:  # many turns: bars get unreadable
        kinds.plot.area(ax=ax_tokens, color=colors, linewidth=0)
        positions = x
    ax_tokens.set_ylabel("tokens")
    ax_tokens.legend(loc="upper left", fontsize="small")
    _plot_cost(ax_cost, df["cost_usd"].to_numpy(dtype=np.float64), positions, many=len(df) > 60)
    ax_cost.set_xlabel("turn")
    return fig


def _plot_cost(ax_cost: Any, cost: Any, positions: Any, *, many: bool) -> None:
    """The cost panel: per turn and cumulative, or why there is nothing to draw."""
    import numpy as np

    if np.isnan(cost).all():
        ax_cost.text(0.5, 0.5, "cost unknown: no price for these models", ha="center", va="center",
                     transform=ax_cost.transAxes)
    elif not np.nan_to_num(cost).any():  # free models (local, demo): say so instead of empty axes
        ax_cost.text(0.5, 0.5, "no cost: these models are free", ha="center", va="center",
                     transform=ax_cost.transAxes)
    else:
        per_turn = np.nan_to_num(cost)
        ax_cost.bar(positions, per_turn, color="#c44e52", alpha=0.5, label="per turn", width=1.0 if many else 0.8)
        ax_cost.set_ylabel("USD per turn")
        ax_cum = ax_cost.twinx()
        ax_cum.plot(positions, np.cumsum(per_turn), color="#333333", marker=None if many else ".",
                    label="cumulative")
        ax_cum.set_ylabel("cumulative USD")
        ax_cum.set_ylim(bottom=0)
        h1, l1 = ax_cost.get_legend_handles_labels()
        h2, l2 = ax_cum.get_legend_handles_labels()
        ax_cost.legend(h1 + h2, l1 + l2, loc="upper left", fontsize="small")


# --- export and many sessions ----------------------------------------------------------
