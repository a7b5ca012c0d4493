"""Budgets: ``conv.budget_usd`` is checked before every request a turn would send.

Before ``Conversation.send`` opens a turn, the spend so far (the ledger's turns priced with the one
cost formula; turns without a known price count $0) plus the request's expected cost
(``conv.estimate(prompt).expected_cost_usd``) is compared with the budget. Over it, the turn is
refused with ``NbagentError(kind="budget")``: nothing is sent, no turn is recorded, and the
conversation stays usable. To go on: raise or clear the budget (``conv.budget_usd = None``), or
let one turn through with ``conv.allow_over_budget_once()`` (the widget's "Send anyway").

Inside a turn, when the tool calls of a model answer have all finished and the spend has
crossed the budget, the turn is interrupted before the next model call: the tool results stay in
the history, the turn ends INTERRUPTED and its record's ``error`` says why.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from .errors import NbagentError
from .steps import Step, StepSource, StepStatus, StepTarget, StepType

_SETTLED = (StepStatus.DONE, StepStatus.ERROR, StepStatus.CANCELED, StepStatus.TERMINAL_ERROR)


class Budgeted:
    """``budget_usd``, ``pricing``, ``spent_usd`` and the checks a Conversation runs (mixin)."""

    _budget_usd: float | None = None
    _over_budget_once = False
    pricing: Mapping[str, Any] | None = None  # price overrides for estimates, budgets and the widget

    @property
    def budget_usd(self) -> float | None:
        """Dollars this conversation may spend (None: no budget)."""
        return self._budget_usd

    @budget_usd.setter
    def budget_usd(self, value: float | None) -> None:
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise NbagentError(f"budget_usd must be a number >= 0 or None, not {value!r}", kind="config")
            value = float(value)
        self._budget_usd = value

    @property
    def spent_usd(self) -> float:
        """Dollars the ledger's turns cost so far (turns without a known price count 0)."""
        from ..analysis.estimate import spend

        return spend(self.turns, self.pricing).usd

    def allow_over_budget_once(self) -> None:
        """Let the next turn start even if it would exceed ``budget_usd`` (once)."""
        self._over_budget_once = True

    def _check_budget(self, prompt: str) -> None:
        """Raise ``NbagentError(kind="budget")`` when sending ``prompt`` would exceed the budget."""
        once, self._over_budget_once = self._over_budget_once, False
        if self._budget_usd is None or once or not prompt:
            return
        est = self.estimate(prompt)
        if est.over_budget:
            raise NbagentError(
                f"over budget, nothing sent: {est.summary()}. Raise conv.budget_usd, set it to None, "
                "or call conv.allow_over_budget_once() to send this one turn", kind="budget")

    def _watch_budget(self, step: Step, turn_steps: list[Step]) -> str:
        """After a round of tool calls, the reason to stop the turn if the budget is crossed ("" if not)."""
        if (self._budget_usd is None or step.target != StepTarget.ENVIRONMENT
                or step.type != StepType.TOOL_CALL or step.status not in _SETTLED):
            return ""
        last = max((i for i, s in enumerate(turn_steps) if s.source == StepSource.MODEL), default=-1)
        if last < 0 or not turn_steps[last].tool_calls:
            return ""
        tools = [s for s in turn_steps[last + 1:] if s.target == StepTarget.ENVIRONMENT and s.type == StepType.TOOL_CALL]
        if len(tools) < len(turn_steps[last].tool_calls) or any(s.status not in _SETTLED for s in tools):
            return ""
        spent = self.spent_usd
        if spent <= self._budget_usd:
            return ""
        from ..analysis.estimate import usd

        return f"budget: stopped before the next model call, spent {usd(spent)} of {usd(self._budget_usd)}"
