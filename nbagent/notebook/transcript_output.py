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

A front end that keeps only the outputs of the request running now (nbclient, so
``nbconvert --execute`` and papermill) drops a turn appended to an earlier cell: there, turns
asked from later cells show in those cells' own outputs, not in the widget's transcript.
"""

from __future__ import annotations

import threading
from typing import Any

from ..core.steps import Step, TurnStatus
from .conversation_view import ConversationView
from .transcript import transcript_markdown

__all__ = ["HEAD", "TranscriptOutput", "transcript_piece"]

HEAD = "nbagent chat · saved transcript: re-run the cell to chat again"
_BLANK = {"text/markdown": '<div class="nbagent-transcript"></div>', "text/plain": ""}


def transcript_piece(steps: list[Step], head: bool = False) -> dict:
    """One transcript output's data: the steps as safe markdown (transcript.py: what a model wrote
    is never HTML) in ``<div class="nbagent-transcript">``, under the head line if ``head``."""
    parts = [f"*{HEAD}*"] if head else []
    parts += [transcript_markdown(steps, limit=len(steps))] if steps else []
    md = '<div class="nbagent-transcript">\n\n' + "\n\n".join(parts) + "\n\n</div>"
    return {"text/markdown": md, "text/plain": HEAD if head else ""}


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
        self._pieces: dict[int, tuple[str, int, int]] = {}  # turn -> its output's id, first and last turn
        self._epoch = 0

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

    def turn_finished(self, conversation: ConversationView, turn: int) -> None:
        """Append the steps of the turns finished since the last output (normally: ``turn``)."""
        with self._lock:
            if not self._cells or turn <= self._written:
                return
            first, self._written = self._written + 1, turn
            steps = self._steps_after(conversation, first - 1, turn)
            if not steps:
                return
            bundle, display_id = transcript_piece(steps), self._new_id(f"t{turn}")
            self._pieces.update((n, (display_id, first, turn)) for n in {s.turn for s in steps})
            for parent in self._cells:
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
            display_id, first, last = piece
            steps = [s for s in self._steps_after(conversation, first - 1, last) if s.turn >= first]
            self._update(transcript_piece(steps), display_id)

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
        display_id = f"nbagent-{self._key}-{self._epoch}-{what}"
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
