"""The accessors that group ``Conversation``'s members beyond the contract, the way pandas has
``df.plot`` and ``df.str``: ``conv.budget`` (dollars and tokens it may spend) and ``conv.notebook``
(the code it ran and the cell edits it can undo); and, not on the user's object, the plumbing
``core.conversation_state.plumbing_of(conv)`` gives (what nbagent's own layers use: listeners, the
state handed to saving, the course policy's hold).

Each is a thin view over the parts its conversation hands it (no reaching into private members).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol
from collections.abc import Callable, Mapping

from .core.conversation_state import ConversationState, Listener
from .core.errors import NbagentError

if TYPE_CHECKING:
    from .analysis.budget import Budget
    from .analysis.course_budget import CourseLimits
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
        """Let the next turn start even if it would exceed ``usd`` (once; never a course policy's)."""
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

    __slots__ = ("_conv", "_log", "_budget", "_state", "rules_label")

    def __init__(self, conv: ConversationLike, log: TurnLog, budget: Budget,
                 state: Callable[[], ConversationState]) -> None:
        self._conv, self._log, self._budget, self._state = conv, log, budget, state
        self.rules_label = ""  # the rules file in the system prompt (course_rules.py), as the widget names it

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
    def course(self) -> CourseLimits | None:
        """The course policy's hours and period budget the conversation obeys (set by ``Agent``)."""
        return self._budget.course

    @course.setter
    def course(self, limits: CourseLimits | None) -> None:
        self._budget.course = limits

    def course_refusal(self, prompt: str = "") -> NbagentError | None:
        """Why the course policy would refuse a turn now (closed, over budget: what the widget shows);
        None when it may start or there is no policy."""
        conv = self._conv
        return self._budget.course_refusal(prompt, conv.estimate, self._log.ledger, conv.conversation_id)
