"""Budgets: what a conversation may spend, checked before every request a turn would send.

Before a turn opens, the spend so far (the ledger's turns priced with the one cost formula; turns
without a known price count $0) plus the request's expected cost (``estimate(prompt)``) is
compared with the budget. Over it, the turn is refused with ``NbagentError(kind="budget")``:
nothing is sent, no turn is recorded, and the conversation stays usable. To go on: raise or clear
the budget (``conv.budget.usd = None``), or let one turn through with
``conv.budget.allow_over_once()`` (the widget's "Send anyway").

Inside a turn the loop asks :meth:`Budget.stop_reason` before each further model call (as
pydantic-ai checks its usage limits): once a round of tool calls has pushed the spend over the
budget, the turn ends INTERRUPTED there, the tool results stay in the history and the turn's
record says why.

The conversation's policy (core/turn_policy.py: a course's lesson hours and per-period budget) is
asked first, apart from this budget: neither ``allow_over_budget_once`` nor ``budget_usd = None``
lifts it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Mapping, Sequence

from ..core.errors import BudgetExceeded, ConfigError
from ..core.ledger import TurnRecord

if TYPE_CHECKING:
    from .estimate import LedgerMemo, RequestEstimate


class Budget:
    """Dollars a conversation may spend, its price overrides, and the checks against them."""

    def __init__(self, budget_usd: float | None = None, pricing: Mapping[str, Any] | None = None) -> None:
        self._usd: float | None = None
        self.usd = budget_usd
        self.pricing = pricing  # price overrides for estimates, budgets and the widget
        self._ledger: LedgerMemo | None = None
        self._over_once = False

    @property
    def usd(self) -> float | None:
        """The budget in dollars (None: no budget)."""
        return self._usd

    @usd.setter
    def usd(self, value: float | None) -> None:
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise ConfigError(f"budget_usd must be a number >= 0 or None, not {value!r}")
            value = float(value)
        self._usd = value

    @property
    def ledger(self) -> LedgerMemo:
        """The spend so far, kept between checks (a check costs the new turns). Made at first use: the
        estimate module (prices, token counts) is not imported for a conversation that has not
        needed a price yet (issue #32: a chat's first display)."""
        if self._ledger is None:
            from .estimate import LedgerMemo

            self._ledger = LedgerMemo()
        return self._ledger

    def spent(self, turns: Sequence[TurnRecord]) -> float:
        """Dollars the turns cost (turns without a known price count 0)."""
        return self.ledger.totals(turns, self.pricing).spent.usd

    def allow_over_once(self) -> None:
        """Let the next turn start even if it would exceed the budget (once)."""
        self._over_once = True

    def check_prompt(self, prompt: str, estimate: Callable[[str], RequestEstimate]) -> None:
        """Raise ``NbagentError(kind="budget")`` when sending ``prompt`` would exceed the budget."""
        once, self._over_once = self._over_once, False
        if self._usd is None or once or not prompt:
            return
        est = estimate(prompt)
        if est.over_budget:
            raise BudgetExceeded(
                f"over budget, nothing sent: {est.summary()}. Raise conv.budget.usd, set it to None, "
                "or call conv.budget.allow_over_once() to send this one turn")

    def stop_reason(self, turns: Sequence[TurnRecord]) -> str:
        """Why the turn must stop before its next model call ("" while within the budget)."""
        if self._usd is None:
            return ""
        spent = self.spent(turns)
        if spent <= self._usd:
            return ""
        from .estimate import usd

        return f"budget: stopped before the next model call, spent {usd(spent)} of {usd(self._usd)}"
