"""The saved transcript of a shown ChatWidget: the conversation as safe markdown in the cell's
outputs, for wherever the widget does not render (a saved notebook on GitHub, nbviewer,
nbconvert, Jupyter without its kernel).

Append-only. Showing the widget displays one output (the head) with the turns finished so far;
each turn that finishes later is displayed once, as an output of its own appended to every cell
that showed the widget: its message names that cell's execute request as its parent, and
JupyterLab, Notebook 7 and VS Code put such a late output in that cell (as they do for a
background thread's). No output is ever re-sent, so each turn's markdown crosses to the browser
once however long the conversation, and a saved notebook keeps every turn.

Every output has its own display id: a step of a turn already out that changes later (a manual
tool's result given after its turn stopped) re-sends that turn's output once (``update_display``),
and a cleared history or another conversation blanks the old outputs and starts again with a new
head.

A turn asked from code in another cell (``conv.ask(...)``, ``await conv.chat_to_completion(...)``,
``%%chat``) goes to that cell instead, as an output of its own marked with the widget's key
(``nbagent-of-<key>``: a live chat hides it, it shows what the chat above already shows). So each
turn is saved once, in the cell that asked for it, and a front end that keeps only the outputs of
the request running now (nbclient, so ``nbconvert --execute`` and papermill, which drop an output
appended to an earlier cell) keeps every turn too.
"""

from __future__ import annotations

import threading
from typing import Any

from ..core.conversation_state import ConversationEvent
from ..core.steps import Step, TurnStatus
from .conversation_view import ConversationView

__all__ = ["HEAD", "TranscriptOutput", "asked_class", "transcript_piece"]

HEAD = "nbagent chat · saved transcript: re-run the cell to chat again"
_BLANK = {"text/markdown": '<div class="nbagent-transcript"></div>', "text/plain": ""}


def asked_class(key: str) -> str:
    """The class of the transcript outputs of a widget's turns asked from other cells."""
    return f"nbagent-of-{key}"


def transcript_piece(steps: list[Step], head: bool = False, key: str = "") -> dict:
    """One transcript output's data: the steps as safe markdown (transcript.py: what a model wrote
    is never HTML) in ``<div class="nbagent-transcript">``, under the head line if ``head``; with
    ``key``, marked as the turn of that widget asked from another cell."""
    parts = [f"*{HEAD}*"] if head else []
    if steps:  # the renderer is imported for the first steps: a new chat's first display shows none
        from .transcript import transcript_markdown

        parts.append(transcript_markdown(steps, limit=len(steps)))
    classes = "nbagent-transcript" + (f" {asked_class(key)}" if key else "")
    md = f'<div class="{classes}">\n\n' + "\n\n".join(parts) + "\n\n</div>"
    return {"text/markdown": md, "text/plain": HEAD} if head else {"text/markdown": md}


def _display_publisher() -> Any:
    """The kernel's display publisher, or None outside a kernel (a console, a script, marimo)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if getattr(shell, "kernel", None) is None:
        return None
    return getattr(shell, "display_pub", None)


class TranscriptOutput:
    """The transcript outputs of one widget: where it was shown, which turns went out."""

    def __init__(self, key: str) -> None:
        self._key = key
        self._lock = threading.RLock()
        self._cells: list[dict] = []  # parent headers of the cells that showed the widget
        self._ids: list[str] = []  # display ids of the outputs shown since the last reset
        self._written = -1  # the newest turn number whose steps went out
        # turn -> its output's id, first and last turn, whether another cell asked for them
        self._pieces: dict[int, tuple[str, int, int, bool]] = {}
        self._epoch = 0
        self._asker: dict = {}  # the request that asked for the running turn (a cell's or the chat box's)

    @property
    def shown(self) -> bool:
        """Whether the transcript was displayed in a cell (so turns are appended to it)."""
        return bool(self._cells)

    @staticmethod
    def available() -> bool:
        """Whether there is a kernel to display the transcript in."""
        return _display_publisher() is not None

    def show(self, conversation: ConversationView) -> bool:
        """Display the head, with the finished turns, in the running cell. Whether it was shown."""
        pub = _display_publisher()
        if pub is None:
            return False
        with self._lock:
            self._cells.append(dict(pub.parent_header))
            self._show_heads(conversation, self._cells[-1:])
        return True

    def see_event(self, conversation: ConversationView, event: str, payload: Any = None) -> None:
        """A conversation event: a turn starts (``turn_started``) or finishes (``turn_finished``), a step
        changes (``step_changed``: a turn already out may change, a manual result), the history is
        cleared or replaced (``reset``). Never per token: a running turn's steps cost nothing here."""
        if event == ConversationEvent.TURN_STARTED:
            self.turn_started()
        elif event == ConversationEvent.TURN_FINISHED:
            self.turn_finished(conversation, payload.turn)
        elif event == ConversationEvent.STEP:
            self.step_changed(conversation, payload)
        elif event == ConversationEvent.CLEARED:
            self.reset(conversation)

    def turn_started(self) -> None:
        """A turn starts: note the request asking for it (the running cell, or the chat box's
        message), so its transcript goes to that cell."""
        pub = _display_publisher()
        with self._lock:
            self._asker = dict(pub.parent_header) if pub is not None else {}

    def _asking_cell(self) -> dict | None:
        """The parent header of the cell that asked for the running turn, when that cell did not
        show the widget (``_lock`` held); None: the widget's own cells get the turn."""
        header = self._asker.get("header", self._asker)
        if header.get("msg_type") != "execute_request" or not header.get("msg_id"):
            return None
        shown = {c.get("header", c).get("msg_id") for c in self._cells}
        return None if header["msg_id"] in shown else self._asker

    def turn_finished(self, conversation: ConversationView, turn: int) -> None:
        """Show the steps of the turns finished since the last output (normally: ``turn``): in the
        cell that asked for them, or appended to the cells that showed the widget."""
        with self._lock:
            if not self._cells or turn <= self._written:
                return
            first, self._written = self._written + 1, turn
            steps = self._steps_after(conversation, first - 1, turn)
            if not steps:
                return
            asker = self._asking_cell()
            bundle = transcript_piece(steps, key=self._key if asker is not None else "")
            display_id = self._new_id(f"t{turn}")
            self._pieces.update((n, (display_id, first, turn, asker is not None)) for n in {s.turn for s in steps})
            for parent in [asker] if asker is not None else self._cells:
                self._display(parent, bundle, display_id)

    def step_changed(self, conversation: ConversationView, step: Step) -> None:
        """A step changed: if its turn's output is out already, send that output again (rare: the
        steps of the running turn are not out yet, and cost nothing here)."""
        if not 0 <= step.turn <= self._written:
            return
        with self._lock:
            piece = self._pieces.get(step.turn)
            if piece is None:  # in a head: kept as it was
                return
            display_id, first, last, asked = piece
            steps = [s for s in self._steps_after(conversation, first - 1, last) if s.turn >= first]
            self._update(transcript_piece(steps, key=self._key if asked else ""), display_id)

    def reset(self, conversation: ConversationView) -> None:
        """The history was cleared or replaced: blank every output shown so far and show a new
        head (with the conversation's finished turns) in each cell."""
        with self._lock:
            if not self._cells:
                return
            for display_id in dict.fromkeys(self._ids):
                self._update(_BLANK, display_id)
            self._ids, self._written = [], -1
            self._pieces.clear()
            self._epoch += 1
            self._show_heads(conversation, self._cells)

    # --- helpers --------------------------------------------------------------------------

    def _show_heads(self, conversation: ConversationView, cells: list[dict]) -> None:
        """Display a head with the finished turns in each of ``cells`` (``_lock`` held)."""
        steps = self.finished_steps(conversation)
        self._written = max([self._written] + [s.turn for s in steps])
        for parent in cells:
            self._display(parent, transcript_piece(steps, head=True), self._new_id("h"))

    def _new_id(self, what: str) -> str:
        display_id = f"nb-{self._key[:8]}-{self._epoch}-{what}"  # short: it travels with every turn's output
        if what.startswith("h"):
            display_id += str(len(self._ids))  # each cell's head is its own output
        self._ids.append(display_id)
        return display_id

    @staticmethod
    def finished_steps(conversation: ConversationView) -> list[Step]:
        """The conversation's steps but those of a running turn."""
        turns = conversation.turns
        running = turns[-1].turn if turns and turns[-1].status == TurnStatus.RUNNING else None
        return [s for s in conversation.history if s.turn != running]

    @staticmethod
    def _steps_after(conversation: ConversationView, written: int, turn: int) -> list[Step]:
        """The steps of turns ``written`` < n <= ``turn``, read from the end of the history."""
        out: list[Step] = []
        for step in reversed(conversation.history):
            if 0 <= step.turn <= written:
                break
            if step.turn <= turn:
                out.append(step)
        out.reverse()
        return out

    @staticmethod
    def _display(parent: dict, bundle: dict, display_id: str) -> None:
        """Display ``bundle`` as an output of the cell whose request is ``parent`` (it may have
        finished long ago: the turn's end comes from the widget, not from a cell)."""
        from IPython.display import display

        pub = _display_publisher()
        set_parent = getattr(pub, "set_thread_parent", None)
        token = set_parent(parent) if set_parent is not None and parent else None
        try:
            display(bundle, raw=True, display_id=display_id)
        except Exception:  # a closed kernel channel: the live widget still shows
            pass
        finally:
            if token is not None:
                pub.reset_thread_parent(token)

    @staticmethod
    def _update(bundle: dict, display_id: str) -> None:
        from IPython.display import update_display

        try:
            update_display(bundle, raw=True, display_id=display_id)
        except Exception:  # a closed kernel channel: nothing to update
            pass
