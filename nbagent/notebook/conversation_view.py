"""What the notebook layer needs of a conversation, as a Protocol.

The widget, the usage footer and the chat cell talk to ``nbagent.Conversation`` through this
interface only, so the notebook layer never imports the facade above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol
from collections.abc import Mapping

from ..core.ledger import TurnRecord
from ..core.steps import ChatResponse, Step

if TYPE_CHECKING:
    from ..analysis.estimate import RequestEstimate


class BudgetView(Protocol):
    """``conv.budget``, as the widget's footer reads it."""

    @property
    def usd(self) -> float | None: ...

    @property
    def pricing(self) -> Mapping[str, Any] | None: ...

    @property
    def context_window(self) -> int | None: ...

    def allow_over_once(self) -> None: ...


class ConversationView(Protocol):
    """The members of ``nbagent.Conversation`` that the notebook layer uses."""

    @property
    def history(self) -> list[Step]: ...

    @property
    def turns(self) -> list[TurnRecord]: ...

    @property
    def conversation_id(self) -> str: ...

    @property
    def budget(self) -> BudgetView: ...

    def is_idle(self) -> bool: ...

    def interrupt(self) -> None: ...

    def approve(self, call_id: str, *, by: str = "user") -> None: ...

    def deny(self, call_id: str, reason: str | None = None, *, by: str = "user") -> None: ...

    async def chat_to_completion(self, prompt: str) -> ChatResponse: ...

    def estimate(self, prompt: str, pricing: Mapping[str, Any] | None = None) -> RequestEstimate: ...

