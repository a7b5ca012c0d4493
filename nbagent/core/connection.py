"""Connections run turns and emit ``Step`` updates.

``Connection`` is the whole protocol a ``Conversation`` talks to.
``MockConnection`` replays scripted steps (for tests and teaching);
``ModelConnection`` (``nbagent.loop.model_connection``) runs real turns
against a provider.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any, Protocol, runtime_checkable
from collections.abc import AsyncGenerator, Callable, Sequence

from .chat_session import ChatSession
from .compression import ApproxTokenizer, Tokenizer, ToolDescription
from .errors import ConfigError
from .steps import Step


RequestGuard = Callable[[], str]
"""Asked before each further model call of a turn: a reason to stop the turn there, or ``""``."""

ToolGuard = Callable[[Any], str]
"""Asked before a tool runs: what the model is told instead of running it (the conversation's policy,
core/turn_policy.py), or ``""``."""


@runtime_checkable
class Connection(Protocol):
    """What a Conversation needs from whatever runs its turns."""

    conversation_id: str
    tokenizer: Tokenizer  # counts tokens for estimates
    request_guard: RequestGuard | None  # the conversation's budget check inside the tool loop
    tool_guard: ToolGuard | None  # the conversation's policy, asked before each tool runs

    @property
    def model_name(self) -> str:
        """The model that answers: shown in the ledger and the widget."""

    @property
    def provider_name(self) -> str: ...

    @property
    def context_window(self) -> int | None:
        """The model's window in tokens (None: unknown)."""

    def tool_descriptions(self) -> Sequence[ToolDescription]:
        """The tools the next request would carry."""

    async def send(self, prompt: str) -> None:
        """Start a turn; ``""`` continues one that stopped for tool results."""

    def receive_steps(self) -> AsyncGenerator[Step, None]:
        """Yield the turn's step updates, the user's prompt step first."""

    def is_idle(self) -> bool: ...

    def interrupt(self) -> None:
        """Stop the running turn; safe from any thread."""

    def approve(self, call_id: str, *, by: str = "user") -> None: ...

    def deny(self, call_id: str, reason: str | None = None, *, by: str = "user") -> None: ...

    def add_tool_result(self, call_id: str, result: Any, *, is_error: bool = False) -> str:
        """Record a manual tool result; returns the text the model will see."""

    @property
    def chat_session(self) -> ChatSession | None:
        """The model history to save with the conversation (None: nothing to save)."""

    def resume(self, session: ChatSession | None, next_step_index: int) -> None:
        """Continue a saved conversation: its model history and step numbering."""

    async def disconnect(self) -> None: ...


class MockConnection:
    """Replays a script: ``turns[i]`` is the list of steps the i-th ``send()`` yields.

    An entry of a turn may also be an exception, which is raised at that point.
    """

    model_name = "mock"
    provider_name = "mock"
    context_window: int | None = None
    request_guard: RequestGuard | None = None  # a script runs no model calls to guard
    tool_guard: ToolGuard | None = None  # nor tools

    def __init__(self, turns: list[list[Step | BaseException]], conversation_id: str | None = None):
        self._turns = list(turns)
        self._next = 0
        self._current: list[Step | BaseException] | None = None
        self.conversation_id = conversation_id or str(uuid.uuid4())
        self.prompts: list[str] = []
        self.tool_results: dict[str, Any] = {}
        self.decisions: dict[str, tuple[bool, str | None]] = {}
        self._interrupted = threading.Event()
        self._idle = True
        self.closed = False
        self.tokenizer: Tokenizer = ApproxTokenizer()

    def tool_descriptions(self) -> list[ToolDescription]:
        """The tools a request would carry: none (a script's tool calls need no definitions)."""
        return []  # a script's tool calls need no definitions

    async def send(self, prompt: str) -> None:
        """Start the next scripted turn (a ``ConfigError`` when none is left)."""
        if self._next >= len(self._turns):
            raise ConfigError(
                f"MockConnection has no scripted turn left (had {len(self._turns)})",
            )
        self.prompts.append(prompt)
        self._current = self._turns[self._next]
        self._next += 1
        self._interrupted.clear()
        self._idle = False

    async def receive_steps(self) -> AsyncGenerator[Step, None]:
        """Yield the scripted turn's steps; an exception in the script is raised at its place."""
        items, self._current = self._current or [], None
        try:
            for item in items:
                if self._interrupted.is_set():
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
                await asyncio.sleep(0)
        finally:
            self._idle = True

    def is_idle(self) -> bool:
        """Whether no turn is running."""
        return self._idle

    def interrupt(self) -> None:
        """Stop the running turn before its next step; safe from any thread."""
        self._interrupted.set()

    def approve(self, call_id: str, *, by: str = "user") -> None:
        """Record that the call was approved (in ``decisions``)."""
        self.decisions[call_id] = (True, None)

    def deny(self, call_id: str, reason: str | None = None, *, by: str = "user") -> None:
        """Record that the call was denied, with the reason (in ``decisions``)."""
        self.decisions[call_id] = (False, reason)

    def add_tool_result(self, call_id: str, result: Any, *, is_error: bool = False) -> str:
        """Record a manual tool result (in ``tool_results``); returns the text the model would see."""
        self.tool_results[call_id] = result
        return result if isinstance(result, str) else str(result)

    @property
    def chat_session(self) -> ChatSession | None:
        """None: a script has no model history to save."""
        return None

    def resume(self, session: ChatSession | None, next_step_index: int) -> None:
        """Nothing to restore: a script starts from its first turn."""
        pass

    async def disconnect(self) -> None:
        """Mark the connection closed (``closed``)."""
        self.closed = True

    def __repr__(self) -> str:
        return f"MockConnection({len(self._turns)} turns, {self._next} sent)"
