"""SessionBrowser: a folder of saved conversations as a notebook widget (front end: js/src/browser/,
static/folders.js, sent in the ``_ui`` trait and run by the chat's bundle, static/widget.js).

Traits (durable): ``folder``, ``sessions`` (the rows of ``list_sessions``, newest first, as JSON:
path, title, created, updated, models, turns, tokens, cost_usd, user, error), ``notice`` and
``chat``, the ``"anywidget:<model id>"`` reference of the live chat a *Resume* opened ("" none).

Requests (front end -> kernel, declared in protocol.py's ``BROWSER``, one handler each; each answered
once with ``{"type": "reply", "id", "ok", "error"?, ...}``): ``{"type": "open", "id", "path"}`` -> ``turns`` (the chat widget's turn dicts, rendered
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

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from ..core.conversation_state import ConversationEvent, plumbing_of
from ..core.errors import InvalidRequest, NbagentError
from ..core.session_file import gc_paused, read_session
from .protocol import (BROWSER, AssetCode, BrowserAsset, Export, Exported, Found, Handlers, Open, Opened, Refresh,
                       Restore, Restored, Resume, Resumed, Search, Trash, Trashed)
from .session_rows import session_rows
from .widget import ChatWidget, asset_code
from .turn_codec import TurnBuffer, jsonable

_STATIC = Path(__file__).parent / "static"
__all__ = ["SessionActions", "SessionBrowser", "folder_ui", "session_rows", "session_turns"]


def folder_ui() -> str:
    """The folder widgets' front end (static/folders.js: the session browser and the class view),
    sent in their ``_ui`` trait so that chat widgets, which share widget.js with them, never carry it."""
    return (_STATIC / "folders.js").read_text(encoding="utf-8")


@dataclass(frozen=True)
class SessionActions:
    """What the browser's buttons do to a session file (given by ``nbagent.session_browser``)."""

    resume: Callable[[Path], Any]  # -> an Agent (the chat widget is made for it)
    export: Callable[[Path, str], Path]  # (path, "md" | "html") -> the written file
    trash: Callable[[Path], Path]  # -> where the file went
    restore: Callable[[Path], Path] | None = None  # a trashed file -> where it is back


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

    _esm = _STATIC / "widget.js"  # one bundle for the chat and the browser: ``_role`` picks the browser,
    _ui = traitlets.Unicode("").tag(sync=True)  # whose code (static/folders.js) widget.js runs
    _css = _STATIC / "widget.css"

    folder = traitlets.Unicode("").tag(sync=True)
    sessions = traitlets.List(traitlets.Dict()).tag(sync=True)
    notice = traitlets.Unicode("").tag(sync=True)
    chat = traitlets.Unicode("").tag(sync=True)  # "anywidget:<model id>" of the resumed chat
    _key = traitlets.Unicode("").tag(sync=True)
    _role = traitlets.Unicode("session_browser").tag(sync=True)  # widget.js renders the browser for it

    def __init__(self, folder: str | os.PathLike, actions: SessionActions, **kwargs: Any) -> None:
        folder = Path(folder).expanduser()
        super().__init__(_key=uuid.uuid4().hex, _ui=folder_ui(), folder=os.fspath(folder), **kwargs)
        self.actions = actions
        self.agent: Any = None  # the agent of the resumed chat
        self.chat_widget: Any = None
        self._trashed: set[str] = set()  # what Delete moved to the trash: what Undo may move back
        self.handlers = self._serve()
        self.refresh()
        self.on_msg(self._on_msg)

    def refresh(self) -> None:
        """List the folder again."""
        if not Path(self.folder).is_dir():
            self.sessions, self.notice = [], f"There is no folder {self.folder} yet: sessions saved there show after Refresh."
            return
        rows = session_rows(self.folder)
        with gc_paused():  # the trait's validation and the message copy every row
            self.sessions, self.notice = rows, ""

    def _listed(self, path: str) -> Path:
        if not any(row["path"] == path for row in self.sessions):
            raise InvalidRequest(f"{path!r} is not a session this browser lists")
        return Path(path)

    def _serve(self) -> Handlers:
        """The browser's handlers of its protocol (protocol.py); each request is answered once."""
        handlers = Handlers(BROWSER, lambda message: self.send(message))
        handlers.on(Refresh, lambda r: self.refresh())
        handlers.on(Search, self._search)
        handlers.on(BrowserAsset, self._asset)
        handlers.on(Open, self._open)
        handlers.on(Export, lambda r: Exported(os.fspath(self.actions.export(self._listed(r.path), r.fmt))))
        handlers.on(Trash, self._trash)
        handlers.on(Restore, self._restore)
        handlers.on(Resume, lambda r: self._resume(self._listed(r.path)))
        return handlers

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any = None) -> None:
        self.handlers.receive(content)  # answered in the view, never a traceback in the cell

    def _search(self, request: Search) -> Found:
        text = request.text.lower().strip()
        return Found([r["path"] for r in self.sessions if text and not r["error"] and _contains(r["path"], text)])

    def _asset(self, request: BrowserAsset) -> AssetCode:
        """A shown session met math or a code block needing a grammar (see widget.py)."""
        code = asset_code(request.name)
        if code is None:
            raise InvalidRequest(f"no asset {request.name!r}")
        return AssetCode(code)

    def _open(self, request: Open) -> Opened:
        path = self._listed(request.path)
        turns, usage = session_turns(path)
        return Opened(str(path), turns, usage)

    def _trash(self, request: Trash) -> Trashed:
        moved = os.fspath(self.actions.trash(self._listed(request.path)))
        self._trashed.add(moved)
        self.refresh()
        return Trashed(moved, undo=moved)

    def _restore(self, request: Restore) -> Restored:
        """*Undo* of a Delete: the file back from the trash, listed again."""
        if request.path not in self._trashed or self.actions.restore is None:
            raise InvalidRequest(f"{request.path!r} is not a session this browser moved to the trash")
        back = self.actions.restore(Path(request.path))
        self._trashed.discard(request.path)
        self.refresh()
        return Restored(os.fspath(back))

    def _resume(self, path: Path) -> Resumed:
        agent = self.actions.resume(path)
        old = self.chat_widget
        self.agent, self.chat_widget = agent, ChatWidget(agent)
        plumbing_of(agent.conversation).add_listener(self._on_resumed_event)
        self.chat = f"anywidget:{self.chat_widget.model_id}"
        if old is not None:
            old.close()
        return Resumed(str(path))

    def _on_resumed_event(self, event: ConversationEvent, _payload: Any) -> None:
        """A turn of the resumed chat ended (and was saved): its row shows the new figures."""
        if event == ConversationEvent.TURN_FINISHED:
            try:
                self.refresh()
            except Exception as exc:  # the list stays as it was; the chat goes on
                self.notice = f"refresh failed: {exc}"

    def __repr__(self) -> str:
        return f"<SessionBrowser {self.folder!r}: {len(self.sessions)} sessions>"
