"""ClassView: the teacher's live view of a shared ``save_to`` folder (``nbagent.class_view``), one row
per student, updated as their sessions save (front end: js/src/classview/, in static/folders.js with
the session browser, sent in the ``_ui`` trait and run by the chat's bundle).

A background thread polls the folder every ``interval`` seconds: ``ClassFolder.scan`` re-reads only
the files whose modification time or size changed, and only the rows that differ from what the view
has go to the front end (a ``changed`` event: rows, removed users, notice). The rows are not a
synced trait: a view asks for all of them once (``rows``), then follows the events.

Requests (front end -> kernel, declared in protocol.py's ``CLASS``, answered in the ``reply``
envelope as in the session browser): ``{"type": "rows", "id"}`` -> ``rows``, ``notice``;
``{"type": "open", "id", "path"}`` -> a student's latest session as the chat's turn dicts
(``session_turns``, rendered read-only by the browser's code); ``{"type": "asset", "id", "name"}``.
Only the latest sessions the view lists are opened.
"""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..analysis.class_summary import HELP_PATTERN, ClassFolder, with_course_budget
from ..core.errors import ConfigError, InvalidRequest
from .protocol import (CLASS, AssetCode, BrowserAsset, ClassRows, Handlers, Open, Opened, RowsChanged,
                       RowsRequest)
from .session_browser import folder_ui, session_turns
from .widget import asset_code

_STATIC = Path(__file__).parent / "static"
__all__ = ["ClassView", "class_view"]


class ClassView(anywidget.AnyWidget):
    """One row per student of a shared session folder, live; a click opens a student's latest chat."""

    _esm = _STATIC / "widget.js"  # one bundle: ``_role`` picks the class view,
    _ui = traitlets.Unicode("").tag(sync=True)  # whose code (static/folders.js) widget.js runs
    _css = _STATIC / "widget.css"

    folder = traitlets.Unicode("").tag(sync=True)
    budget_usd = traitlets.Float(None, allow_none=True).tag(sync=True)
    period = traitlets.Unicode("day").tag(sync=True)
    _key = traitlets.Unicode("").tag(sync=True)
    _role = traitlets.Unicode("class_view").tag(sync=True)  # widget.js renders the class view for it

    def __init__(self, folder: str | os.PathLike, *, interval: float = 2.0, budget_usd: float | None = None,
                 period: str | None = None, pricing: Any = None, help_pattern: str = HELP_PATTERN,
                 **kwargs: Any) -> None:
        if not interval > 0:
            raise ConfigError(f"interval must be a number of seconds > 0, not {interval!r}")
        self._period_given = period
        self._follows_course = budget_usd is None  # the course policy's budget, as the teacher edits it
        budget_usd, budget_period = with_course_budget(folder, budget_usd, period)
        self.summary = ClassFolder(folder, budget_usd=budget_usd, period=budget_period, pricing=pricing,
                                   help_pattern=help_pattern)
        super().__init__(_key=uuid.uuid4().hex, _ui=folder_ui(), folder=os.fspath(Path(folder).expanduser()),
                         budget_usd=budget_usd, period=budget_period.value, **kwargs)
        self.interval = float(interval)
        self._lock = threading.RLock()
        self._rows: dict[str, dict] = {}  # user -> the row the front end has
        self._notice = ""
        self._stop = threading.Event()
        self.handlers = Handlers(CLASS, lambda message: self.send(message))
        self.handlers.on(RowsRequest, lambda r: ClassRows(list(self.rows), self._notice))
        self.handlers.on(Open, self._open)
        self.handlers.on(BrowserAsset, self._asset)
        self.on_msg(lambda _w, content, _b=None: self.handlers.receive(content))
        self._changes()  # the first rows: a view asks for them (``rows``)
        self._thread = threading.Thread(target=self._run, name=f"nbagent class view {self.folder}", daemon=True)
        self._thread.start()

    @property
    def rows(self) -> list[dict]:
        """The rows as the front end has them, sorted by user."""
        with self._lock:
            return [self._rows[u] for u in sorted(self._rows)]

    def poll(self) -> RowsChanged | None:
        """Scan the folder now (the thread does it every ``interval``) and send the rows that changed
        since the last poll to the front end; returns them (None: nothing changed)."""
        with self._lock:  # rows go out in the order they were read
            change = self._changes()
            if change is not None and self.comm is not None:
                self.handlers.emit(change)
        return change

    def _changes(self) -> RowsChanged | None:
        with self._lock:
            if self._follows_course:
                self._follow_course()
            self.summary.scan()
            rows = {r["user"]: r for r in self.summary.rows()}
            notice = self._notice_text()
            changed = [r for u, r in sorted(rows.items()) if self._rows.get(u) != r]
            removed = sorted(set(self._rows) - set(rows))
            moved = notice != self._notice
            self._rows, self._notice = rows, notice
        if not (changed or removed or moved):
            return None
        return RowsChanged(changed, removed, notice)

    def _follow_course(self) -> None:
        """Take the course policy's budget and period again (an edit that does not parse keeps the last)."""
        try:
            budget_usd, period = with_course_budget(self.folder, None, self._period_given)
        except ConfigError:
            return
        if self.summary.set_budget(budget_usd, period):
            self.budget_usd, self.period = budget_usd, period.value

    def _notice_text(self) -> str:
        if not self.summary.files:
            return f"No saved sessions in {self.folder} yet: students' rows show here as their chats save."
        skipped = self.summary.skipped
        if not skipped:
            return ""
        names = ", ".join(f"{os.path.basename(p)} ({why})" for p, why in sorted(skipped.items())[:3])
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        return f"Skipped {len(skipped)} unreadable file{'s' if len(skipped) > 1 else ''}: {names}{more}"

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self.comm is None:  # closed
                return
            try:
                self.poll()
            except Exception as exc:  # an unreadable folder: say so (once) and keep polling
                notice = f"could not read {self.folder}: {exc}"
                with self._lock:
                    moved, self._notice = notice != self._notice, notice
                if moved:
                    try:
                        self.handlers.emit(RowsChanged([], [], notice))
                    except Exception:  # the comm is gone
                        return

    def _open(self, request: Open) -> Opened:
        if not request.path or not any(r["latest_session"] == request.path for r in self.rows):
            raise InvalidRequest(f"{request.path!r} is not a session this view lists")
        turns, usage = session_turns(request.path)
        costs = self._turn_costs(request.path)
        for row, turn in zip(usage, turns):
            if row.get("turn") in costs:
                row["cost"] = costs[row["turn"]]
                if turn.get("record"):
                    turn["record"]["cost"] = costs[row["turn"]]
        return Opened(request.path, turns, usage)

    def _turn_costs(self, path: str) -> dict[int, float]:
        """Each turn's cost as the student's row counts it (the view's prices, else the session's own)."""
        listed = self.summary.files.get(path)
        if listed is None or listed.head is None:
            return {}
        return {rec.turn: cost for rec, cost in zip(listed.head.turns, listed.costs)}

    def _asset(self, request: BrowserAsset) -> AssetCode:
        code = asset_code(request.name)
        if code is None:
            raise InvalidRequest(f"no asset {request.name!r}")
        return AssetCode(code)

    def close(self) -> None:
        """Stop polling and close the widget."""
        self._stop.set()
        super().close()

    def __repr__(self) -> str:
        return f"<ClassView {self.folder!r}: {len(self._rows)} students>"


def class_view(folder: str | os.PathLike, *, interval: float = 2.0, budget_usd: float | None = None,
               period: str | None = None, pricing: Any = None, help_pattern: str = HELP_PATTERN) -> ClassView:
    """The teacher's live view of a shared ``save_to`` folder: ``class_summary(folder)``'s rows (one
    per student: sessions, turns, tokens, cost, last activity, errors in a row, over budget, asked for
    help), polled every ``interval`` seconds; over-budget, failing and help rows are highlighted, and
    a click on a row shows that student's latest chat, read-only. Without ``budget_usd`` the course
    policy over the folder sets the budget, and an edit of it applies at the next poll. ``view.close()``
    stops the polling."""
    return ClassView(folder, interval=interval, budget_usd=budget_usd, period=period, pricing=pricing,
                     help_pattern=help_pattern)
