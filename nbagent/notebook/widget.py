"""ChatWidget: a Conversation rendered in the notebook (anywidget front end in ``js/``).

Every custom message below is declared once in protocol.py (``CHAT``: a dataclass per request and
per event); the widget registers a handler per request (``_serve``) and the session controls add
theirs. What follows is how they work together.

Wire protocol (kernel -> front end):

- traits: ``finished`` (how many finished turns there are), ``running`` (a turn is in flight),
  ``notice`` (a widget-level message) and ``gauge`` (context and spend, see widget_usage.py; once
  a turn, with its end; only a change goes). ``running``, ``finished`` and ``gauge`` changes that go
  with a flush's ``deltas`` message ride in it (its ``state``; the gauge as its changed keys;
  ``finished`` only when the ended patches do not tell it), set in the kernel without a state
  update of their own. The view that sends a prompt shows it and Stop at once (a local echo, until
  the kernel's turn brings the prompt), so a turn run from the box costs three messages when its
  answer comes within a window: ``running`` alone (sent the moment the prompt is taken: the other
  views show Stop, and in JupyterLab the first text follows sooner than when ``running`` waits for
  the first flush), its start (the prompt's echo, the first text) and its end (the last patch and
  deltas, ``gauge``, ``running`` false).
  A turn is ``{"record": {...TurnRecord, cost?}, "steps": [step dicts]}``; a *bare* one has each
  step's ``content`` / ``thinking`` replaced by ``"n": [their lengths]`` (the text travels as
  deltas only). ``current`` (the running turn, bare) is a property, not a trait: the views get
  the running turn's structure as patches (below).
- custom messages: ``{"type": "deltas", "items": [[step_index, "c"|"t", offset, text], ...],
  "patches": [...]}`` with every delta and structural change since the last flush, one message
  at most every ``FLUSH_INTERVAL`` seconds,
  except that the first text of a model step goes out at once (the first token is not held by a
  window the prompt's own echo opened; the window restarts from it);
  ``offset`` is where the text starts in the step's content ("c") or thinking ("t"), in UTF-16
  units as JavaScript counts (so are the lengths ``n`` below), so a view can
  drop what it already has and detect a gap; an item with a 5th element ``true`` replaces the
  field from ``offset`` on (text rewritten, not appended). Every step's text, the prompt's
  included, goes this way, once.
  ``patches`` (applied before the text) carry the running turn's *structural* changes (a step
  appears, changes status, gets tool calls or usage) as ``{"turn": n, "record"?, "steps"?,
  "ended"?}``: only what changed since the last patch in what a live view shows
  (``widget_wire.TurnBuffer.patch``, ``widget_wire.live_step``: no times or finish reasons of
  prompts and model calls, no finish that says nothing): the record's changed fields (a new one
  starts with the turn before's model and provider; the footer's figures wait for the end), each
  new step whole (its type, source and target left out when they are the usual ones for its
  kind, ``widget_wire.USUAL_SHAPES``, and what a view derives: its status, times that follow the
  step before, the record's model and finish reason, ``widget_wire.derived_fields``; as
  ``[step_index, kind]`` when that is all it says) and each changed step's changed fields (null:
  gone; a usage as its counts in ``widget_wire.USAGE_FIELDS`` order), so a mid-turn patch is tens
  of bytes, not the turn; a step's lengths ``n`` go once it is no longer active, unless the same
  message's deltas carry its text to its end; ``ended``: the turn's end (the record done, STOP,
  and its active steps done unless the patch says otherwise), with the steps' lengths ``n``.
  ``{"type": "turn", "turn": bare turn}``: a finished turn changed (a result set later), sent
  whole and bare. Finished turns are not traits: the kernel keeps them, so nothing is re-sent as
  a conversation grows.
  ``{"type": "turns", "turns": [whole turns], "first", "last"}``: the answer to a resync, every
  turn with its text (the running one last), oldest first, in pages of about ``PAGE_CHARS``; the
  first page tells a view to drop what it has. A view asks (``{"type": "resync"}``) when it
  arrives without the turns (a page reload, ``finished`` above what it has, a new
  ``conversation_key``) or misses text or structure (a bare step longer than its own, a delta
  past its end, a patch of a step it never saw);
  custom messages sent before a view exists are lost, hence asking.
- the whole state (a reloaded page's state request, an embedded page's state; not the comm's
  opening, sent before the turns are loaded) also has ``turns``: every turn whole, as a resync's
  pages carry them (``get_state``).

  A refused prompt (empty, or a turn is already running) is answered with
  ``{"type": "refused", "text"}`` so the view that sent it drops its echo and unlocks at once; an
  over-budget one with ``{"type": "confirm", "prompt", "text"}`` (see widget_usage.py).

Front end -> kernel: ``{"type": "send", "prompt", "over_budget"?}``, ``{"type": "stop"}``,
``{"type": "approve", "call_id"}``, ``{"type": "deny", "call_id", "reason"}``,
``{"type": "resync"}``, ``{"type": "asset", "name"}`` (the view met math or a code block
needing a grammar: the kernel answers ``{"type": "asset", "name", "code"}`` with a module of
ASSETS, static/math.js (Temml) or static/grammars.js (highlight.js grammars), once per page),
``{"type": "names", "id"}`` (``@`` typed in the box: the kernel answers ``{"type": "names",
"id", "names": [[name, type name], ...]}`` from the user's namespace, see variables.py); a
``send`` may carry ``cells``, the ``@cell`` references the view resolved (cell_refs.py);
``{"type": "notebook", ...}``, ``{"type": "provenance", ...}`` and ``{"type": "undo", ...}``: the
live notebook, *Insert as cell below*'s metadata and a card's Undo (live_notebook.py);
``{"type": "new_chat"}``, ``{"type": "history", "id"}``, ``{"type": "open_session", "path"}`` and
``{"type": "next"}``, ``{"type": "replay_choice", "choice"}``: the agent's conversations and replay
steps (see widget_sessions.py; the ``switchable``, ``step_waiting``, ``replay``, ``conversation_key``
and ``session_ui`` traits go with them;
``autosave`` is the agent's ``autosave_status.line()``: why turns are not being saved, until a save
works, or the branch they go to; "" when all is well).
A prompt runs as an asyncio task on the kernel's loop,
so Stop / Approve / Deny are handled while it streams; ``running`` is true from
the moment a prompt is accepted until its task ends.

Display: showing the widget also shows the transcript (safe markdown in
``<div class="nbagent-transcript">``, with a short display id and no empty ``text/plain``) after
it: one output with the turns so far, then one
output appended per finished turn, each sent once (transcript_output.py); a turn asked from code
in another cell goes to that cell's outputs instead. So a saved notebook shows the whole
conversation as it was when saved — on GitHub, nbviewer, nbconvert, in Jupyter without the
kernel, and after ``nbconvert --execute`` or papermill. The widget's CSS hides them next to a live
chat; a widget rendered without a kernel and without its turns (a headless run's saved widget
state) steps aside for them.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..core.conversation_state import ConversationEvent, has_plumbing, plumbing_of
from ..core.errors import ConfigError
from ..core.ledger import TurnRecord
from ..core.steps import Step, StepSource, TurnStatus
from . import view_presence
from .conversation_view import ConversationView
from .live_notebook import serve as serve_live_notebook
from .protocol import (CHAT, Approve, AssetModule, AssetRequest, Confirm, Deltas, Deny, Handlers, Names, NamesRequest,
                       Refused, Resync, Send, Stop, TurnEnded, TurnsPage, ViewShown)
from .transcript_output import TranscriptOutput, transcript_piece
from .widget_sessions import SessionControls
from .widget_usage import course_notice, gate, gauge_dict
from .widget_wire import PendingDelta, TurnBuffer, jsonable, record_dict, step_dict, step_shape, utf16_len

FLUSH_INTERVAL = 0.04  # seconds between flushes: <= 25 messages/s whatever the token rate
PAGE_CHARS = 500_000  # a resync's finished turns go in messages of about this size at most
PREPARE_GRACE_SECONDS = 3.0  # past the attachments' own limits, how long a prompt's preparation may take
_STATIC = Path(__file__).parent / "static"
ASSETS = {"math": "math.js", "grammars": "grammars.js"}  # modules a view loads when it first needs them
__all__ = ["ASSETS", "asset_code", "ChatWidget", "FLUSH_INTERVAL", "PAGE_CHARS", "record_dict", "step_dict"]


def asset_code(name: object) -> str | None:
    """The code of the module a view asked for by name (ASSETS), or None for any other name."""
    return (_STATIC / ASSETS[name]).read_text(encoding="utf-8") if isinstance(name, str) and name in ASSETS else None


class ChatWidget(anywidget.AnyWidget):
    """Chat with a Conversation in a notebook cell: streaming thoughts, text and tool calls."""

    _esm = _STATIC / "widget.js"
    _css = _STATIC / "widget.css"

    finished = traitlets.Int(0).tag(sync=True)  # how many finished turns (a view missing some asks for them)
    running = traitlets.Bool(False).tag(sync=True)
    notice = traitlets.Unicode("").tag(sync=True)
    gauge = traitlets.Dict().tag(sync=True)  # context and spend (widget_usage.py), once a turn
    _key = traitlets.Unicode("").tag(sync=True)  # one front-end store per widget, shared by its views
    _widget_id = traitlets.Unicode("").tag(sync=True)  # its model id: the front end names it in a saved notebook
    placeholder = traitlets.Unicode("Message the model… (Enter sends, Shift+Enter new line)").tag(sync=True)
    switchable = traitlets.Bool(False).tag(sync=True)  # New chat / History shown (an Agent with save_to)
    step_waiting = traitlets.Bool(False).tag(sync=True)  # a step=True replay waits: Next shown
    replay = traitlets.Dict().tag(sync=True)  # a replay's counter and mismatch (protocol.ReplayState); {}: no replay
    conversation_key = traitlets.Unicode("").tag(sync=True)  # changes when the widget is rebound
    session_ui = traitlets.Unicode("").tag(sync=True)  # static/session_bar.js, for widgets that show the bar
    autosave = traitlets.Unicode("").tag(sync=True)  # an Agent's AutosaveStatus.line(): not saved, or saved elsewhere

    def __init__(self, conversation: ConversationView | Any, **kwargs: Any) -> None:
        agent = None
        if hasattr(conversation, "conversation") and not has_plumbing(conversation):
            agent, conversation = conversation, conversation.conversation  # an Agent
        super().__init__(_key=uuid.uuid4().hex, conversation_key=uuid.uuid4().hex, **kwargs)
        self._widget_id = self.model_id or ""
        self.conversation: ConversationView = conversation
        self.handlers = self._serve()
        self.sessions = SessionControls(self, agent)  # New chat, History, Next (their handlers too)
        self.namespace: Any = None  # where @names come from; None: the running IPython shell's user namespace
        self._lock = threading.RLock()  # guards the state below; never held while sending
        self._send_lock = threading.Lock()
        self._turns: dict[int, TurnBuffer] = {}
        self._live: int | None = None
        self._pending: list[PendingDelta] = []
        self._dirty: set[str] = set()  # "current", "gauge"
        self._ended: set[int] = set()  # finished turns whose structure goes out as a "turn" message
        self._ended_live: set[int] = set()  # turns that ended running: their end goes out as a patch
        self._resync = False  # send every turn whole (a view asked)
        self._armed: asyncio.AbstractEventLoop | None = None  # where a flush is scheduled
        self._last_flush = 0.0
        self._first_text = False  # a model step's first text is queued: flush without waiting
        self._flushes = 0  # flushes so far: a scheduled flush that another one overtook does nothing
        self._task: asyncio.Task | None = None
        self.transcript = TranscriptOutput(self._key)  # the saved transcript's outputs, once shown
        self.stats = {"messages": 0, "delta_items": 0, "syncs": 0}
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._load(conversation)
        self.notice = course_notice(conversation)  # closed or over the course budget: said before a send
        self._flush()
        plumbing_of(conversation).add_listener(self._on_event)
        self.on_msg(self._on_msg)
        view_presence.register(self)  # a call waiting for approval asks whether a view is live

    def rebind(self, conversation: ConversationView) -> None:
        """Show another conversation in this widget (New chat, History): its turns replace the
        transcript; the old conversation is no longer listened to."""
        if (self._task is not None and not self._task.done()) or not self.conversation.is_idle():
            raise ConfigError("a turn is running; stop it first")
        if has_plumbing(self.conversation):
            plumbing_of(self.conversation).remove_listener(self._on_event)
        with self._lock:
            self.conversation = conversation
            self._turns.clear()
            self._pending.clear()
            self._live = None
            self._ended.clear()
            self._ended_live.clear()
            self._load(conversation)
        with self.hold_sync():
            self.conversation_key = uuid.uuid4().hex  # views drop the old transcript and ask for the new one
            self.notice = ""
            self._flush()
        plumbing_of(conversation).add_listener(self._on_event)
        self._update_transcript()

    def refresh_gauge(self) -> None:
        """Send the footer's gauge again (the model, context and spend), e.g. after a model switch."""
        with self._lock:
            self._dirty.add("gauge")
        self._flush()

    # --- state from the conversation --------------------------------------------

    def _load(self, conv: ConversationView) -> None:
        records = {r.turn: r for r in conv.turns}
        for step in conv.history:
            turn = self._turns.setdefault(step.turn, TurnBuffer(records.get(step.turn)))
            self._remember(turn, step)
        last = conv.turns[-1] if conv.turns else None
        if last is not None and last.status == TurnStatus.RUNNING:
            self._turns.setdefault(last.turn, TurnBuffer(last))
            self._live = last.turn
        self._dirty.update(("current", "gauge"))

    def _remember(self, turn: TurnBuffer, step: Step) -> None:
        turn.steps[step.step_index] = step
        turn.shape[step.step_index] = step_shape(step)
        turn.sent[(step.step_index, "c")] = (len(step.content), utf16_len(step.content))
        turn.sent[(step.step_index, "t")] = (len(step.thinking), utf16_len(step.thinking))
        turn.cache = None

    def _on_event(self, event: str, payload: Any) -> None:
        """Conversation listener; may run on any thread (e.g. nbagent's sync loop)."""
        if event == ConversationEvent.TURN_FINISHED:  # the turn's end goes out at once (its loop may close next)
            with self._lock:
                self._on_turn_finished(payload)
                self._dirty.add("gauge")
            if not self._in_own_task():  # in the widget's own task: its end flushes, `running` false with it
                self._flush()
            self._update_transcript(payload.turn)
            self.sessions.show_autosave()  # the agent's autosave ran first (its listener came first)
            return
        if event == ConversationEvent.TURN_STARTED:  # its transcript goes to the cell asking for it
            self.transcript.turn_started()
        with self._lock:
            if event == ConversationEvent.TURN_STARTED:
                self._finish_live()
                self._turns[payload.turn] = TurnBuffer(payload)
                self._live = payload.turn
                self._dirty.add("current")  # the gauge goes with the turn's end
            elif event == ConversationEvent.STEP:
                self._on_step(payload)
            elif event == ConversationEvent.CLEARED:
                self._turns.clear()
                self._pending.clear()
                self._live = None
                self._ended.clear()
                self._ended_live.clear()
                self._resync = True  # the views drop every turn
                self._dirty.update(("current", "gauge"))
            now = self._arm()
        if now:
            self._flush()
        if event == ConversationEvent.CLEARED:
            self._update_transcript()
        elif event == ConversationEvent.STEP:  # a turn already in the transcript may change (a manual result)
            self.transcript.step_changed(self.conversation, payload)

    def _in_own_task(self) -> bool:
        """Whether this runs in the task of a prompt sent from the box (its done callback flushes)."""
        task = self._task
        try:
            return task is not None and not task.done() and asyncio.current_task() is task
        except RuntimeError:  # no running loop here
            return False

    def _on_turn_finished(self, record: TurnRecord) -> None:
        turn = self._turns.setdefault(record.turn, TurnBuffer(record))
        turn.record, turn.cache = record, None
        if record.turn == self._live:
            self._finish_live()
        else:
            self._mark(record.turn)

    def _finish_live(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            self._dirty.add("current")
            self._ended_live.add(live)

    def _on_step(self, step: Step) -> None:
        turn_no = step.turn if step.turn >= 0 else (self._live if self._live is not None else -1)
        turn = self._turns.get(turn_no)
        if turn is None:
            turn = self._turns[turn_no] = TurnBuffer(None)
        idx = step.step_index
        new_shape = step_shape(step)
        turn.steps[idx] = step
        turn.cache = None
        for field, value in (("c", step.content), ("t", step.thinking)):
            known, at = turn.sent.get((idx, field), (0, 0))
            if len(value) > known:
                if known == 0 and step.source == StepSource.MODEL:  # the step's first text: the first token
                    self._first_text = True
                piece = value[known:]
                size = utf16_len(piece)
                self._push(idx, field, at, piece, size)
                turn.sent[(idx, field)] = (len(value), at + size)
            elif len(value) < known:  # rewritten, not appended: the view replaces it
                size = utf16_len(value)
                self._push(idx, field, 0, value, size, replace=True)
                turn.sent[(idx, field)] = (len(value), size)
        if turn.shape.get(idx) != new_shape:  # structural: the turn's structure goes out (bare)
            turn.shape[idx] = new_shape
            self._mark(turn_no)

    def _mark(self, turn_no: int) -> None:
        if turn_no == self._live:
            self._dirty.add("current")
        else:
            self._ended.add(turn_no)

    def _push(self, idx: int, field: str, offset: int, text: str, size: int, replace: bool = False) -> None:
        """Queue a delta; ``offset`` and ``size`` count UTF-16 units (as the view's strings do)."""
        pending = self._pending
        if not replace and pending and pending[-1].continues(idx, field, offset):
            last = pending[-1]
            last.pieces.append(text)
            last.size += size
        else:
            pending.append(PendingDelta(idx, field, offset, size, replace, [text]))

    # --- flushing (at most once per FLUSH_INTERVAL) ------------------------------

    def _arm(self) -> bool:
        """Schedule a flush on the loop delivering the events (or the kernel's), once.

        Called with ``_lock`` held; returns True when the caller must flush right away
        (after releasing the lock): there is no loop to wait on, or a model step's first text
        is queued.
        """
        if self._first_text:  # the first token waits for no window (the next deltas wait a whole one)
            self._first_text = False
            return True
        armed = self._armed
        if armed is not None and armed.is_running():
            return False
        loop: asyncio.AbstractEventLoop | None
        try:
            loop = asyncio.get_running_loop()
            here = True
        except RuntimeError:
            loop, here = self._loop, False
        if loop is None or loop.is_closed() or not (here or loop.is_running()):
            return True  # no loop to wait on (a plain script): flush at once
        self._armed = loop
        delay = max(0.0, self._last_flush + FLUSH_INTERVAL - time.monotonic())
        if here:
            loop.call_later(delay, self._scheduled_flush, self._flushes)
        else:
            loop.call_soon_threadsafe(loop.call_later, delay, self._scheduled_flush, self._flushes)
        return False

    def _scheduled_flush(self, armed_after: int) -> None:
        if armed_after == self._flushes:  # else a flush went out since (a first token): it re-armed if needed
            self._flush()

    def _flush(self) -> None:
        with self._send_lock:  # flushes from two threads go out whole and in order
            self._flush_locked()

    def _flush_locked(self) -> None:
        with self._lock:
            self._armed = None
            self._flushes += 1
            self._last_flush = time.monotonic()
            items = [p.item() for p in self._pending]
            covered = self._covered(self._pending)
            self._pending = []
            dirty, self._dirty = self._dirty, set()
            pricing = self._pricing()
            patches, messages = self._turn_messages(pricing, covered)
            values: dict[str, Any] = {}
            if "current" in dirty and self._live is not None and self._live in self._turns:
                patches.insert(0, self._patch(self._live, pricing, covered))
            gauge = gauge_dict(self.conversation) if "gauge" in dirty else self.gauge
            if gauge != self.gauge:  # only a change goes out
                values["gauge"] = gauge
            finished = sum(1 for n in self._turns if n != self._live)
            if finished != self.finished:
                values["finished"] = finished
            running = self._live is not None or (self._task is not None and not self._task.done())
            if "running" in dirty or running != self.running:
                values["running"] = running
        changed = [p for p in patches if p is not None]
        carried: dict[str, Any] = {}
        if (items or changed) and not self._holding_sync:  # the traits ride in the deltas message
            quiet = {k: v for k, v in values.items() if k != "gauge" or set(v) == set(self.gauge or {})}
            values = {k: v for k, v in values.items() if k not in quiet}
            carried = dict(quiet)
            if "gauge" in quiet:  # its changed keys only (the same keys as the view's)
                carried["gauge"] = {k: v for k, v in quiet["gauge"].items() if self.gauge.get(k) != v}
            if carried.get("finished") == self.finished + sum(1 for p in changed if p.get("ended")):
                del carried["finished"]  # a view counts the ended patches (js/src/reducer.js carriedTraits)
            self._set_quietly(quiet)
        if items or changed:
            self.stats["messages"] += 1
            self.stats["delta_items"] += len(items)
            self.handlers.emit(Deltas(items, changed, carried))
        for message in messages:
            self.handlers.emit(message)
        if values:
            self.stats["syncs"] += 1
            self._set_quietly(values)
            self.send_state(list(values))  # one update, even of a value set quietly before (``_start``)

    def _set_quietly(self, values: dict[str, Any]) -> None:
        """Set traits without a state update (their values go out another way: a ``deltas``
        message's ``state``, an explicit ``send_state``); a view that arrives later reads them."""
        if not values:
            return
        with self._lock_property(**jsonable(values)), self.hold_sync():
            for name, value in values.items():
                setattr(self, name, value)

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict:
        """The synced state; the whole state (a reloaded page's request, ``embed_minimal_html``)
        also carries ``turns``: every turn whole, so a view that starts
        from it needs no resync."""
        state = super().get_state(key, drop_defaults)
        if key is None and hasattr(self, "conversation"):  # not while the base class opens the comm
            pricing = self._pricing()
            with self._lock:
                state["turns"] = [turn for _, turn in self._whole_turns(pricing)]
                self._shown_whole(pricing)
        return state

    @property
    def current(self) -> dict | None:
        """The running turn, bare (None between turns): what the views have of it from the patches
        and deltas once they are flushed."""
        pricing = self._pricing()
        with self._lock:
            live = self._turns.get(self._live) if self._live is not None else None
            return live.bare_dict(pricing) if live is not None else None

    @property
    def turns(self) -> list[dict]:
        """Every turn whole (with its text), oldest first, as the whole state carries them (also
        what ``ipywidgets.embed.dependency_state`` reads)."""
        pricing = self._pricing()
        with self._lock:
            return [turn for _, turn in self._whole_turns(pricing)]

    def finished_turns(self) -> list[dict]:
        """The finished turns whole (with their text), oldest first, as a resync sends them."""
        pricing = self._pricing()
        with self._lock:
            return [turn for n, turn in self._whole_turns(pricing) if n != self._live]

    def _whole_turns(self, pricing: Any) -> list[tuple[int, dict]]:
        """Every turn with its text, oldest first, with its number (``_lock`` held)."""
        return [(n, self._turns[n].to_dict(pricing)) for n in sorted(self._turns)]

    def _shown_whole(self, pricing: Any) -> None:
        """The views got every turn whole: the running turn's next patch starts from that (``_lock`` held)."""
        live = self._turns.get(self._live) if self._live is not None else None
        if live is not None:
            live.shown_whole(pricing)

    def _pricing(self) -> Any:
        """The conversation's price overrides (``conv.budget.pricing``), or None."""
        return getattr(getattr(self.conversation, "budget", None), "pricing", None)

    def _covered(self, pending: list[PendingDelta]) -> frozenset[int]:
        """The steps whose text the deltas in ``pending`` carry up to its end in every field that has
        any (``_lock`` held): a view that reads them has it all or sees the gap, so their patches
        need no lengths ``n``."""
        live = self._turns.get(self._live) if self._live is not None else None
        ended = [self._turns[n] for n in self._ended_live if n in self._turns]
        out = set()
        for idx in {p.index for p in pending}:
            fields = {p.field for p in pending if p.index == idx}
            for turn in [t for t in [live, *ended] if t is not None and idx in t.steps]:
                if all(turn.sent.get((idx, f), (0, 0))[1] == 0 or f in fields for f in ("c", "t")):
                    out.add(idx)
        return frozenset(out)

    def _patch(self, n: int, pricing: Any, covered: frozenset[int], ended: bool = False) -> dict | None:
        """Turn ``n``'s patch (``_lock`` held), its new record starting from the turn before's
        (widget_wire.new_record)."""
        before = max((i for i in self._turns if i < n and self._turns[i].record is not None), default=None)
        prior = self._turns[before].bare_dict(pricing)["record"] if before is not None else None
        return self._turns[n].patch(n, pricing, ended=ended, covered=covered, before=prior)

    def _turn_messages(self, pricing: Any, covered: frozenset[int] = frozenset()
                       ) -> tuple[list[dict | None], list[TurnEnded | TurnsPage]]:
        """The turns' patches and custom messages, with ``_lock`` held: the end of each turn that
        was running, as a patch (``"ended": true``, in the ``deltas`` message); each finished turn
        that changed, bare (``{"type": "turn", "turn"}``); after a resync request, every turn whole,
        oldest first, in pages (``{"type": "turns", "turns", "first", "last"}``; the first page tells
        a view to drop the turns it has)."""
        ended, self._ended = self._ended, set()
        ended_live, self._ended_live = self._ended_live, set()
        patches = [self._patch(n, pricing, covered, ended=True) for n in sorted(ended_live) if n in self._turns]
        if not self._resync:
            return patches, [TurnEnded(self._turns[n].bare_dict(pricing)) for n in sorted(ended - ended_live)
                             if n in self._turns and n != self._live]
        self._resync = False
        self._shown_whole(pricing)
        pages: list[TurnEnded | TurnsPage] = []
        page: list[dict] = []
        size = 0
        for _, turn in self._whole_turns(pricing):
            cost = len(json.dumps(turn))
            if page and size + cost > PAGE_CHARS:
                pages.append(TurnsPage(page, first=not pages, last=False))
                page, size = [], 0
            page.append(turn)
            size += cost
        pages.append(TurnsPage(page, first=not pages, last=True))
        return patches, pages

    # --- front end -> kernel -------------------------------------------------------

    def _serve(self) -> Handlers:
        """This widget's handlers of the chat protocol (protocol.py); the session controls add theirs."""
        handlers = Handlers(CHAT, lambda message: self.send(message), self._failed)  # `send` looked up late
        handlers.on(Send, lambda r: self._start(r.prompt, r.over_budget, r.cells))
        handlers.on(Stop, lambda r: self._stop())
        handlers.on(Approve, lambda r: self.conversation.approve(r.call_id))
        handlers.on(Deny, lambda r: self.conversation.deny(r.call_id, r.reason or "denied by the user"))
        handlers.on(AssetRequest, self._asset)
        handlers.on(NamesRequest, self._names)
        handlers.on(Resync, lambda r: self._ask_resync())
        handlers.on(ViewShown, lambda r: None)  # noted by _on_msg, as every message from a view
        serve_live_notebook(self, handlers)  # the live notebook's answers, a card's Undo, Insert's provenance
        return handlers

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any = None) -> None:
        view_presence.view_seen(self)  # a front end spoke: someone can press Approve
        self.handlers.receive(content)

    def _failed(self, kind: str, exc: Exception) -> None:
        self.notice = f"{kind} failed: {exc}"  # shown in the widget, never a traceback in the cell

    def _asset(self, request: AssetRequest) -> AssetModule | None:
        """A module of ASSETS, once per page; any other name is not answered."""
        code = asset_code(request.name)
        return AssetModule(request.name, code) if code is not None else None

    def _names(self, request: NamesRequest) -> Names:
        """``@`` in the box: the user's variables, for autocomplete."""
        from .variables import variable_names

        return Names(request.id, [[v.name, v.type_name] for v in variable_names(self.namespace)])

    def _ask_resync(self) -> None:
        """A view arrived late or missed some text: every turn goes out whole."""
        with self._lock:
            self._resync = True
            now = self._arm()
        if now:
            self._flush()

    def _start(self, prompt: str, over_budget: bool = False, cells: Any = None) -> None:
        if not prompt.strip():
            self._refuse("Nothing sent: the message is empty.")
            return
        if (self._task is not None and not self._task.done()) or not self.conversation.is_idle():
            self._refuse("A turn is already running; press Stop first.")
            return
        from .cell_refs import attach_cells  # at the first send, not the first display (issue #32)

        with_cells = attach_cells(prompt, cells)[0]  # @cell: the cells the view sent
        if "@" in with_cells:  # @names to describe: off the event loop first (_send_prompt)
            run: Any = self._send_prompt(prompt, with_cells, over_budget)
        else:  # nothing to describe: gated now
            prepared = self._prepare_prompt(with_cells)
            if not self._gate(prompt, prepared, over_budget):
                return
            run = self._run(prepared)
        self._task = asyncio.ensure_future(run)
        self._task.add_done_callback(lambda _t: self._flush())  # `running` ends with the task
        self.sessions.watch_steps(self._task)
        with self._lock:
            self._dirty.add("running")
        # `running` goes out now, alone: the view that sent the prompt shows it and Stop already (its
        # echo), other views show Stop; sent from this handler, the turn's first text follows at once
        # (folded into the turn's first flush it saved ~80 B a turn, but in JupyterLab the first text
        # came ~20 ms later, 65 ms median after Enter instead of 37-45 (bench_first_token.py): Nagle's
        # algorithm on the server's websocket held that flush until the next message; not so with
        # TCP_NODELAY, which jupyter_server does not set)
        self._flush()

    async def _send_prompt(self, prompt: str, with_cells: str, over_budget: bool) -> None:
        """Attach what the prompt names, off the event loop (a ``__repr__`` that hangs must not hold
        Stop or any other message), then gate and run it. Stop while attaching drops the prompt."""
        from .cell_runner import TimeLimitExceeded, await_with_time_limit
        from .variables import ATTACH_TOTAL_SECONDS, ATTACH_HEADER

        self.notice = "Attaching the @names to the prompt… (Stop cancels this message)"
        limit = ATTACH_TOTAL_SECONDS + PREPARE_GRACE_SECONDS  # attach_variables keeps to its own limits first
        try:
            prepared = await await_with_time_limit(lambda: self._prepare_prompt(with_cells), limit)
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
        """Whether ``prepared`` may run now: a course policy's closed or over-budget refuses it; over the
        conversation's budget, the view asks "Send anyway" / "Cancel"."""
        closed = course_notice(self.conversation, prepared)
        if closed:
            self._refuse(closed)
            return False
        ask, self.notice = gate(self.conversation, prepared, over_budget)
        with self._lock:
            self._dirty.add("gauge")  # a budget set in code since the last turn shows now (if it changed)
        if ask is None:
            return True
        self._flush()
        self.handlers.emit(Confirm(prompt, ask))  # the user's own text comes back, prepared again if sent
        return False

    def _prepare_prompt(self, prompt: str) -> str:
        """Every prompt sent from the box passes here (one with ``@``: on a thread of its own,
        time-limited, ``_send_prompt``) before it is gated and run: ``@name`` of a
        variable of the widget's namespace (default: the kernel's) attaches its description, as in
        ``%%chat`` (``@cell`` / ``@cell:N``, the cells the view sent with it, are attached before:
        cell_refs.py). An over-budget prompt goes back to the box as typed and passes here again."""
        from .variables import attach_variables, shell_namespace

        namespace = self.namespace if self.namespace is not None else shell_namespace()
        if not namespace or "@" not in prompt:
            return prompt
        return attach_variables(prompt, namespace)[0]

    def _stop(self) -> None:
        """Stop: a prompt whose turn has not begun is dropped; a running turn is interrupted."""
        task = self._task
        if task is not None and not task.done() and self._live is None and self.conversation.is_idle():
            task.cancel()
        else:
            self.conversation.interrupt()

    def _refuse(self, text: str) -> None:
        """Tell the views a prompt was not run (a repeated notice would not change the trait)."""
        self.notice = text
        self.handlers.emit(Refused(text))

    async def _run(self, prompt: str) -> None:
        try:
            await self.conversation.chat_to_completion(prompt)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # the turn's record carries it as an error card
            if not self.conversation.turns or self.conversation.turns[-1].prompt != prompt:
                self.notice = f"Error: {exc}"

    # --- display -----------------------------------------------------------------------

    def _widget_bundle(self, in_kernel: bool, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if isinstance(data, dict):
            # in a kernel the transcript outputs say it all where widgets do not render (nbconvert,
            # GitHub): the widget's own text stays empty there, instead of a stray line
            data["text/plain"] = "" if in_kernel else "nbagent chat widget (shows in Jupyter with its kernel)"
        return bundle

    def _repr_mimebundle_(self, **kwargs: Any):
        return self._widget_bundle(self._show_transcript(), **kwargs)

    def _ipython_display_(self) -> None:
        """Shown as display data (the widget, then its transcript): no ``Out[n]:`` prompt beside
        a saved notebook's transcript."""
        from IPython.display import display

        bundle = self._widget_bundle(self.transcript.available())
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        display(data, raw=True, metadata=metadata or None)
        self._show_transcript()

    def transcript_bundle(self) -> dict:
        """What the transcript output shown now holds: the head line and every finished turn, as
        safe markdown (transcript_output.py)."""
        return transcript_piece(TranscriptOutput.finished_steps(self.conversation), head=True)

    def _show_transcript(self) -> bool:
        """Display the transcript output (in a kernel only); later turns are appended to it.
        Whether it was shown."""
        try:
            return self.transcript.show(self.conversation)
        except Exception:  # the widget still shows; only the saved transcript is missing
            return False

    def _update_transcript(self, turn: int | None = None) -> None:
        """A turn finished (``turn``): append it to the transcript outputs; None: the history was
        cleared or replaced, the transcript starts again. Never per token."""
        try:
            if turn is None:
                self.transcript.reset(self.conversation)
            else:
                self.transcript.turn_finished(self.conversation, turn)
        except Exception:  # a closed kernel channel: nothing to update
            pass

    def close(self) -> None:
        if has_plumbing(self.conversation):
            plumbing_of(self.conversation).remove_listener(self._on_event)
        super().close()

    def __repr__(self) -> str:
        return f"<ChatWidget: {len(self._turns)} turns{' (running)' if self._live is not None else ''}>"
