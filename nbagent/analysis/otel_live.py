"""OpenTelemetry spans sent live as an agent's turns end (``nbagent.trace_live``).

Each turn, as it ends, becomes the spans ``nbagent.to_otel`` sends for it once saved: the same plan
(:func:`~nbagent.analysis.otel_spans.turn_spans`), so the same names, parents, attributes, times
and, with ``exporter=`` / ``endpoint=``, the same ids (replaying the saved session later sends
the same spans again, which a backend keeps once). The ending turn only appends references to
its record and steps to a queue (no lock, no system call, nothing built): a worker thread, woken
once for the turns that end within ``BATCH_DELAY_S``, plans their spans together (one table for
their figures) and hands them to a ``BatchSpanProcessor``, whose own thread exports them. So a
turn never waits for the spans or the receiver, and an exporter that fails or refuses
is logged once (logger ``nbagent.otel``) and counted (:attr:`LiveTrace.failed_spans`), never
raised into the turn. With ``tracer_provider=`` the spans go through that provider's
tracer instead (its resource, processors and sampler, and its own span ids).

A turn is traced as it stands when it ends: the result of a manual-mode tool call, given with
``add_tool_result`` after its turn ended, is not sent live (``to_otel`` of the saved session has it).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import deque
from itertools import groupby
from operator import attrgetter
from typing import Any, NamedTuple
from collections.abc import Callable, Mapping

from ..core.conversation_state import ConversationEvent, has_plumbing, plumbing_of
from ..core.errors import ConfigError, redact
from ..core.ledger import TurnRecord
from ..core.steps import Step
from .otel import OtelSdk, chosen_exporter, epoch_ns, otel_version, request_parts
from .otel_spans import SpanOptions, SpanPlan, turn_spans

__all__ = ["trace_live", "LiveTrace"]

log = logging.getLogger("nbagent.otel")
RECENT_TURNS = 64  # ledger records kept to compare a turn's cache use with the last turn that sent input
BATCH_DELAY_S = 0.2  # the worker gathers ended turns this long after the first, then plans them together


def trace_live(target: Any, *, exporter: Any = None, endpoint: str | None = None, tracer_provider: Any = None,
               include_content: bool = False, pricing: Mapping | None = None) -> LiveTrace:
    """Send each turn of ``target`` (an ``Agent`` or a ``Conversation``) as OpenTelemetry GenAI spans as it ends.

    An ``Agent`` is followed to every conversation it starts or opens. ``exporter=``, ``endpoint=``,
    ``include_content`` and ``pricing`` mean what they mean for ``nbagent.to_otel`` (without
    either, ``OTEL_EXPORTER_OTLP_ENDPOINT``); ``tracer_provider=`` (an OpenTelemetry
    ``TracerProvider``, e.g. Phoenix's or Langfuse's) sends through it instead. ``pricing=None``
    prices as the conversation's ``usage_df()`` does. Returns a :class:`LiveTrace`: ``stop()``
    (or leaving a ``with`` block) detaches, sends what is queued and closes what it opened.
    """
    if not _is_agent(target) and not _is_conversation(target):
        raise ConfigError(f"trace_live follows an Agent or a Conversation, not {type(target).__name__}")
    sdk = OtelSdk()
    sink: _BatchSink | _TracerSink
    if tracer_provider is not None:
        if exporter is not None or endpoint is not None:
            raise ConfigError("trace_live takes one of exporter=, endpoint= or tracer_provider=")
        if not callable(getattr(tracer_provider, "get_tracer", None)):
            raise ConfigError(f"tracer_provider= must be an OpenTelemetry TracerProvider, not "
                              f"{type(tracer_provider).__name__}")
        sink = _TracerSink(sdk, tracer_provider)
    else:
        chosen, owned = chosen_exporter(sdk, exporter, endpoint, "trace_live",
                                        also=" or tracer_provider= (an OpenTelemetry TracerProvider)")
        sink = _BatchSink(sdk, _WatchedExporter(chosen, owned, sdk.success, sdk.failure))
    live = LiveTrace(sink, include_content, pricing)
    live.follow(target)
    return live


class LiveTrace:
    """What ``trace_live`` started: what it sent, what failed, ``flush()`` and ``stop()``."""

    def __init__(self, sink: _BatchSink | _TracerSink, include_content: bool, pricing: Mapping | None) -> None:
        self._sink = sink
        self.include_content = include_content
        self.pricing = pricing
        self._lock = threading.Lock()
        self._stops: list[Callable[[], None]] = []
        self._queue = _TurnQueue(self._send)  # plans, in turn order, on its own thread
        self.turns = 0  # turns traced
        self.spans = 0  # spans handed to the exporter (or tracer)
        self.stopped = False
        atexit.register(self.stop)  # what is still queued is sent when Python exits

    @property
    def failed_spans(self) -> int:
        """Spans the exporter refused or failed to send (0 with ``tracer_provider=``: its exporters report)."""
        return self._sink.failed

    @property
    def last_error(self) -> str:
        """Why the last export failed ("" when none has)."""
        return self._sink.last_error

    def follow(self, target: Any) -> None:
        """Trace ``target``'s turns too (an Agent: each conversation it starts or opens)."""
        if _is_agent(target):
            self._stops.append(target.watch_conversations(self._follow_conversation))
        else:
            self._follow_conversation(target)

    def _follow_conversation(self, conv: Any) -> None:
        if self.stopped:
            return
        listener = _TurnListener(conv, self)
        plumbing_of(conv).add_listener(listener)
        self._stops.append(lambda: plumbing_of(conv).remove_listener(listener))

    def queue(self, ended: _EndedTurn) -> None:
        """Hand one ended turn (or a cleared history) to the worker thread, which plans and sends its spans."""
        if not self.stopped:  # stopped meanwhile: the turn is not traced
            self._queue.put(ended)

    def _send(self, batch: list[_EndedTurn]) -> None:
        """On the worker thread: plan and send the spans of ``batch``, each conversation's run of turns together."""
        for listener, run in groupby(batch, key=attrgetter("listener")):
            ended = list(run)
            try:
                per_turn = listener.plan(ended)
                plans = [plan for turn in per_turn for plan in turn]
                if plans:
                    self._sink.send(plans)
            except Exception:  # tracing never fails a turn, nor the next one
                turns = [e.record.turn for e in ended if e.record is not None]
                log.exception("nbagent: the spans of turns %s to %s could not be made or sent",
                              min(turns, default="?"), max(turns, default="?"))
                continue
            with self._lock:
                self.turns += len(per_turn)
                self.spans += len(plans)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until the turns ended so far are exported; False if ``timeout_s`` passed first."""
        if not self._queue.flush(timeout_s):  # the turns queued before are planned
            return False
        return bool(self._sink.flush(timeout_s))

    def stop(self) -> None:
        """Stop tracing, send what is queued, and close the exporter ``trace_live`` made (not yours)."""
        if self.stopped:
            return
        self.stopped = True
        atexit.unregister(self.stop)
        for stop in self._stops:
            stop()
        self._stops.clear()
        self._queue.close()
        self._sink.shutdown()

    def __enter__(self) -> LiveTrace:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else "live"
        failed = f", {self.failed_spans} failed" if self.failed_spans else ""
        return f"<LiveTrace {state}: {self.turns} turns, {self.spans} spans{failed}>"


class _EndedTurn(NamedTuple):
    """What the turn's thread hands over as a turn ends: references, nothing built."""

    listener: _TurnListener
    record: TurnRecord | None  # None: the conversation's history was cleared
    steps: dict[int, Step]  # by step_index (the listener starts a new dict for its next turn)
    pricing: Mapping | None


class _TurnListener:
    """One conversation's listener: gathers a turn's steps and queues them when it ends.

    ``__call__`` runs on the turn's thread and only keeps references; :meth:`plan` runs on the
    worker thread, in turn order, and owns ``recent`` and ``options``.
    """

    def __init__(self, conv: Any, live: LiveTrace) -> None:
        self.conv = conv
        self.live = live
        self.steps: dict[int, Step] = {}  # the running turn's steps by step_index, latest update
        self.turn: int | None = None  # the turn whose start was seen
        self.recent = _since_input(list(conv.turns))
        self.options = SpanOptions(live.include_content, self._pricing())

    def __call__(self, event: ConversationEvent, payload: Any) -> None:
        if event is ConversationEvent.STEP:
            if self.turn is not None:
                self.steps[payload.step_index] = payload
        elif event is ConversationEvent.TURN_STARTED:
            self.steps, self.turn = {}, payload.turn
        elif event is ConversationEvent.TURN_FINISHED:
            self._finished(payload)
        elif event is ConversationEvent.CLEARED:
            self.steps, self.turn = {}, None
            self.live.queue(_EndedTurn(self, None, {}, None))

    def _finished(self, record: TurnRecord) -> None:
        steps = self.steps
        if self.turn != record.turn:  # traced from the middle of this turn: its steps from the history
            steps = {s.step_index: s for s in self.conv.history if s.turn == record.turn}
        self.steps, self.turn = {}, None
        self.live.queue(_EndedTurn(self, record, steps, self._pricing()))

    def plan(self, ended: list[_EndedTurn]) -> list[list[SpanPlan]]:
        """On the worker thread: each ended turn's spans, in order; consecutive turns priced alike
        are planned together (one table for their figures)."""
        out: list[list[SpanPlan]] = []
        records: list[TurnRecord] = []
        steps: list[list[Step]] = []
        pricing: Mapping | None = None
        for e in ended:
            if records and (e.record is None or e.record.turn != records[-1].turn + 1 or e.pricing is not pricing):
                out += self._plan_run(records, steps, pricing)
                records, steps = [], []
            if e.record is None:  # the history was cleared
                self.recent = []
            else:
                records.append(e.record)
                steps.append(list(e.steps.values()))
                pricing = e.pricing
        if records:
            out += self._plan_run(records, steps, pricing)
        return out

    def _plan_run(self, records: list[TurnRecord], steps: list[list[Step]],
                  pricing: Mapping | None) -> list[list[SpanPlan]]:
        """The spans of consecutive ended turns (``records``, ``steps`` the steps of each)."""
        recent = self.recent if self.recent and self.recent[-1].turn == records[0].turn - 1 else []
        records = [*recent, *records]
        self.recent = _since_input(records)
        if pricing is not self.options.pricing:
            self.options = SpanOptions(self.live.include_content, pricing)
        return turn_spans(self.conv.conversation_id, records, steps, self.options)

    def _pricing(self) -> Mapping | None:
        return self.live.pricing if self.live.pricing is not None else self.conv.budget.pricing


class _TurnQueue:
    """Items handed from turn threads to one worker thread, in order, woken once per batch.

    ``put`` appends to a deque and wakes the worker only when it is not already due to wake, so a
    turn costs no lock and no system call; the worker gathers what comes in for ``BATCH_DELAY_S``
    (at once when a ``flush`` or ``close`` asks) and hands it to ``handle`` as one list.
    """

    def __init__(self, handle: Callable[[list[Any]], None]) -> None:
        self._handle = handle
        self._items: deque[Any] = deque()
        self._due = False  # the worker will drain the deque: put need not wake it
        self._wake, self._hurry = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="nbagent-otel", daemon=True)
        self._thread.start()

    def put(self, item: Any) -> None:
        self._items.append(item)
        if not self._due:
            self._due = True
            self._wake.set()

    def flush(self, timeout_s: float) -> bool:
        """Wait until the items put so far are handled; False if ``timeout_s`` passed first."""
        if not self._thread.is_alive():
            return True
        done = threading.Event()
        self._items.append(done)
        self._hurry.set()
        self._wake.set()
        return done.wait(timeout_s)

    def close(self) -> None:
        """Handle what is queued, then end the worker thread."""
        self._items.append(_CLOSE)
        self._hurry.set()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._hurry.wait(BATCH_DELAY_S)
            self._wake.clear()  # before _due: a put that sees _due False sets _wake after this
            self._due = False  # before draining: a put that sees _due True is drained below
            self._hurry.clear()
            batch: list[Any] = []
            while self._items:
                item = self._items.popleft()
                if item is not _CLOSE and not isinstance(item, threading.Event):
                    batch.append(item)
                    continue
                if batch:
                    self._handle(batch)
                    batch = []
                if not isinstance(item, threading.Event):  # _CLOSE
                    return
                item.set()  # a flush waits for it
            if batch:
                self._handle(batch)


_CLOSE = object()  # the item that ends a _TurnQueue's worker


def _since_input(records: list[TurnRecord]) -> list[TurnRecord]:
    """The tail of ``records`` from the last one that sent input tokens (at most RECENT_TURNS)."""
    for i in range(len(records) - 1, max(len(records) - RECENT_TURNS, 0) - 1, -1):
        if records[i].usage.prompt_token_count > 0:
            return records[i:]
    return records[-RECENT_TURNS:]


class _WatchedExporter:
    """A SpanExporter that counts and logs (once) what the exporter it wraps failed to send."""

    def __init__(self, exporter: Any, owned: bool, success: Any, failure: Any) -> None:
        self.exporter, self.owned = exporter, owned
        self.success, self.failure = success, failure
        self.failed = 0
        self.last_error = ""

    def export(self, spans: Any) -> Any:
        result, why = self.success, ""
        try:
            for part in request_parts(spans, lambda span: span.attributes or {}):  # each request under 4 MB
                result = self.exporter.export(part)
                if result != self.success:
                    why = "the receiver did not accept them (the exporter's log says why)"
                    break
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
        if not why:
            return result
        if not self.failed:
            log.warning("nbagent: live OpenTelemetry spans were not sent: %s", redact(why))
        self.failed += len(spans)
        self.last_error = redact(why)
        return self.failure

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        flush = getattr(self.exporter, "force_flush", None)
        return bool(flush(timeout_millis)) if callable(flush) else True

    def shutdown(self) -> None:
        if self.owned:
            self.exporter.shutdown()


class _BatchSink:
    """Spans built as ``to_otel`` builds them, exported by a ``BatchSpanProcessor`` thread."""

    def __init__(self, sdk: OtelSdk, exporter: _WatchedExporter) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.sdk, self.exporter = sdk, exporter
        self.processor = BatchSpanProcessor(exporter)  # type: ignore[arg-type]  # a SpanExporter by its methods
        self.resource, self.scope = sdk.resource(), sdk.scope()

    @property
    def failed(self) -> int:
        return self.exporter.failed

    @property
    def last_error(self) -> str:
        return self.exporter.last_error

    def send(self, plans: list[SpanPlan]) -> None:
        for plan in plans:
            self.processor.on_end(self.sdk.span(plan, self.resource, self.scope))

    def flush(self, timeout_s: float) -> bool:
        return bool(self.processor.force_flush(int(timeout_s * 1000)))

    def shutdown(self) -> None:
        self.processor.shutdown()


class _TracerSink:
    """Spans started and ended through a user's TracerProvider (its ids, resource and processors)."""

    failed = 0
    last_error = ""

    def __init__(self, sdk: OtelSdk, provider: Any) -> None:
        from opentelemetry.context import Context

        self.sdk, self.provider = sdk, provider
        self.tracer = provider.get_tracer("nbagent", otel_version())
        self.empty = Context()  # a turn's root has no parent, whatever span is current

    def send(self, plans: list[SpanPlan]) -> None:
        t = self.sdk.trace
        started: dict[int, Any] = {}
        for plan in plans:
            parent = started.get(plan.parent_id) if plan.parent_id is not None else None
            context = t.set_span_in_context(parent) if parent is not None else self.empty
            span = self.tracer.start_span(plan.name, context=context, kind=self.sdk.kinds[plan.kind],
                                          attributes=plan.attributes, start_time=epoch_ns(plan.start))
            if plan.error is not None:
                span.set_status(t.Status(t.StatusCode.ERROR, plan.error))
            span.end(end_time=epoch_ns(plan.end))
            started[plan.span_id] = span

    def flush(self, timeout_s: float) -> bool:
        flush = getattr(self.provider, "force_flush", None)
        return bool(flush(int(timeout_s * 1000))) if callable(flush) else True

    def shutdown(self) -> None:  # the provider is the user's: flushed, not shut down
        self.flush(30.0)


def _is_agent(obj: Any) -> bool:
    return callable(getattr(obj, "watch_conversations", None))


def _is_conversation(obj: Any) -> bool:
    return has_plumbing(obj) and hasattr(obj, "conversation_id")
