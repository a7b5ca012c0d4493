"""Tool calls waiting for approval where nothing may answer them: a blocking ``ask()`` (a script,
nbconvert, papermill; in Jupyter the widget's buttons are not read while the cell is busy in it),
or ``await chat_to_completion()`` with no widget shown, or with a widget no live view shows (nbclient,
papermill and ``nbconvert --execute`` display it, but no browser draws it: notebook/view_presence.py).

``ApprovalWatch(conversation, wait)`` is a listener. When a call starts waiting it says so on
stderr within ``NOTICE_DELAY`` (the call's name and id, and how to answer: ``conv.approve(id)`` /
``conv.deny(id)``); when ``wait`` seconds pass with no answer it cancels the call saying that nobody
answered in time (``decided_by`` ``"approval_wait"``), then interrupts the turn, and ``error`` holds the
``ConfigError`` the caller raises. ``wait=None`` only tells. ``answerable()``, when given,
is asked each time: once it is true (a view of the widget came alive) the call is left to the person.
"""

from __future__ import annotations

import sys
import threading
from typing import Any
from collections.abc import Callable

from .core.errors import ConfigError, NbagentError
from .core.steps import ApprovalDecision, Step, StepStatus, ToolCall
from .loop.tool_runner import UNANSWERED
from .core.conversation_state import plumbing_of

NOTICE_DELAY = 0.3  # a call answered at once (a listener, %%chat's denial) is not announced
BLOCKING = "a blocking ask() cannot be answered from the widget, whose buttons wait until the cell ends"
NO_WIDGET = "no chat widget is shown for this conversation"
UNANSWERED_RESULT = "Nobody answered the approval request within {:g} s (conv.approval_wait); the call did not run."
NO_VIEW = ("its chat widget is displayed but no live view shows it (nbclient, papermill or nbconvert run the "
           "notebook without a browser), so nobody can press Approve")


class ApprovalWatch:
    """Says at once that a call waits for approval, and ends the turn when nobody answers in time."""

    def __init__(self, conversation: Any, wait: float | None, why: str = BLOCKING,
                 answerable: Callable[[], bool] | None = None) -> None:
        self.conversation = conversation
        self.wait = wait
        self.why = why
        self.answerable = answerable
        self.error: ConfigError | None = None
        self.lock = threading.Lock()
        self.waiting: dict[str, list[threading.Timer]] = {}
        self.expired: set[str] = set()  # calls canceled for want of an answer: the turn ends once they are closed

    def __call__(self, event: str, payload: Any) -> None:
        if event != "step" or not isinstance(payload, Step) or not payload.is_tool_run:
            return
        pending = payload.status == StepStatus.WAITING_FOR_USER and payload.approval == ApprovalDecision.PENDING
        for call in payload.tool_calls:
            if pending:
                self._start(call)
            else:
                self._answered(call.id)
                if call.id in self.expired:
                    self.expired.discard(call.id)
                    self.conversation.interrupt()

    def _start(self, call: ToolCall) -> None:
        with self.lock:
            if call.id in self.waiting:
                return
            timers = [threading.Timer(NOTICE_DELAY, self._tell, args=(call,))]
            if self.wait is not None:
                timers.append(threading.Timer(self.wait, self._expire, args=(call,)))
            self.waiting[call.id] = timers
        for timer in timers:
            timer.daemon = True
            timer.start()

    def _answered(self, call_id: str) -> None:
        with self.lock:
            timers = self.waiting.pop(call_id, [])
        for timer in timers:
            timer.cancel()

    def _still_waiting(self, call_id: str) -> bool:
        with self.lock:
            return call_id in self.waiting

    def _left_to_a_person(self, call_id: str) -> bool:
        """A live view appeared: its buttons answer; this call is no longer watched."""
        if self.answerable is None or not self.answerable():
            return False
        self._answered(call_id)
        return True

    def _tell(self, call: ToolCall) -> None:
        if not self._still_waiting(call.id) or self._left_to_a_person(call.id):
            return
        limit = (f"the turn ends if nobody answers within {self.wait:g} s (conv.approval_wait)"
                 if self.wait is not None else "it waits until someone answers")
        sys.stderr.write(f"⏸ tool call {call.name!r} ({call.id}) is waiting for approval and {self.why}: "
                         f"approve it with conv.approve({call.id!r}) or deny it with conv.deny({call.id!r}) "
                         f"from another thread; {limit}.\n")
        sys.stderr.flush()

    def _expire(self, call: ToolCall) -> None:
        if not self._still_waiting(call.id) or self._left_to_a_person(call.id):
            return
        self.error = ConfigError(
            f"policy='ask': tool call {call.name!r} ({call.id}) waited {self.wait:g} s for approval and nothing "
            f"answered it ({self.why}); the turn was ended. Approve from another thread with "
            f"conv.approve({call.id!r}), run the turn with `await conv.chat_to_completion(...)` where a "
            "browser draws the widget (JupyterLab, Notebook, VS Code), set conv.approval_wait (seconds; None waits forever), or use policy='allow_all'")
        self.expired.add(call.id)
        try:  # the call says that nobody answered (not that the user interrupted); the turn ends when it is closed
            self.conversation.deny(call.id, UNANSWERED_RESULT.format(self.wait), by=UNANSWERED)
        except NbagentError:  # answered in the meantime after all
            self.expired.discard(call.id)
            self.error = None

    def __enter__(self) -> ApprovalWatch:
        """Watch the conversation's steps until the ``with`` block ends."""
        plumbing_of(self.conversation).add_listener(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_exc: object) -> None:
        """Stop watching; a turn this watch ended raises its ``ConfigError`` (unless the block raised)."""
        plumbing_of(self.conversation).remove_listener(self)
        self.close()
        if exc_type is None and self.error is not None:
            raise self.error

    def close(self) -> None:
        """Cancel every timer (the turn is over)."""
        with self.lock:
            timers = [t for ts in self.waiting.values() for t in ts]
            self.waiting.clear()
        for timer in timers:
            timer.cancel()
