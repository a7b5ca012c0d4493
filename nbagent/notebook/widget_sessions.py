"""The chat widget's *New chat*, *History* and replay *Next* (kernel side).

A ``ChatWidget`` given an ``Agent`` whose ``save_to`` is set shows *New chat* and *History*
(the ``switchable`` trait; the bar's code, static/session_bar.js, travels in ``session_ui`` only to
widgets that show it): ``{"type": "new_chat"}`` starts ``agent.new_conversation()``;
``{"type": "history", "id"}`` is answered with ``{"type": "history", "id", "sessions": [{path,
title, updated, turns, error}], "current": path}`` from ``list_sessions(agent.save_to)``;
``{"type": "open_session", "path"}`` (a path of that folder) makes ``agent.open_session(path)``
the active conversation. Either way the widget is rebound to it (``ChatWidget.rebind``).
The ``autosave`` trait mirrors the agent's ``autosave_status.line()`` after each turn's save.

When the provider is a replay, the ``replay`` trait holds its ``status`` as a protocol
``ReplayState`` (step n of N, waiting for Next, a typed prompt that differs from the recorded one)
and ``step_waiting`` whether a ``step=True`` replay waits for ``next_step()`` (both looked at every
``STEP_POLL`` s while a turn from the widget runs); ``{"type": "next"}`` calls ``next_step()`` and
``{"type": "replay_choice", "choice"}`` answers a mismatch (``provider.choose``). The requests are protocol.py's; ``serve`` registers their handlers on
the widget's. The agent is duck-typed: this layer does not import ``Agent``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ConfigError, InvalidRequest
from .protocol import (CHAT, History, HistoryRequest, Handlers, NewChat, NextStep, OpenSession, ReplayChoiceRequest,
                       ReplayState)
from .session_rows import session_rows

if TYPE_CHECKING:
    from ..providers.replay import ReplayProvider, ReplayStatus

_STATIC = Path(__file__).parent / "static"
SESSION_REQUESTS = frozenset(r.KIND for r in (NewChat, HistoryRequest, OpenSession, NextStep, ReplayChoiceRequest))  # handled here
STEP_POLL = 0.1  # seconds between looks at a stepping replay's `waiting` while a turn runs
HISTORY_ROWS = 50  # the History list shows the newest this many sessions
__all__ = ["HISTORY_ROWS", "SESSION_REQUESTS", "STEP_POLL", "SessionControls", "replay_state"]


def replay_state(status: ReplayStatus) -> dict:
    """A replay's status as the ``replay`` trait's value (protocol.ReplayState, as synced)."""
    m = status.mismatch
    return CHAT.encode(ReplayState(
        status.step, status.steps, status.waiting, m is not None, m.recorded_prompt if m else "",
        m.prompt if m else "", m.live if m else "", m.live_unavailable if m else "", status.live, status.stepping,
        status.waits))


def _replay_provider(provider: Any) -> ReplayProvider | None:
    """``provider`` when it is a replay. The replay module is not imported for this: while no one
    imported it, no replay provider exists (a chat's first display stays light, issue #32)."""
    replay = sys.modules.get("nbagent.providers.replay")
    return provider if replay is not None and isinstance(provider, replay.ReplayProvider) else None


class SessionControls:
    """The agent behind a chat widget and what its session buttons do."""

    def __init__(self, widget: Any, agent: Any = None) -> None:
        self.widget = widget
        self.agent = agent
        self.serve(widget.handlers)
        widget.switchable = self.folder is not None
        if widget.switchable or self.replaying:  # the bar's code, only where it shows
            widget.session_ui = (_STATIC / "session_bar.js").read_text(encoding="utf-8")
        self.show_autosave()
        self.show_replay()

    @property
    def replaying(self) -> bool:
        """Whether the widget's model is a replay (the counter and mismatch notice show)."""
        return _replay_provider(self.provider) is not None

    def show_replay(self) -> None:
        """Mirror the replay's status in the ``replay`` and ``step_waiting`` traits."""
        provider = _replay_provider(self.provider)
        if provider is None:
            return
        status = provider.status
        prompts = getattr(self.widget, "prompts", None)  # None: the widget is being made
        running = prompts is not None and prompts.running()
        state = replay_state(status)
        waiting = status.waiting and running
        with self.widget.hold_sync():
            if state != self.widget.replay:
                self.widget.replay = state
            if waiting != self.widget.step_waiting:
                self.widget.step_waiting = waiting

    def show_autosave(self) -> None:
        """Mirror the agent's autosave status in the ``autosave`` trait (after each turn's save)."""
        status = getattr(self.agent, "autosave_status", None)
        line = status.line() if status is not None else ""
        if self.widget.autosave != line:
            self.widget.autosave = line

    @property
    def folder(self) -> Path | None:
        """The agent's ``save_to`` folder (None: no New chat / History)."""
        folder = getattr(self.agent, "save_to", None)
        return Path(folder) if folder is not None else None

    @property
    def provider(self) -> Any:
        agent = self.agent
        if agent is not None:
            return getattr(agent, "provider", None)
        conn = getattr(self.widget.conversation, "connection", None)
        return getattr(conn, "provider", None)

    def serve(self, handlers: Handlers) -> None:
        """Handle the chat protocol's session requests (protocol.py)."""
        handlers.on(NextStep, lambda r: self.next_step())
        handlers.on(ReplayChoiceRequest, lambda r: self.choose(r.choice))
        handlers.on(HistoryRequest, lambda r: History(r.id, **self.history()))
        handlers.on(NewChat, lambda r: self.new_chat())
        handlers.on(OpenSession, lambda r: self.open(r.path))

    def _agent(self) -> Any:
        if self.folder is None:
            raise ConfigError("New chat and History need an Agent with save_to=folder")
        return self.agent

    def new_chat(self) -> None:
        """A fresh conversation of the agent (same settings), shown in this widget."""
        agent = self._agent()
        self._idle()
        self.widget.rebind(agent.new_conversation())
        self.show_autosave()

    def history(self) -> dict:
        """The newest sessions of the agent's folder, for the History list."""
        folder = self._agent().save_to
        rows = session_rows(folder) if Path(folder).is_dir() else []
        keep = ("path", "title", "updated", "turns", "error")
        current = getattr(self.agent, "session_path", None)
        return {"sessions": [{k: r[k] for k in keep} for r in rows[:HISTORY_ROWS]],
                "current": os.fspath(current) if current is not None else ""}

    def open(self, path: str) -> None:
        """Make a session of the agent's folder the active conversation, shown in this widget."""
        agent = self._agent()
        target = Path(path).expanduser()
        if not path or target.parent.resolve() != Path(agent.save_to).expanduser().resolve() or not target.is_file():
            raise InvalidRequest(f"{path!r} is not a session of {agent.save_to}")
        self._idle()
        self.widget.rebind(agent.open_session(target))
        self.show_autosave()

    def _idle(self) -> None:
        if self.widget.prompts.running() or not self.widget.conversation.is_idle():
            raise ConfigError("a turn is running; stop it first")

    # --- replay steps ---------------------------------------------------------------------

    def next_step(self) -> None:
        provider = self.provider
        if provider is None or not getattr(provider, "step", False):
            raise ConfigError("Next is for a replay with step=True")
        provider.next_step()
        self.widget.step_waiting = False
        self.show_replay()

    def choose(self, choice: str) -> None:
        """The mismatch notice's answer: continue with the recording, or answer live."""
        provider = _replay_provider(self.provider)
        if provider is None:
            raise ConfigError("a replay choice is for a replay model")
        provider.choose(choice)
        self.show_replay()

    def watch_steps(self, task: asyncio.Future) -> None:
        """While ``task`` (a turn from the widget) runs, mirror the replay's status (and once after)."""
        if not self.replaying:
            return
        loop = task.get_loop()

        def look() -> None:
            self.show_replay()
            if not task.done():
                loop.call_later(STEP_POLL, look)

        loop.call_soon(look)
        task.add_done_callback(lambda t: loop.call_soon(self.show_replay))
