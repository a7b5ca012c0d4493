"""What the next request would cost before it is sent: ``conv.estimate(prompt)``, and spend so far.

The estimate anchors on what the provider reported: the last turn's ``context_tokens`` (its last
model call's input + output tokens) plus the tokens of the prompts sent since and of the new
prompt. With no reported usage yet it counts the whole request: system prompt, tool schemas,
model history and prompt. Counting uses the connection's tokenizer (about four characters a token
by default). Nothing is sent.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Mapping, Sequence

from ..core.chat_session import ChatSession
from ..core.compression import MESSAGE_OVERHEAD, Tokenizer, ToolDescription, count_tools
from ..core.growing_list import GrowingList, growth_mark
from ..core.ledger import TurnRecord
from ..core.steps import Step
from ..core.mathtext import escape_dollars

if TYPE_CHECKING:
    from .pricing import Price



@dataclass(frozen=True)
class Spend:
    """Dollars spent by a conversation's turns (one cost formula: ``pricing.get_price``)."""

    usd: float  # turns of a model without a known price count 0
    unpriced_turns: int  # how many turns had no known price


@dataclass(frozen=True)
class RequestEstimate:
    """Tokens and cost of the next request if ``prompt`` were sent now.

    ``cost_usd`` is the request's *input* cost at the model's uncached input rate (an upper bound
    when the provider caches the prefix; NaN when the price is unknown). The reply is not in it:
    ``expected_cost_usd`` adds ``expected_output_tokens`` (the mean generated tokens of earlier
    turns, 0 before the first) at the output rate, and is what budgets check.
    """

    model: str
    prompt_tokens: int  # the new prompt alone
    context_tokens: int  # tokens in context before the prompt (system, tools, history)
    context_window: int | None  # None: unknown
    cost_usd: float
    expected_output_tokens: int
    expected_cost_usd: float
    spent_usd: float
    unpriced_turns: int
    budget_usd: float | None
    anchored: bool  # True: on the provider-reported usage of a turn; False: everything counted

    @property
    def input_tokens(self) -> int:
        """Tokens the request would send: context plus the new prompt."""
        return self.context_tokens + self.prompt_tokens

    @property
    def context_fill(self) -> float | None:
        """Share of the context window the request fills (None: window unknown)."""
        return self.input_tokens / self.context_window if self.context_window else None

    @property
    def will_overflow(self) -> bool:
        """The request plus the expected reply would not fit the window."""
        window = self.context_window
        return bool(window) and window is not None and self.input_tokens + self.expected_output_tokens > window

    @property
    def over_budget(self) -> bool:
        """Spent plus ``expected_cost_usd`` (NaN counted 0) would exceed ``budget_usd``."""
        if self.budget_usd is None:
            return False
        return self.spent_usd + _known(self.expected_cost_usd) > self.budget_usd

    def summary(self) -> str:
        """One plain line: tokens, window, cost, spend and budget."""
        parts = [f"~{self.input_tokens:,} input tokens"]
        if self.context_window:
            parts.append(f"{self.context_fill:.1%} of {self.context_window:,}"
                         + (" (likely overflow)" if self.will_overflow else ""))
        parts.append("cost unknown (no price for this model)" if math.isnan(self.cost_usd)
                     else f"~{usd(self.expected_cost_usd)} with the reply ({usd(self.cost_usd)} input)")
        spent = f"spent {usd(self.spent_usd)}"
        if self.unpriced_turns:
            spent += f" ({self.unpriced_turns} turn(s) without a price counted $0)"
        if self.budget_usd is not None:
            spent += f" of {usd(self.budget_usd)}" + (" — over budget" if self.over_budget else "")
        return "; ".join(parts + [spent])

    def __repr__(self) -> str:
        return f"<RequestEstimate {self.model or '?'}: {self.summary()}>"

    def _repr_markdown_(self) -> str:
        return f"**Estimate for the next request** ({_md(self.model) or 'unknown model'}): {_md(self.summary())}"


def usd(x: float) -> str:
    """Dollars for people: more digits for small amounts."""
    if x is None or math.isnan(x):
        return "unknown"
    return f"${x:.4f}" if abs(x) < 0.01 else f"${x:.3f}" if abs(x) < 1 else f"${x:,.2f}"


def _md(text: str) -> str:
    """Markdown showing ``text`` as it is; its dollars are money, not math (core/mathtext.py)."""
    return escape_dollars("".join("\\" + c if c in "\\`*_{}[]()#+-.!<>|~" else c for c in text))


def _known(x: float) -> float:
    return 0.0 if x is None or math.isnan(x) else x


def turn_cost(rec: TurnRecord, pricing: Mapping | None = None) -> float:
    """USD of one turn from its usage (NaN when the model has no known price)."""
    from .pricing import get_price

    return priced_turn_cost(rec, get_price(rec.model, rec.provider, pricing))


def priced_turn_cost(rec: TurnRecord, price: Price | None) -> float:
    """USD of one turn at ``price`` (its model's; NaN when None)."""
    if price is None:
        return math.nan
    per_call = rec.usage.prompt_token_count / max(rec.model_calls, 1)  # the tier rule of usage_df
    return float(price.at(per_call).usage_cost(rec.usage))


def spend(turns: Sequence[TurnRecord], pricing: Mapping | None = None) -> Spend:
    """Sum of the turns' costs; turns without a known price count 0 and are counted."""
    return LedgerMemo().totals(turns, pricing).spent


@dataclass(frozen=True)
class LedgerTotals:
    """What estimates and budgets read of a whole ledger."""

    spent: Spend
    expected_output_tokens: int  # the mean generated tokens of the turns that generated any (0: none)


class LedgerMemo:
    """:class:`LedgerTotals` of a growing ledger, kept between calls so a call costs the new turns.

    Each turn is priced once, and kept while it stays in the ledger and the prices of the ledger's
    models stay the same (looked up again each call, one per model: overrides and ``set_price``
    are seen). The newest turn is always recomputed (it may still be running); a ledger that is not
    the previous one grown at its end (cleared, loaded) is computed afresh.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, pricing: Mapping | None) -> None:
        self._turns: list[TurnRecord] = []
        self._sums: list[tuple[float, int, int, int]] = []  # running (usd, unpriced, generated, generating turns)
        self._pricing = pricing
        self._prices: dict[tuple[str, str], Price | None] = {}
        self._mark: tuple[GrowingList, int] | None = None  # the ledger last seen and its change count

    def totals(self, turns: Sequence[TurnRecord], pricing: Mapping | None = None) -> LedgerTotals:
        with self._lock:  # the loop checks the budget while a widget may ask for an estimate
            return self._totals(turns, pricing)

    def _totals(self, turns: Sequence[TurnRecord], pricing: Mapping | None) -> LedgerTotals:
        if pricing is not self._pricing or self._prices_changed(pricing):
            self._reset(pricing)
        kept = self._kept(turns)
        del self._turns[kept:], self._sums[kept:]
        usd, unpriced, generated, generating = self._sums[-1] if self._sums else (0.0, 0, 0, 0)
        for rec in turns[kept:]:
            usage = rec.usage
            if usage.total_token_count or usage.prompt_token_count:  # else nothing reported: nothing to price
                cost = priced_turn_cost(rec, self._price(rec.model, rec.provider))
                if math.isnan(cost):
                    unpriced += 1
                else:
                    usd += cost
            out = usage.candidates_token_count + usage.thoughts_token_count
            if usage.candidates_token_count or usage.thoughts_token_count:
                generated, generating = generated + out, generating + 1
            self._turns.append(rec)
            self._sums.append((usd, unpriced, generated, generating))
        return LedgerTotals(Spend(usd, unpriced), round(generated / generating) if generating else 0)

    def _kept(self, turns: Sequence[TurnRecord]) -> int:
        """How many leading turns keep their sums: all but the newest of the previous call's, when
        ``turns`` starts with them (the same growing ledger unchanged but for its growth, else
        compared object by object at C speed)."""
        old = len(self._turns)
        previous, mark = self._mark, growth_mark(turns)
        self._mark = mark
        if len(turns) < old:
            return 0
        if mark is not None and previous is not None and mark[0] is previous[0] and mark[1] == previous[1]:
            return max(old - 1, 0)
        return max(old - 1, 0) if self._starts_as_before(turns) else 0

    def _starts_as_before(self, turns: Sequence[TurnRecord]) -> bool:
        """Whether ``turns`` starts with the turns of the previous call (compared object by object)."""
        seen, old = self._turns, len(self._turns)
        seen.extend(turns[old:])  # the new turns: trivially the same objects
        same = seen == (turns if isinstance(turns, list) else list(turns))
        del seen[old:]
        return same

    def _price(self, model: str, provider: str) -> Price | None:
        key = (model, provider)
        if key not in self._prices:
            from .pricing import get_price

            self._prices[key] = get_price(model, provider, self._pricing)
        return self._prices[key]

    def _prices_changed(self, pricing: Mapping | None) -> bool:
        from .pricing import get_price

        return any(get_price(model, provider, pricing) != price for (model, provider), price in self._prices.items())


@dataclass(frozen=True)
class RequestInputs:
    """What an estimate reads: the ledger, and what the next request would carry."""

    turns: Sequence[TurnRecord]
    model: str  # "" when the conversation has no connection
    provider: str
    tokenizer: Tokenizer
    tools: Sequence[ToolDescription]
    chat_session: ChatSession | None  # None: a connection without a model history (a script)
    history: Sequence[Step]  # counted instead of the model history when there is none
    declared_window: int | None  # the window the connection reports, if any
    budget_usd: float | None
    pricing: Mapping | None
    ledger: LedgerMemo | None = None  # kept between estimates of one conversation (None: computed afresh)


def context_window_of(turns: Sequence[TurnRecord], declared: int | None, model: str,
                      provider: str) -> int | None:
    """The window: the ledger's provider-reported one, else the declared one, else the price data's."""
    for rec in reversed(turns):
        if rec.context_window:
            return int(rec.context_window)
    if isinstance(declared, int) and declared > 0:
        return declared
    from .pricing import context_window

    return context_window(model, provider) if model else None


def identity(inputs: RequestInputs) -> tuple[str, str]:
    """The model and provider the next request goes to (else the last turn's)."""
    if not inputs.model and inputs.turns:
        return inputs.turns[-1].model, inputs.turns[-1].provider
    return inputs.model, inputs.provider


def _context_tokens(inputs: RequestInputs) -> tuple[int, bool]:
    """Tokens in context before a new prompt, and whether they rest on reported usage."""
    turns, tokenizer = inputs.turns, inputs.tokenizer
    for i in range(len(turns) - 1, -1, -1):
        if turns[i].context_tokens > 0:  # reported: add the prompts sent after that turn
            later = sum(tokenizer.count(t.prompt) + MESSAGE_OVERHEAD for t in turns[i + 1:])
            return turns[i].context_tokens + later, True
    total = count_tools(tokenizer, inputs.tools)
    if inputs.chat_session is not None:
        return total + tokenizer.count_session(inputs.chat_session), False
    # a connection without a model history (e.g. MockConnection): count what the steps show
    return total + sum(tokenizer.count(s.content) + MESSAGE_OVERHEAD for s in inputs.history if s.content), False


def estimate_request(inputs: RequestInputs, prompt: str) -> RequestEstimate:
    """The :class:`RequestEstimate` of sending ``prompt`` with ``inputs`` now (nothing is sent)."""
    from .pricing import get_price

    tokenizer = inputs.tokenizer
    prompt_tokens = tokenizer.count(prompt or "") + MESSAGE_OVERHEAD
    context, anchored = _context_tokens(inputs)
    model, provider = identity(inputs)
    turns = inputs.turns
    ledger = (inputs.ledger or LedgerMemo()).totals(turns, inputs.pricing)
    out, spent = ledger.expected_output_tokens, ledger.spent
    price = get_price(model, provider, inputs.pricing) if model else None
    if price is None:
        cost = expected = math.nan
    else:
        cost = float(price.cost(input_tokens=context + prompt_tokens))
        expected = cost + float(price.cost(output_tokens=out))
    return RequestEstimate(
        model=model, prompt_tokens=prompt_tokens, context_tokens=context,
        context_window=context_window_of(turns, inputs.declared_window, model, provider), cost_usd=cost,
        expected_output_tokens=out, expected_cost_usd=expected, spent_usd=spent.usd,
        unpriced_turns=spent.unpriced_turns, budget_usd=inputs.budget_usd, anchored=anchored,
    )
