"""The chat box's prompt path: a prompt typed in the widget is refused, attached, gated and run.

Refused at once (``Refused``: the view that sent it drops its echo and unlocks) when it is empty or
a turn is running; its ``@cell`` references (cell_refs.py) and ``@names`` (variables.py, off the
event loop and time-limited: a ``__repr__`` that hangs must not hold Stop) are attached; then the
conversation's policy may refuse it and an over-budget prompt goes back to the view as ``Confirm``
(Send anyway / Cancel, widget_usage.py); else it runs as an asyncio task on the kernel's loop, so Stop,
Approve and Deny are handled while it streams.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from .conversation_view import ConversationView
from .protocol import Confirm, Handlers, Refused
from .widget_usage import gate, policy_notice

PREPARE_GRACE_SECONDS = 3.0  # past the attachments' own limits, how long a prompt's preparation may take
__all__ = ["PromptHost", "Prompts", "prepare_prompt"]


class PromptHost(Protocol):
    """What the prompt path needs of its widget."""

    conversation: ConversationView
    namespace: Any
    notice: str
    handlers: Handlers

    def note(self, what: str) -> None:
        """Mark ``"running"`` or ``"gauge"`` to go out with the next flush."""

    def flush(self) -> None:
        """Send what changed now."""


def prepare_prompt(prompt: str, namespace: Any = None) -> str:
    """``@name`` of a variable of ``namespace`` (None: the kernel's) attaches its description, as in
    ``%%chat``; a prompt without ``@`` is unchanged."""
    from .variables import attach_variables, shell_namespace

    if "@" not in prompt:
        return prompt
    namespace = namespace if namespace is not None else shell_namespace()
    return attach_variables(prompt, namespace)[0] if namespace else prompt


class Prompts:
    """The prompts of one widget: the task running the latest one (``task``)."""

    def __init__(self, host: PromptHost, watch: Any = None) -> None:
        self.host = host
        self.watch = watch  # called with each prompt's task (a step=True replay watches it)
        self.task: asyncio.Task | None = None

    def running(self) -> bool:
        """Whether a prompt's task has not ended (it may not have begun its turn yet)."""
        return self.task is not None and not self.task.done()

    def start(self, prompt: str, over_budget: bool = False, cells: Any = None) -> None:
        """A ``Send`` from the box."""
        host = self.host
        if not prompt.strip():
            self._refuse("Nothing sent: the message is empty.")
            return
        if self.running() or not host.conversation.is_idle():
            self._refuse("A turn is already running; press Stop first.")
            return
        from .cell_refs import attach_cells  # at the first send, not the first display (issue #32)

        with_cells = attach_cells(prompt, cells)[0]  # @cell: the cells the view sent
        if "@" in with_cells:  # @names to describe: off the event loop first (_attach_and_run)
            run: Any = self._attach_and_run(prompt, with_cells, over_budget)
        else:  # nothing to describe: gated now
            prepared = prepare_prompt(with_cells, host.namespace)
            if not self._gate(prompt, prepared, over_budget):
                return
            run = self._run(prepared)
        self.task = asyncio.ensure_future(run)
        self.task.add_done_callback(lambda _t: host.flush())  # `running` ends with the task
        if self.watch is not None:
            self.watch(self.task)
        host.note("running")
        # `running` goes out now, alone: the view that sent the prompt shows it and Stop already (its
        # echo), other views show Stop; sent from this handler, the turn's first text follows at once
        # (folded into the turn's first flush it saved ~80 B a turn, but in JupyterLab the first text
        # came ~20 ms later, 65 ms median after Enter instead of 37-45 (bench_first_token.py): Nagle's
        # algorithm on the server's websocket held that flush until the next message; not so with
        # TCP_NODELAY, which jupyter_server does not set)
        host.flush()

    def stop(self, turn_running: bool) -> None:
        """Stop: a prompt whose turn has not begun is dropped; a running turn is interrupted."""
        if self.running() and not turn_running and self.host.conversation.is_idle():
            assert self.task is not None
            self.task.cancel()
        else:
            self.host.conversation.interrupt()

    def in_task(self) -> bool:
        """Whether this runs in the task of a prompt sent from the box (its done callback flushes)."""
        try:
            return self.running() and asyncio.current_task() is self.task
        except RuntimeError:  # no running loop here
            return False

    async def _attach_and_run(self, prompt: str, with_cells: str, over_budget: bool) -> None:
        """Attach what the prompt names, off the event loop, then gate and run it. Stop while
        attaching drops the prompt."""
        from .cell_runner import TimeLimitExceeded, await_with_time_limit
        from .variables import ATTACH_TOTAL_SECONDS, ATTACH_HEADER

        host = self.host
        host.notice = "Attaching the @names to the prompt… (Stop cancels this message)"
        limit = ATTACH_TOTAL_SECONDS + PREPARE_GRACE_SECONDS  # attach_variables keeps to its own limits first
        try:
            prepared = await await_with_time_limit(lambda: prepare_prompt(with_cells, host.namespace), limit)
        except asyncio.CancelledError:
            self._refuse("Stopped: the message was not sent (its @names were still being attached).")
            return
        except TimeLimitExceeded as exc:
            prepared = f"{with_cells.rstrip()}\n\n[{ATTACH_HEADER}: none attached: describing them {exc}]"
        except Exception as exc:  # noqa: BLE001 - a broken attachment must not lose the prompt
            prepared = f"{with_cells.rstrip()}\n\n[{ATTACH_HEADER}: none attached ({type(exc).__name__}: {exc})]"
        if self._gate(prompt, prepared, over_budget):
            await self._run(prepared)

    def _gate(self, prompt: str, prepared: str, over_budget: bool) -> bool:
        """Whether ``prepared`` may run now: the conversation's policy may refuse it (a course closed or
        over its period's budget); over the conversation's budget, the view asks "Send anyway" / "Cancel"."""
        host = self.host
        closed = policy_notice(host.conversation, prepared)
        if closed:
            self._refuse(closed)
            return False
        ask, host.notice = gate(host.conversation, prepared, over_budget)
        host.note("gauge")  # a budget set in code since the last turn shows now (if it changed)
        if ask is None:
            return True
        host.flush()
        host.handlers.emit(Confirm(prompt, ask))  # the user's own text comes back, prepared again if sent
        return False

    def _refuse(self, text: str) -> None:
        """Tell the views a prompt was not run (a repeated notice would not change the trait)."""
        self.host.notice = text
        self.host.handlers.emit(Refused(text))

    async def _run(self, prompt: str) -> None:
        conversation = self.host.conversation
        try:
            await conversation.chat_to_completion(prompt)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # the turn's record carries it as an error card
            if not conversation.turns or conversation.turns[-1].prompt != prompt:
                self.host.notice = f"Error: {exc}"
