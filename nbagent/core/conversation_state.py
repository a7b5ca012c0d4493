"""The plain values a Conversation is made of, and the events it tells listeners about."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol
from collections.abc import Callable, Sequence

from .chat_session import ChatSession
from .errors import NbagentError
from .ledger import TurnRecord
from .steps import Step, UsageMetadata
from .turn_policy import TurnPolicy

DEFAULT_MAX_HISTORY = 10_000


class ConversationEvent(str, Enum):
    """What a listener is told about (``add_listener``); the payload follows each name."""

    TURN_STARTED = "turn_started"  # the new TurnRecord
    STEP = "step"  # the Step update
    TURN_FINISHED = "turn_finished"  # the closed TurnRecord
    CLEARED = "cleared"  # None


Listener = Callable[[ConversationEvent, Any], None]


class Plumbing(Protocol):
    """What nbagent's own layers (the widget, the agent, the magics, saving, tracing) use of a
    conversation, and its users never see: listeners, the state handed to saving, the policy it
    obeys (``nbagent.conversation_parts.ConversationPlumbing``)."""

    policy: TurnPolicy  # consulted before each turn and for each tool call (core/turn_policy.py)

    @property
    def rules_label(self) -> str: ...

    def add_listener(self, fn: Listener) -> None: ...

    def remove_listener(self, fn: Listener) -> None: ...

    def has_listener(self, fn: Listener) -> bool: ...

    def to_state(self) -> ConversationState: ...

    def refusal(self, prompt: str = "") -> NbagentError | None: ...


def plumbing_of(conv: Any) -> Plumbing:
    """The plumbing of a ``nbagent.Conversation`` (see :class:`Plumbing`); AttributeError for
    anything else (:func:`has_plumbing` says)."""
    return conv._plumbing


def has_plumbing(obj: Any) -> bool:
    """Whether ``obj`` is a conversation with plumbing (a ``nbagent.Conversation``)."""
    return hasattr(obj, "_plumbing")


@dataclass
class ConversationState:
    """Everything a Conversation holds, as plain values: what is saved and loaded.

    ``trimmed`` counts steps dropped from the front; ``turn_starts`` and
    ``compactions`` index into ``steps``; ``turns`` is the never-trimmed ledger.
    A live conversation's ``to_state`` gives read-only snapshots (sequences, O(1) each);
    a file read gives lists.
    """

    conversation_id: str = ""
    max_history_size: int = DEFAULT_MAX_HISTORY
    steps: Sequence[Step] = field(default_factory=list)
    trimmed: int = 0
    turn_starts: Sequence[int] = field(default_factory=list)
    compactions: Sequence[int] = field(default_factory=list)
    turns: Sequence[TurnRecord] = field(default_factory=list)
    total_usage: UsageMetadata = field(default_factory=UsageMetadata)
    last_response: str = ""
    chat_session: ChatSession | None = None


