"""A saved conversation as OpenTelemetry GenAI spans, planned as plain values (no SDK needed).

One trace per turn, following the GenAI semantic conventions:

- ``invoke_agent``: the turn, from its ledger record (start and end of the turn, summed usage,
  cost); its children are
- ``chat {model}``: one model call (a model step: its start, its finish, its usage), and
- ``execute_tool {name}``: one tool execution (a tool-run step, approval wait included).

Attributes are ``gen_ai.*`` where the conventions name the fact (``gen_ai.request.model``,
``gen_ai.usage.input_tokens`` — every input token, cached ones included — ``gen_ai.usage.output_tokens``
— thinking included —, ``gen_ai.response.finish_reasons``, ``gen_ai.tool.name``, ...) and ``nbagent.*``
for what they do not (``nbagent.cost_usd``, ``nbagent.price_source``, ``nbagent.cache_saved_usd``,
``nbagent.approval``). A turn's ``nbagent.*`` figures are its ``usage_df()`` row (one column
definition, :mod:`nbagent.analysis.columns`). Prompt, answer, thinking, tool arguments and results
are left out unless ``include_content`` (then as ``gen_ai.input.messages`` / ``gen_ai.output.messages``
/ ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``); every string goes through
:func:`~nbagent.core.errors.redact`, so no API key leaves in a span.

Trace and span ids derive from the conversation id, the turn and the step index: exporting a
session again sends the same ids. :func:`session_spans` plans a saved session (``to_otel``);
:func:`turn_spans` turns as they end (``trace_live``), the same spans.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from collections.abc import Mapping, Sequence

from ..core.chunks import response_of
from ..core.conversation_state import ConversationState
from ..core.errors import redact
from ..core.ledger import TurnRecord
from ..core.steps import FinishReason, Step, StepKind, StepStatus, TurnStatus
from ..core.text import cap, clean_text

AttributeValue = str | bool | int | float | Sequence[str]

# the usage_df columns an invoke_agent span carries as nbagent.<column>
TURN_COLUMNS = ("cost_usd", "price_source", "cache_hit_ratio", "cache_saved_usd", "cache_busted",
                "cache_bust_cause", "context_tokens", "context_window", "context_fill", "ttft_s",
                "output_tokens_per_s")
ERROR_CHARS = 300
MAX_ATTRIBUTE_CHARS = 32_000  # a string attribute (a prompt, an answer, a tool result) longer than this is cut, saying so


class SpanKind(str, Enum):
    """The OpenTelemetry span kind: a model call is a CLIENT call, the rest runs in process."""

    INTERNAL = "internal"
    CLIENT = "client"


@dataclass
class SpanPlan:
    """One span to export: ids, times (epoch seconds), attributes, and an error if it failed."""

    name: str
    trace_id: int
    span_id: int
    parent_id: int | None
    kind: SpanKind
    start: float
    end: float
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    error: str | None = None  # the status description of a failed span (None: not failed)


class SpanOptions:
    """What every session of one export shares: the options, and prices and cleaned strings looked up once."""

    def __init__(self, include_content: bool = False, pricing: Mapping | None = None) -> None:
        self.include_content = include_content
        self.pricing = pricing
        self.prices: dict[tuple[str, str], tuple[Any, str | None]] = {}
        self.strings: dict[str, str] = {}

    def price(self, model: str, provider: str) -> tuple[Any, str | None]:
        """The ``Price`` (None: unknown) and ``price_source`` of a model."""
        key = (model, provider)
        if key not in self.prices:
            from .pricing import get_price, price_source

            self.prices[key] = (get_price(model, provider, self.pricing),
                                price_source(model, provider, self.pricing))
        return self.prices[key]

    def clean(self, text: str) -> str:
        """``text`` UTF-8 safe and redacted (a short string repeats: ids, models, names)."""
        if len(text) > 200:
            return redact(clean_text(text))
        out = self.strings.get(text)
        if out is None:
            if len(self.strings) > 100_000:
                self.strings.clear()
            out = self.strings[text] = redact(clean_text(text))
        return out


def session_spans(state: ConversationState, *, path: str | None = None,
                  options: SpanOptions | None = None) -> list[SpanPlan]:
    """Every span of ``state``: per turn its ``invoke_agent`` span, then its children in order."""
    by_turn: dict[int, list[Step]] = {}
    for step in state.steps:
        by_turn.setdefault(step.turn, []).append(step)
    options = options or SpanOptions()
    rows = _turn_rows(state.turns, options)
    key = state.conversation_id or path or ""
    spans: list[SpanPlan] = []
    for record, row in zip(state.turns, rows):
        turn = _TurnSpans(key, state.conversation_id, record, options)
        spans += turn.spans(by_turn.get(record.turn, []), row, path)
    return spans


def turn_spans(conversation_id: str, records: Sequence[TurnRecord], turn_steps: Sequence[Sequence[Step]],
               options: SpanOptions) -> list[list[SpanPlan]]:
    """The spans of the last ``len(turn_steps)`` of ``records`` (turns that just ended), each turn's
    as :func:`session_spans` plans it.

    ``records``: consecutive ledger records ending with those turns, from the last earlier one that
    sent input tokens (its cache columns compare a turn with that one); ``turn_steps``: each ended
    turn's steps, in order. The turns' figures come from one table, however many turns.
    """
    ended = len(turn_steps)
    rows = _turn_rows(records, options)[len(records) - ended:]
    return [_TurnSpans(conversation_id, conversation_id, record, options).spans(steps, row, None)
            for record, steps, row in zip(records[len(records) - ended:], turn_steps, rows)]


def _turn_rows(records: Sequence[TurnRecord], options: SpanOptions) -> list[dict[str, Any]]:
    """Each turn's ``usage_df()`` figures that its ``invoke_agent`` span carries."""
    from .columns import USAGE, USAGE_INDEX
    from .sessions import json_rows
    from .tables import Table

    return json_rows(Table(records, options.pricing), USAGE_INDEX, [c for c in USAGE if c.name in TURN_COLUMNS])


def gen_ai_provider(provider: str) -> str:
    """The ``gen_ai.provider.name`` of an nbagent provider name: its wire spec's (the conventions'
    well-known value), else the name itself."""
    from ..providers import wire_spec

    spec = wire_spec(provider) if provider else None
    return provider if spec is None else spec.otel_name or spec.name


class _TurnSpans:
    """The spans of one turn (one trace)."""

    def __init__(self, key: str, conversation_id: str, record: TurnRecord, options: SpanOptions) -> None:
        self.key = f"nbagent:{key}:{record.turn}"
        self.trace_id = _id(self.key, 16)
        self.turn_id = _id(self.key + ":turn", 8)
        self.conversation_id = conversation_id
        self.record = record
        self.options = options
        self.include_content = options.include_content
        self.provider = gen_ai_provider(record.provider)

    def spans(self, steps: Sequence[Step], row: Mapping[str, Any], path: str | None) -> list[SpanPlan]:
        children = [self._chat(s) if s.is_model_call else self._tool(s)
                    for s in steps if s.is_model_call or s.is_tool_run]
        root = self._turn(steps, row, path, children)
        return [root, *children]

    def _common(self, operation: str) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {"gen_ai.operation.name": operation}
        if self.provider:
            attrs["gen_ai.provider.name"] = self.provider
            attrs["gen_ai.system"] = self.provider  # its older name, which some readers still use
        if self.conversation_id:
            attrs["gen_ai.conversation.id"] = self.conversation_id
            attrs["session.id"] = self.conversation_id  # Langfuse and Phoenix group traces by it
        attrs["nbagent.turn"] = self.record.turn
        return attrs

    def _turn(self, steps: Sequence[Step], row: Mapping[str, Any], path: str | None,
              children: list[SpanPlan]) -> SpanPlan:
        r = self.record
        attrs = self._common("invoke_agent")
        if r.model:
            attrs["gen_ai.request.model"] = r.model
        attrs.update(_usage(r.usage))
        if r.finish_reason is not None:
            attrs["gen_ai.response.finish_reasons"] = [_reason(r.finish_reason)]
        attrs.update({"nbagent.status": r.status.value, "nbagent.model_calls": r.model_calls,
                      "nbagent.tool_calls": r.tool_calls})
        attrs.update({f"nbagent.{k}": v for k, v in row.items() if k in TURN_COLUMNS and v is not None})
        if path:
            attrs["nbagent.session.path"] = path
        if self.include_content:
            prompt = next((s.content for s in steps if s.kind is StepKind.PROMPT), r.prompt)
            attrs["gen_ai.input.messages"] = _messages("user", [_text(prompt)])
            if any(s.is_model_call for s in steps):  # the answer as ask() gives it
                attrs["gen_ai.output.messages"] = _messages("assistant", [_text(response_of(list(steps), r).text)],
                                                            r.finish_reason)
        start = r.started_at or min((c.start for c in children), default=0.0)
        for c in children:  # a step stamped a moment before its turn (older versions) starts with it
            c.start = max(c.start, start)
            c.end = max(c.end, c.start)
        ends = [c.end for c in children] + [s.finished_at or s.created_at for s in steps]
        end = max([start, *ends, *([r.finished_at] if r.finished_at is not None else [])])
        error = None
        if r.status is TurnStatus.ERROR:
            error = _error_text(r.error, "the turn failed")
            attrs["error.type"] = str(r.http_code) if r.http_code else "error"
        return SpanPlan("invoke_agent", self.trace_id, self.turn_id, None, SpanKind.INTERNAL, start, end,
                        self._clean(attrs), error)

    def _chat(self, step: Step) -> SpanPlan:
        model = step.model or self.record.model
        attrs = self._common("chat")
        if model:
            attrs["gen_ai.request.model"] = model
        if step.model:
            attrs["gen_ai.response.model"] = step.model
        if step.usage_metadata is not None:
            attrs.update(_usage(step.usage_metadata))
            cost, source = self._call_cost(model, step)
            if cost is not None:
                attrs["nbagent.cost_usd"] = cost
            if source:
                attrs["nbagent.price_source"] = source
        if step.finish_reason is not None:
            attrs["gen_ai.response.finish_reasons"] = [_reason(step.finish_reason)]
        attrs["nbagent.step_index"] = step.step_index
        if step.prefix_change is not None:
            attrs["nbagent.prefix_change"] = step.prefix_change.value
        if step.status is StepStatus.CANCELED:
            attrs["nbagent.status"] = "canceled"
        if self.include_content:
            parts: list[dict[str, Any]] = [{"type": "reasoning", "content": _safe(step.thinking)}] if step.thinking else []
            parts += [_text(step.content)] if step.content else []
            parts += [{"type": "tool_call", "id": c.id, "name": c.name, "arguments": c.args} for c in step.tool_calls]
            attrs["gen_ai.output.messages"] = _messages("assistant", parts, step.finish_reason)
        error = None
        if step.status in (StepStatus.ERROR, StepStatus.TERMINAL_ERROR):
            error = _error_text(step.error, "the model call failed")
            attrs["error.type"] = str(step.http_code) if step.http_code else "error"
        return self._child(f"chat {model}" if model else "chat", step, SpanKind.CLIENT, attrs, error)

    def _tool(self, step: Step) -> SpanPlan:
        call = step.tool_calls[0] if step.tool_calls else None
        name = call.name if call is not None else ""
        attrs = self._common("execute_tool")
        attrs.update({"gen_ai.tool.name": name, "gen_ai.tool.type": "function", "nbagent.step_index": step.step_index})
        if call is not None and call.id:
            attrs["gen_ai.tool.call.id"] = call.id
        if step.approval is not None:
            attrs["nbagent.approval"] = step.approval.value
        if step.decided_by:
            attrs["nbagent.decided_by"] = step.decided_by
        if step.decided_at is not None:
            attrs["nbagent.approval_wait_s"] = max(step.decided_at - step.created_at, 0.0)
        if step.tool_seconds is not None:
            attrs["nbagent.tool.run_seconds"] = max(step.tool_seconds, 0.0)
        if step.tool_server:
            attrs["nbagent.tool.server"] = step.tool_server
        if self.include_content:
            attrs["gen_ai.tool.call.arguments"] = json.dumps(call.args if call else {}, ensure_ascii=False,
                                                             default=str)  # capped as a whole in _clean
            attrs["gen_ai.tool.call.result"] = step.content
        error = None
        if step.status in (StepStatus.ERROR, StepStatus.TERMINAL_ERROR) or step.error:
            error = _error_text(step.error, "the tool failed")
            attrs["error.type"] = "tool_error"
        return self._child(f"execute_tool {name}" if name else "execute_tool", step, SpanKind.INTERNAL, attrs, error)

    def _child(self, name: str, step: Step, kind: SpanKind, attrs: dict[str, AttributeValue],
               error: str | None) -> SpanPlan:
        end = step.finished_at if step.finished_at is not None else step.created_at
        return SpanPlan(name, self.trace_id, _id(f"{self.key}:step:{step.step_index}", 8), self.turn_id, kind,
                        step.created_at, max(end, step.created_at), self._clean(attrs), error)

    def _clean(self, attrs: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
        """The attributes with every string UTF-8 safe, redacted and at most :data:`MAX_ATTRIBUTE_CHARS` long
        (saying how much was cut), and no NaN (a missing figure is left out)."""
        clean = self.options.clean
        out: dict[str, AttributeValue] = {}
        for k, v in attrs.items():
            if isinstance(v, float) and math.isnan(v):
                continue
            if isinstance(v, str):
                v = cap(clean(v), MAX_ATTRIBUTE_CHARS - 50)  # redacted first: no half key is left
            elif isinstance(v, list):
                v = [cap(clean(x), MAX_ATTRIBUTE_CHARS - 50) for x in v]
            out[k] = v
        return out

    def _call_cost(self, model: str, step: Step) -> tuple[float | None, str | None]:
        price, source = self.options.price(model, self.record.provider)
        if price is None or step.usage_metadata is None:
            return None, source
        cost = price.usage_cost(step.usage_metadata)
        return (None if math.isnan(cost) else cost), source


def _id(text: str, size: int) -> int:
    """A non-zero id of ``size`` bytes from ``text`` (the same text, the same id)."""
    value = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:size], "big")
    return value or 1


def _usage(usage: Any) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {
        "gen_ai.usage.input_tokens": usage.prompt_token_count,
        "gen_ai.usage.output_tokens": usage.candidates_token_count + usage.thoughts_token_count,
    }
    optional = {"gen_ai.usage.reasoning.output_tokens": usage.thoughts_token_count,
                "gen_ai.usage.cache_read.input_tokens": usage.cached_content_token_count,
                "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_token_count}
    attrs.update({k: v for k, v in optional.items() if v})
    return attrs


def _reason(reason: FinishReason) -> str:
    return reason.value.lower()


def _text(text: str) -> dict:
    return {"type": "text", "content": _safe(text)}


def _safe(text: str) -> str:
    """A message part's text, redacted before :func:`_messages` may cut it (no half key is left)."""
    return redact(clean_text(text))


def attributes_bytes(attributes: Mapping[str, Any]) -> int:
    """About how many bytes ``attributes`` take in an OTLP request (UTF-8 strings, 8 per number)."""
    size = 0
    for key, value in attributes.items():
        size += len(key) + 8
        if isinstance(value, str):
            size += len(value.encode("utf-8", "surrogatepass"))
        elif isinstance(value, (list, tuple)):
            size += sum(len(str(v).encode("utf-8", "surrogatepass")) + 4 for v in value)
        else:
            size += 8
    return size


def _messages(role: str, parts: list[dict], finish: FinishReason | None = None) -> str:
    """The GenAI message JSON, at most :data:`MAX_ATTRIBUTE_CHARS` long: the longest texts are cut
    (saying how much) so that the JSON stays whole."""
    message: dict[str, Any] = {"role": role, "parts": parts}
    if finish is not None and role == "assistant":
        message["finish_reason"] = _reason(finish)
    texts = [p for p in parts if isinstance(p.get("content"), str)]
    whole = {id(p): p["content"] for p in texts}
    out = json.dumps([message], ensure_ascii=False, default=str)
    for _ in range(8):  # a round cuts about the excess (escapes counted); a second one what is left
        over = len(out) - (MAX_ATTRIBUTE_CHARS - 100)
        if over <= 0 or not texts:
            break
        longest = max(texts, key=lambda p: len(p["content"]))
        text = longest["content"]
        written = len(json.dumps(text, ensure_ascii=False))  # escapes (a newline is two characters) count
        keep = max(int(len(text) * (written - over) / written) - 40, 0)  # 40: the marker saying what was cut
        longest["content"] = cap(whole[id(longest)], keep)
        out = json.dumps([message], ensure_ascii=False, default=str)
    return out


def _error_text(error: str, fallback: str) -> str:
    return cap(redact(clean_text(error or fallback)), ERROR_CHARS)
