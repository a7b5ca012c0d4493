"""Saved sessions as OpenTelemetry spans, sent to an exporter or an OTLP/HTTP receiver (``nbagent.to_otel``).

Langfuse, Arize Phoenix, OpenLLMetry/Traceloop and any OpenTelemetry collector read these spans:
one trace per turn (``invoke_agent`` › ``chat {model}`` / ``execute_tool {name}``, see
:mod:`nbagent.analysis.otel_spans`), timed by the session's own step timestamps, so a session
saved last week shows last week's times. Needs the ``otel`` extra (``opentelemetry-sdk`` and
``opentelemetry-exporter-otlp-proto-http``); nothing is sent anywhere unless ``exporter=`` or
``endpoint=`` (or the standard ``OTEL_EXPORTER_OTLP_*ENDPOINT`` variables) says where.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit

from ..core.conversation_state import ConversationState, has_plumbing, plumbing_of
from ..core.distribution import DISTRIBUTION, install_hint
from ..core.errors import ConfigError, NetworkError, redact
from .otel_spans import SpanKind, SpanOptions, SpanPlan, attributes_bytes, session_spans

__all__ = ["to_otel", "OtelExport"]

BATCH = 512  # spans per export call (one OTLP request each) at most
REQUEST_BYTES = 3_000_000  # and about this many bytes of attributes: receivers refuse requests over 4 MB
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


@dataclass(frozen=True)
class OtelExport:
    """What ``to_otel`` sent: how many sessions, turns (traces) and spans."""

    sessions: int
    turns: int
    spans: int


def to_otel(sessions: Any, *, exporter: Any = None, endpoint: str | None = None, include_content: bool = False,
            pricing: Mapping | None = None) -> OtelExport:
    """Send ``sessions`` as OpenTelemetry GenAI spans; returns the counts (:class:`OtelExport`).

    ``sessions``: a saved session's path, a glob, a folder (its ``*.json``), a ``Conversation``, or a
    list of those. ``exporter``: an OpenTelemetry SDK ``SpanExporter`` (e.g. ``InMemorySpanExporter``,
    or an ``OTLPSpanExporter`` with your headers); it is not shut down. ``endpoint``: an OTLP/HTTP URL
    (``http://localhost:4318/v1/traces``; a bare ``http://host:port`` gets ``/v1/traces``); without
    either, the ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` variables
    (and ``OTEL_EXPORTER_OTLP_HEADERS``) are used. ``include_content`` adds prompts, answers,
    thinking, tool arguments and results to the spans (off: only counts, times, names and costs).

    Every file is read before anything is sent, so a damaged file (``StorageError`` naming it)
    sends nothing. A receiver that refuses the spans raises ``NetworkError``.
    """
    sdk = OtelSdk()
    target, owned = chosen_exporter(sdk, exporter, endpoint)
    plans: list[SpanPlan] = []
    count = turns = 0
    options = SpanOptions(include_content, pricing)
    for state, path in _states(sessions):
        spans = session_spans(state, path=path, options=options)
        plans += spans
        count += 1
        turns += len(state.turns)
    try:
        resource, scope = sdk.resource(), sdk.scope()
        start = 0
        for part in request_parts(plans, lambda p: p.attributes):
            batch = [sdk.span(p, resource, scope) for p in part]
            if target.export(batch) != sdk.success:
                where = f"the OTLP receiver at {_shown(endpoint)}" if owned and endpoint else "the span exporter"
                raise NetworkError(f"{where} did not accept the spans ({start} of {len(plans)} were sent before); "
                                   "its log line above says why")
            start += len(part)
    finally:
        if owned:
            target.shutdown()
    return OtelExport(count, turns, len(plans))


def request_parts(spans: Sequence[Any], attributes: Callable[[Any], Mapping[str, Any]]) -> Iterator[list[Any]]:
    """``spans`` in order, in parts of at most :data:`BATCH` spans and about :data:`REQUEST_BYTES` bytes
    (a span is never split: its attributes are capped, ``otel_spans.MAX_ATTRIBUTE_CHARS``)."""
    part: list[Any] = []
    size = 0
    for span in spans:
        grows = attributes_bytes(attributes(span)) + 200  # ids, times, name, status
        if part and (len(part) >= BATCH or size + grows > REQUEST_BYTES):
            yield part
            part, size = [], 0
        part.append(span)
        size += grows
    if part:
        yield part


# --- sources ------------------------------------------------------------------------------


def _states(sessions: Any) -> Iterator[tuple[ConversationState, str | None]]:
    """Each session as its state and saved path (None for a live conversation), in order."""
    from ..core.session_file import read_session
    from .agent_logs.transcript import agent_log_state
    from .sessions import expand_paths

    single = isinstance(sessions, (str, os.PathLike, ConversationState)) or _is_conversation(sessions)
    for item in [sessions] if single else list(sessions):
        if isinstance(item, ConversationState):
            yield item, None
        elif _is_conversation(item):
            yield plumbing_of(item).to_state(), None
        elif isinstance(item, (str, os.PathLike)):
            for path in expand_paths(item):  # another agent's log (*.jsonl) as its transcript
                yield (read_session(path) if path.suffix == ".json" else agent_log_state(path)), str(path)
        else:
            raise ConfigError(f"to_otel takes session paths, a glob, a folder or Conversations, not "
                              f"{type(item).__name__}")


def _is_conversation(obj: Any) -> bool:
    return has_plumbing(obj) and hasattr(obj, "conversation_id")


# --- the exporter -------------------------------------------------------------------------


def chosen_exporter(sdk: OtelSdk, exporter: Any, endpoint: str | None, caller: str = "to_otel",
                    also: str = "") -> tuple[Any, bool]:
    """The exporter to send to, and whether ``caller`` made it (then it shuts it down); ``also``
    names another way ``caller`` takes, for the error when none is given."""
    if exporter is not None and endpoint is not None:
        raise ConfigError(f"{caller} takes exporter= or endpoint=, not both")
    if exporter is not None:
        if not callable(getattr(exporter, "export", None)):
            raise ConfigError(f"exporter= must be an OpenTelemetry SpanExporter (with export(spans)), not "
                              f"{type(exporter).__name__}")
        return exporter, False
    if endpoint is None and not any(os.environ.get(v) for v in ENDPOINT_VARIABLES):
        raise ConfigError(f"{caller} needs exporter= (an OpenTelemetry SpanExporter) or endpoint= (an OTLP/HTTP URL "
                          f"such as http://localhost:4318/v1/traces){also}, or OTEL_EXPORTER_OTLP_ENDPOINT set")
    return sdk.otlp_exporter(None if endpoint is None else traces_url(endpoint)), True


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of ``endpoint``: as given, or with ``/v1/traces`` when it names no path."""
    text = str(endpoint).strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"endpoint= must be an http(s) URL of an OTLP/HTTP receiver, got {_shown(text)!r}")
    if parts.path in ("", "/"):
        return text.rstrip("/") + "/v1/traces"
    return text


def _shown(url: str | None) -> str:
    """A URL as an error may show it: no query string (it may hold a key), keys redacted."""
    return redact(str(url or "").split("?", 1)[0])


class OtelSdk:
    """The OpenTelemetry SDK, imported when spans are made (``ConfigError`` naming the extra if absent)."""

    def __init__(self) -> None:
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import ReadableSpan
            from opentelemetry.sdk.trace.export import SpanExportResult
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope
            from opentelemetry import trace
        except ImportError:
            raise ConfigError(f"OpenTelemetry export needs the OpenTelemetry SDK: {install_hint('otel')}") from None
        self.Resource, self.ReadableSpan, self.InstrumentationScope = Resource, ReadableSpan, InstrumentationScope
        self.trace = trace
        self.success, self.failure = SpanExportResult.SUCCESS, SpanExportResult.FAILURE
        self.kinds = {SpanKind.INTERNAL: trace.SpanKind.INTERNAL, SpanKind.CLIENT: trace.SpanKind.CLIENT}

    def otlp_exporter(self, url: str | None) -> Any:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError("endpoint= needs opentelemetry-exporter-otlp-proto-http: "
                              f"{install_hint('otel')}") from None
        return OTLPSpanExporter(endpoint=url)

    def resource(self) -> Any:
        return self.Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "nbagent"})

    def scope(self) -> Any:
        return self.InstrumentationScope("nbagent", otel_version())

    def span(self, plan: SpanPlan, resource: Any, scope: Any) -> Any:
        t = self.trace
        flags = t.TraceFlags(t.TraceFlags.SAMPLED)
        context = t.SpanContext(plan.trace_id, plan.span_id, is_remote=False, trace_flags=flags)
        parent = None if plan.parent_id is None else t.SpanContext(plan.trace_id, plan.parent_id, is_remote=False,
                                                                   trace_flags=flags)
        status = t.Status(t.StatusCode.ERROR, plan.error) if plan.error is not None else t.Status(t.StatusCode.UNSET)
        return self.ReadableSpan(plan.name, context=context, parent=parent, resource=resource,
                                 attributes=plan.attributes, kind=self.kinds[plan.kind], status=status,
                                 start_time=epoch_ns(plan.start), end_time=epoch_ns(plan.end), instrumentation_scope=scope)


def epoch_ns(seconds: float) -> int:
    """Epoch seconds as the nanoseconds a span's times are."""
    return int(round(seconds * 1e9))


def otel_version() -> str:
    """nbagent's version, as the spans' instrumentation scope names it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return ""

