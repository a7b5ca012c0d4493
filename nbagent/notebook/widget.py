"""ChatWidget: a Conversation rendered in the notebook (anywidget front end in ``js/``).

A thin host: the comm, the flush timer, the lock and the request handlers. What goes to the views
is made by the turn codec (turn_codec.py: conversation events in, protocol events out), in the
messages declared in protocol.py (``CHAT``; the rules a view rebuilds a turn by are its
``PATCH_RULES``); a prompt typed in the box takes the prompt path (widget_prompt.py); New chat,
History and replay steps are widget_sessions.py; the saved transcript in the cell's outputs is
transcript_output.py. The traits ``running``, ``finished`` and ``gauge`` that change with a flush
carrying text or patches ride in its ``deltas`` message (``state``) instead of an update of their
own; at most one flush goes out every ``FLUSH_INTERVAL`` seconds, but a model step's first text
goes at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ..core.conversation_state import ConversationEvent, has_plumbing, plumbing_of
from ..core.errors import ConfigError
from . import view_presence
from .conversation_view import ConversationView
from .live_notebook import serve as serve_live_notebook
from .protocol import (CHAT, Approve, AssetModule, AssetRequest, Deltas, Deny, Handlers, Names, NamesRequest, Resync,
                       Send, Stop, ViewShown)
from .transcript_output import TranscriptOutput, transcript_piece
from .turn_codec import TurnCodec, jsonable, record_dict, step_dict
from .widget_prompt import Prompts
from .widget_sessions import SessionControls
from .widget_usage import gauge_dict, policy_notice

FLUSH_INTERVAL = 0.04  # seconds between flushes: <= 25 messages/s whatever the token rate
_STATIC = Path(__file__).parent / "static"
ASSETS = {"math": "math.js", "grammars": "grammars.js"}  # modules a view loads when it first needs them
__all__ = ["ASSETS", "asset_code", "ChatWidget", "FLUSH_INTERVAL", "record_dict", "step_dict"]


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
        self.prompts = Prompts(self, watch=self.sessions.watch_steps)  # the box's prompts and their task
        self.namespace: Any = None  # where @names come from; None: the running IPython shell's user namespace
        self._lock = threading.RLock()  # guards the codec and the marks below; never held while sending
        self._send_lock = threading.Lock()
        self.codec = TurnCodec()  # what the views have of the turns, and what goes out next
        self._dirty: set[str] = set()  # "gauge", "running": trait values to send with the next flush
        self._armed: asyncio.AbstractEventLoop | None = None  # where a flush is scheduled
        self._last_flush = 0.0
        self._flushes = 0  # flushes so far: a scheduled flush that another one overtook does nothing
        self.transcript = TranscriptOutput(self._key)  # the saved transcript's outputs, once shown
        self.stats = {"messages": 0, "delta_items": 0, "syncs": 0}
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._load(conversation)
        self.notice = policy_notice(conversation)  # closed or over a policy's budget: said before a send
        self._flush()
        plumbing_of(conversation).add_listener(self._on_event)
        self.on_msg(self._on_msg)
        view_presence.register(self)  # a call waiting for approval asks whether a view is live

    def rebind(self, conversation: ConversationView) -> None:
        """Show another conversation in this widget (New chat, History): its turns replace the
        transcript; the old conversation is no longer listened to."""
        if self.prompts.running() or not self.conversation.is_idle():
            raise ConfigError("a turn is running; stop it first")
        self._stop_listening()
        with self._lock:
            self.conversation = conversation
            self._load(conversation)
        with self.hold_sync():
            self.conversation_key = uuid.uuid4().hex  # views drop the old transcript and ask for the new one
            self.notice = ""
            self._flush()
        plumbing_of(conversation).add_listener(self._on_event)
        self._update_transcript()

    def refresh_gauge(self) -> None:
        """Send the footer's gauge again (the model, context and spend), e.g. after a model switch."""
        self.note("gauge")
        self._flush()

    def note(self, what: str) -> None:
        """Mark a trait (``"gauge"``, ``"running"``) to go out with the next flush."""
        with self._lock:
            self._dirty.add(what)

    def flush(self) -> None:
        """Send what changed now (the prompt path's hand-offs)."""
        self._flush()

    def _load(self, conv: ConversationView) -> None:
        self.codec.load(conv.turns, conv.history)
        self._dirty.add("gauge")

    def _on_event(self, event: str, payload: Any) -> None:
        """Conversation listener; may run on any thread (e.g. nbagent's sync loop)."""
        with self._lock:
            self.codec.take_event(event, payload)
            if event == ConversationEvent.TURN_FINISHED:  # its end goes out at once (its loop may close next)
                self._dirty.add("gauge")
                now = not self.prompts.in_task()  # in the widget's own task: its end flushes, `running` with it
            else:
                now = self._arm()
        if now:
            self._flush()
        self._update_transcript(event, payload)
        if event == ConversationEvent.TURN_FINISHED:
            self.sessions.show_autosave()  # the agent's autosave ran first (its listener came first)

    # --- flushing (at most once per FLUSH_INTERVAL) ------------------------------

    def _arm(self) -> bool:
        """Schedule a flush on the loop delivering the events (or the kernel's), once.

        Called with ``_lock`` held; returns True when the caller must flush right away
        (after releasing the lock): there is no loop to wait on, or a model step's first text
        is queued.
        """
        if self.codec.urgent():  # the first token waits for no window (the next deltas wait a whole one)
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
            out = self.codec.flush(self._pricing())
            dirty, self._dirty = self._dirty, set()
            values: dict[str, Any] = {}
            gauge = gauge_dict(self.conversation) if "gauge" in dirty else self.gauge
            if gauge != self.gauge:  # only a change goes out
                values["gauge"] = gauge
            finished = self.codec.finished
            if finished != self.finished:
                values["finished"] = finished
            running = self.codec.live is not None or self.prompts.running()
            if "running" in dirty or running != self.running:
                values["running"] = running
        carried: dict[str, Any] = {}
        if (out.items or out.patches) and not self._holding_sync:  # the traits ride in the deltas message
            quiet = {k: v for k, v in values.items() if k != "gauge" or set(v) == set(self.gauge or {})}
            values = {k: v for k, v in values.items() if k not in quiet}
            carried = dict(quiet)
            if "gauge" in quiet:  # its changed keys only (the same keys as the view's)
                carried["gauge"] = {k: v for k, v in quiet["gauge"].items() if self.gauge.get(k) != v}
            if carried.get("finished") == self.finished + sum(1 for p in out.patches if p.get("ended")):
                del carried["finished"]  # a view counts the ended patches (js/src/reducer.js carriedTraits)
            self._set_quietly(quiet)
        if out.items or out.patches:
            self.stats["messages"] += 1
            self.stats["delta_items"] += len(out.items)
            self.handlers.emit(Deltas(out.items, out.patches, carried))
        for message in out.messages:
            self.handlers.emit(message)
        if values:
            self.stats["syncs"] += 1
            self._set_quietly(values)
            self.send_state(list(values))  # one update, even of a value set quietly before (``Prompts.start``)

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
                state["turns"] = self.codec.whole_turns(pricing)
                self.codec.shown_whole(pricing)
        return state

    @property
    def current(self) -> dict | None:
        """The running turn, bare (None between turns): what the views have of it from the patches
        and deltas once they are flushed."""
        pricing = self._pricing()
        with self._lock:
            return self.codec.current(pricing)

    @property
    def turns(self) -> list[dict]:
        """Every turn whole (with its text), oldest first, as the whole state carries them (also
        what ``ipywidgets.embed.dependency_state`` reads)."""
        pricing = self._pricing()
        with self._lock:
            return self.codec.whole_turns(pricing)

    def finished_turns(self) -> list[dict]:
        """The finished turns whole (with their text), oldest first, as a resync sends them."""
        pricing = self._pricing()
        with self._lock:
            return self.codec.whole_turns(pricing, finished_only=True)

    def _pricing(self) -> Any:
        """The conversation's price overrides (``conv.budget.pricing``), or None."""
        return getattr(getattr(self.conversation, "budget", None), "pricing", None)

    # --- front end -> kernel -------------------------------------------------------

    def _serve(self) -> Handlers:
        """This widget's handlers of the chat protocol (protocol.py); the session controls add theirs."""
        handlers = Handlers(CHAT, lambda message: self.send(message), self._failed)  # `send` looked up late
        handlers.on(Send, lambda r: self.prompts.start(r.prompt, r.over_budget, r.cells))
        handlers.on(Stop, lambda r: self.prompts.stop(turn_running=self.codec.live is not None))
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
        return AssetModule(request.id, request.name, code) if code is not None else None

    def _names(self, request: NamesRequest) -> Names:
        """``@`` in the box: the user's variables, for autocomplete."""
        from .variables import variable_names

        return Names(request.id, [[v.name, v.type_name] for v in variable_names(self.namespace)])

    def _ask_resync(self) -> None:
        """A view arrived late or missed some text: every turn goes out whole."""
        with self._lock:
            self.codec.ask_resync()
            now = self._arm()
        if now:
            self._flush()

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

    def _update_transcript(self, event: str = ConversationEvent.CLEARED, payload: Any = None) -> None:
        """Pass a conversation event to the transcript outputs (transcript_output.py): a finished turn
        is appended, a cleared or replaced history starts again. Never per token."""
        try:
            self.transcript.see_event(self.conversation, event, payload)
        except Exception:  # a closed kernel channel: nothing to update
            pass

    def _stop_listening(self) -> None:
        if has_plumbing(self.conversation):
            plumbing_of(self.conversation).remove_listener(self._on_event)

    def close(self) -> None:
        self._stop_listening()
        super().close()

    def __repr__(self) -> str:
        return f"<ChatWidget: {len(self.codec.turns)} turns{' (running)' if self.codec.live is not None else ''}>"
