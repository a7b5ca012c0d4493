"""The accessors that group ``Conversation``'s members beyond the contract, the way pandas has
``df.plot`` and ``df.str``: ``conv.budget`` (dollars and tokens it may spend) and ``conv.notebook``
(the code it ran and the cell edits it can undo); and, not on the user's object, the plumbing
``core.conversation_state.plumbing_of(conv)`` gives (what nbagent's own layers use: listeners, the
state handed to saving, the policy the conversation obeys).

Each is a thin view over the parts its conversation hands it (no reaching into private members).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol
from collections.abc import Callable, Mapping

from .core.conversation_state import ConversationState, Listener
from .core.errors import NbagentError
from .core.turn_policy import NO_POLICY, TurnPolicy

if TYPE_CHECKING:
    from .analysis.budget import Budget
    from .analysis.estimate import RequestInputs
    from .core.turn_log import TurnLog
    from .analysis.estimate import RequestEstimate
    from .core.connection import Connection
    from .core.steps import Step
    from .notebook.kernel_tools import CodeCell


class ConversationLike(Protocol):
    """What the accessors read of the conversation they belong to (``nbagent.Conversation``)."""

    @property
    def history(self) -> list[Step]: ...

    @property
    def connection(self) -> Connection | None: ...

    @property
    def conversation_id(self) -> str: ...

    def estimate(self, prompt: str, pricing: Mapping[str, Any] | None = None) -> RequestEstimate: ...


class ConversationBudget:
    """``conv.budget``: the dollars a conversation may spend (``usd``; see ``nbagent.analysis.budget``),
    its price overrides, what it spent, and the model's context window."""

    __slots__ = ("_conv", "_log", "_budget", "_inputs")

    def __init__(self, conv: ConversationLike, log: TurnLog, budget: Budget, inputs: Callable[[], RequestInputs]) -> None:
        self._conv, self._log, self._budget, self._inputs = conv, log, budget, inputs

    @property
    def usd(self) -> float | None:
        """Dollars the conversation may spend (None: no budget); a turn that would go over is refused."""
        return self._budget.usd

    @usd.setter
    def usd(self, value: float | None) -> None:
        self._budget.usd = value

    @property
    def pricing(self) -> Mapping[str, Any] | None:
        """Price overrides for estimates, budgets, the widget and the usage frames."""
        return self._budget.pricing

    @pricing.setter
    def pricing(self, value: Mapping[str, Any] | None) -> None:
        self._budget.pricing = value

    @property
    def spent_usd(self) -> float:
        """Dollars the ledger's turns cost so far (turns without a known price count 0)."""
        return self._budget.spent(self._log.ledger)

    def allow_over_once(self) -> None:
        """Let the next turn start even if it would exceed ``usd`` (once; never a policy's)."""
        self._budget.allow_over_once()

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens: as reported in the ledger, else the connection's,
        else the price data's (None: unknown)."""
        from .analysis.estimate import context_window_of

        inputs = self._inputs()
        return context_window_of(inputs.turns, inputs.declared_window, inputs.model, inputs.provider)

    def __repr__(self) -> str:
        return f"<budget: spent ${self.spent_usd:.4f} of {'no limit' if self.usd is None else f'${self.usd:.4f}'}>"


class ConversationNotebook:
    """``conv.notebook``: the code the agent ran in the kernel and the undo of its cell edits."""

    __slots__ = ("_conv",)

    def __init__(self, conv: ConversationLike) -> None:
        self._conv = conv

    def code_cells(self) -> list[CodeCell]:
        """The code the agent ran with ``run_python`` (in order, with its turn and status)."""
        from .notebook.kernel_tools import code_cells

        return code_cells(self._conv.history)

    async def undo_async(self, call_id: str) -> str:
        """``conv.undo`` on the running loop (a live notebook answers only while the kernel is not busy
        in a cell)."""
        from .notebook.cell_tools import undo_call

        return await undo_call(getattr(self._conv.connection, "tools", None) or {}, call_id)


class ConversationPlumbing:
    """``plumbing_of(conv)``: what the widget, the agent, the magics and saving use (not a user API)."""

    __slots__ = ("_conv", "_log", "_state", "policy")

    def __init__(self, conv: ConversationLike, log: TurnLog, state: Callable[[], ConversationState]) -> None:
        self._conv, self._log, self._state = conv, log, state
        self.policy: TurnPolicy = NO_POLICY  # consulted before each turn and for each tool call (set by Agent)

    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(event, payload)`` for each :class:`~nbagent.core.conversation_state.ConversationEvent`."""
        self._log.add_listener(fn)

    def remove_listener(self, fn: Listener) -> None:
        self._log.remove_listener(fn)

    def has_listener(self, fn: Listener) -> bool:
        return self._log.has_listener(fn)

    def to_state(self) -> ConversationState:
        """A consistent copy of everything the conversation holds (for saving)."""
        return self._state()

    @property
    def rules_label(self) -> str:
        """The rules in the system prompt, as the widget's footer names them ("" none)."""
        rules = self.policy.rules
        return rules.label if rules is not None else ""

    def refusal(self, prompt: str = "") -> NbagentError | None:
        """Why the policy refuses a turn with ``prompt`` now (closed, over a period's budget: what the
        widget shows); None when it may start."""
        conv = self._conv

        def expected_usd() -> float:
            try:
                return conv.estimate(prompt).expected_cost_usd
            except Exception:  # no estimate: the spend so far decides
                return 0.0
        return self.policy.refusal(self._log.ledger, conv.conversation_id, expected_usd)
