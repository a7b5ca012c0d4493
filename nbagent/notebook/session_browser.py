"""SessionBrowser: a folder of saved conversations as a notebook widget (front end: js/src/browser/).

Traits (durable): ``folder``, ``sessions`` (the rows of ``list_sessions``, newest first, as JSON:
path, title, created, updated, models, turns, tokens, cost_usd, user, error), ``notice`` and
``chat``, the ``"anywidget:<model id>"`` reference of the live chat a *Resume* opened ("" none).

Requests (front end -> kernel, each answered once with ``{"type": "reply", "id", "ok", "error"?,
...}``): ``{"type": "open", "id", "path"}`` -> ``turns`` (the chat widget's turn dicts, rendered
read-only by the same code) and ``usage`` (one row per turn); ``{"type": "search", "id", "text"}``
-> ``paths`` whose full text contains it; ``{"type": "export", "id", "path", "fmt"}`` ->
``written``; ``{"type": "trash", "id", "path"}`` -> ``moved`` and ``undo`` (the list is refreshed);
``{"type": "restore", "id", "path": undo}`` -> ``restored``, the file back in the folder (only files
this browser moved to the trash, each once);
``{"type": "resume", "id", "path"}`` -> the ``chat`` trait names the new chat widget;
``{"type": "refresh", "id"}`` (also done after each turn of the resumed chat). Only paths the
browser listed are acted on.

Resuming, exporting and trashing are the facade's (``nbagent.session_folder``): the browser is
given them as ``SessionActions`` and never imports the layer above it.
"""

from __future__ import annotations

import math
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from ..analysis.session_list import list_sessions
from ..core.conversation_state import ConversationEvent
from ..core.errors import NbagentError
from ..core.session_file import read_session
from .widget_wire import TurnBuffer, jsonable

_STATIC = Path(__file__).parent / "static"
ROW_FIELDS = ("path", "title", "created", "updated", "models", "turns", "tokens", "cost_usd", "user", "error")
__all__ = ["SessionActions", "SessionBrowser", "session_rows", "session_turns"]


@dataclass(frozen=True)
class SessionActions:
    """What the browser's buttons do to a session file (given by ``nbagent.session_browser``)."""

    resume: Callable[[Path], Any]  # -> an Agent (the chat widget is made for it)
    export: Callable[[Path, str], Path]  # (path, "md" | "html") -> the written file
    trash: Callable[[Path], Path]  # -> where the file went
    restore: Callable[[Path], Path] | None = None  # a trashed file -> where it is back


def session_rows(folder: str | os.PathLike) -> list[dict]:
    """``list_sessions(folder)`` as JSON rows (timestamps as ISO strings, unknown numbers as None)."""
    df = list_sessions(folder)
    rows = []
    for rec in df.to_dict("records"):
        row: dict[str, Any] = {}
        for name in ROW_FIELDS:
            value = rec.get(name)
            if hasattr(value, "isoformat"):
                value = None if value != value else value.isoformat()  # NaT != NaT
            elif isinstance(value, float) and math.isnan(value):
                value = None
            row[name] = value
        rows.append(row)
    return jsonable(rows)


def session_turns(path: str | os.PathLike) -> tuple[list[dict], list[dict]]:
    """A saved session as the chat widget's turn dicts, and its usage (one row per turn)."""
    state = read_session(Path(path))
    records = {r.turn: r for r in state.turns}
    buffers: dict[int, TurnBuffer] = {}
    for step in state.steps:
        buffers.setdefault(step.turn, TurnBuffer(records.get(step.turn))).steps[step.step_index] = step
    turns = [buffers[n].to_dict() for n in sorted(buffers)]
    usage = []
    for turn in turns:
        rec = turn["record"] or {}
        tokens = rec.get("usage") or {}
        usage.append({"turn": rec.get("turn"), "model": rec.get("model", ""), "status": rec.get("status", ""),
                      "input_tokens": tokens.get("prompt_token_count", 0),
                      "output_tokens": tokens.get("candidates_token_count", 0),
                      "cached_tokens": tokens.get("cached_content_token_count", 0),
                      "cost": rec.get("cost"), "duration": rec.get("duration")})
    return turns, jsonable(usage)


def _contains(path: str, text: str) -> bool:
    try:
        state = read_session(path)
    except NbagentError:
        return False
    return any(text in s.content.lower() or text in s.thinking.lower() for s in state.steps)


class SessionBrowser(anywidget.AnyWidget):
    """The saved conversations of a folder: search, read, resume, export, delete (to the trash)."""

    _esm = _STATIC / "session_browser.js"
    _css = _STATIC / "session_browser.css"

    folder = traitlets.Unicode("").tag(sync=True)
    sessions = traitlets.List(traitlets.Dict()).tag(sync=True)
    notice = traitlets.Unicode("").tag(sync=True)
    chat = traitlets.Unicode("").tag(sync=True)  # "anywidget:<model id>" of the resumed chat
    _key = traitlets.Unicode("").tag(sync=True)

    def __init__(self, folder: str | os.PathLike, actions: SessionActions, **kwargs: Any) -> None:
        folder = Path(folder).expanduser()
        super().__init__(_key=uuid.uuid4().hex, folder=os.fspath(folder), **kwargs)
        self.actions = actions
        self.agent: Any = None  # the agent of the resumed chat
        self.chat_widget: Any = None
        self._trashed: set[str] = set()  # what Delete moved to the trash: what Undo may move back
        self.refresh()
        self.on_msg(self._on_msg)

    def refresh(self) -> None:
        """List the folder again."""
        if not Path(self.folder).is_dir():
            self.sessions, self.notice = [], f"There is no folder {self.folder} yet: sessions saved there show after Refresh."
            return
        self.sessions, self.notice = session_rows(self.folder), ""

    def _listed(self, content: dict) -> Path:
        path = str(content.get("path", ""))
        if not any(row["path"] == path for row in self.sessions):
            raise NbagentError(f"{path!r} is not a session this browser lists", kind="invalid_request")
        return Path(path)

    def _on_msg(self, _widget: Any, content: dict, _buffers: Any = None) -> None:
        if not isinstance(content, dict):
            return
        kind, rid = content.get("type"), str(content.get("id", ""))
        try:
            reply = self._handle(str(kind), content)
        except Exception as exc:  # answered in the view, never a traceback in the cell
            reply = {"ok": False, "error": str(exc) or type(exc).__name__}
        self.send({"type": "reply", "id": rid, "ok": True, **reply})

    def _handle(self, kind: str, content: dict) -> dict:
        if kind == "refresh":
            self.refresh()
            return {}
        if kind == "search":
            text = str(content.get("text", "")).lower().strip()
            return {"paths": [r["path"] for r in self.sessions if text and not r["error"] and _contains(r["path"], text)]}
        if kind == "asset":  # a shown session met math or a code block needing a grammar (see widget.py)
            from .widget import asset_code

            code = asset_code(content.get("name"))
            if code is None:
                raise NbagentError(f"no asset {content.get('name')!r}", kind="invalid_request")
            return {"code": code}
        if kind == "restore":
            return self._restore(str(content.get("path", "")))
        path = self._listed(content)
        if kind == "open":
            turns, usage = session_turns(path)
            return {"path": str(path), "turns": turns, "usage": usage}
        if kind == "export":
            return {"written": os.fspath(self.actions.export(path, str(content.get("fmt", "md"))))}
        if kind == "trash":
            moved = os.fspath(self.actions.trash(path))
            self._trashed.add(moved)
            self.refresh()
            return {"moved": moved, "undo": moved}
        if kind == "resume":
            return self._resume(path)
        raise NbagentError(f"unknown request {kind!r}", kind="invalid_request")

    def _restore(self, trashed: str) -> dict:
        """*Undo* of a Delete: the file back from the trash, listed again."""
        if trashed not in self._trashed or self.actions.restore is None:
            raise NbagentError(f"{trashed!r} is not a session this browser moved to the trash", kind="invalid_request")
        back = self.actions.restore(Path(trashed))
        self._trashed.discard(trashed)
        self.refresh()
        return {"restored": os.fspath(back)}

    def _resume(self, path: Path) -> dict:
        from .widget import ChatWidget

        agent = self.actions.resume(path)
        old = self.chat_widget
        self.agent, self.chat_widget = agent, ChatWidget(agent)
        agent.conversation.add_listener(self._on_resumed_event)
        self.chat = f"anywidget:{self.chat_widget.model_id}"
        if old is not None:
            old.close()
        return {"path": str(path)}

    def _on_resumed_event(self, event: ConversationEvent, _payload: Any) -> None:
        """A turn of the resumed chat ended (and was saved): its row shows the new figures."""
        if event == ConversationEvent.TURN_FINISHED:
            try:
                self.refresh()
            except Exception as exc:  # the list stays as it was; the chat goes on
                self.notice = f"refresh failed: {exc}"

    def __repr__(self) -> str:
        return f"<SessionBrowser {self.folder!r}: {len(self.sessions)} sessions>"
