"""OpenAI Responses stream events in, nbagent events out (the response half of the wire).

Events are dispatched on ``data.type`` (the ``event:`` name is the same).
Output items are addressed by their ``id`` and ordered by ``output_index``:
``message`` text and refusal deltas, ``reasoning`` summary or raw
reasoning-text deltas (several summary parts are joined with a blank line),
``function_call`` argument deltas keyed by the item id while the call is
sent back by its ``call_id``. ``response.output_item.done`` is
authoritative: its arguments, its text, and the reasoning item kept whole
for replay. Usage and the finish come with ``response.completed`` /
``response.incomplete`` (``max_output_tokens`` -> LENGTH, ``content_filter``
-> CONTENT_FILTER), whose ``output`` also completes items a server never
sent ``output_item.done`` for; ``response.failed`` and ``error`` events
raise. A function call whose item never finished was cut by the token
limit: ``Finish.cut_tool_calls``. Built-in tool items
(web search, ...) and unknown events are ignored.
"""

from __future__ import annotations

import json
from typing import Any

from ...core.errors import NbagentError, NetworkError
from ...core.messages import Message, TextPart, ThinkingPart, ToolUsePart
from ...core.steps import CutToolCall, ToolCall
from ..base import (
    REFUSAL,
    Event,
    Finish,
    RefusalDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    parse_tool_arguments,
)
from ..http_errors import classify_error
from ..sse import SSEEvent
from ..stream_json import UNDECODED, parse_json
from .finish import finish_reason
from .spec import SPEC

OPENAI_ITEM = "openai_item"  # ThinkingPart.provider_details: the reasoning item, replayed whole
ITEM_ID = "item_id"  # TextPart / ToolUsePart provider_details: the output item's id
PHASE = "phase"  # TextPart provider_details: "commentary" / "final_answer" (newer models)


class _Text:
    """A string built from deltas: ``add`` is O(1), ``str()`` joins once (no copy per delta)."""

    __slots__ = ("pieces",)

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def add(self, piece: str) -> None:
        if piece:
            self.pieces.append(piece)

    def __bool__(self) -> bool:
        return bool(self.pieces)

    def __str__(self) -> str:
        if len(self.pieces) > 1:
            self.pieces = ["".join(self.pieces)]
        return self.pieces[0] if self.pieces else ""


class _TextField:
    """An ``_Item`` attribute read as ``str`` and set from ``str``, kept as a ``_Text`` in ``buffers``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else str(obj.buffers[self.name])

    def __set__(self, obj: Any, value: str) -> None:
        obj.buffers[self.name].pieces = [str(value)] if value else []


class _Item:
    """One output item as it streams."""

    text = _TextField()  # message text, or reasoning shown as thinking
    refusal = _TextField()
    arguments = _TextField()

    def grow(self, name: str) -> _Text:
        """The buffer of ``text`` / ``refusal`` / ``arguments``, to ``add`` deltas to."""
        return self.buffers[name]

    def __init__(self, type: str, id: str, index: int, raw: dict | None = None) -> None:
        self.type, self.id, self.index = type, id, index
        self.buffers = {"text": _Text(), "refusal": _Text(), "arguments": _Text()}
        self.raw = raw if raw is not None else {}  # the newest full item (output_item.done wins)
        self.part: int | None = None  # the reasoning summary / content index being streamed
        self.done = False


class OpenAIResponsesStreamParser:
    """Responses SSE events in, nbagent events out (one response body)."""

    def __init__(self, provider: str = "openai-responses", structured: bool = False) -> None:
        self.provider = provider
        self.structured = structured
        self.items: dict[str, _Item] = {}
        self.response: dict = {}  # the terminal event's response object
        self.status: str | None = None
        self.model = ""
        self._output = False

    def feed(self, sse: SSEEvent, payload: Any = UNDECODED) -> list[Event]:
        data = parse_json(sse.data, self.provider) if payload is UNDECODED else payload
        if not isinstance(data, dict):
            return []
        kind = str(data.get("type") or sse.event or "")
        if kind == "error" or sse.event == "error":
            raise self._error(data)
        handler = _HANDLERS.get(kind)
        return handler(self, data) if handler else []

    # -- events -------------------------------------------------------------

    def _on_response(self, data: dict) -> list[Event]:  # created / in_progress
        response = data.get("response") or {}
        self.model = str(response.get("model") or self.model)
        return []

    def _on_item_added(self, data: dict) -> list[Event]:
        item = self._add(data.get("item") or {}, data.get("output_index"))
        if item.type == "function_call" and item.id:
            self._output = True
            return [ToolCallStart(key=item.id, id=str(item.raw.get("call_id") or ""),
                                  name=str(item.raw.get("name") or ""))]
        return []

    def _on_text_delta(self, data: dict) -> list[Event]:
        text = data.get("delta") or ""
        if type(text) is not str:
            text = str(text)
        item = self.items.get(data.get("item_id") or "")  # the usual case: a known item (str ids)
        (item if item is not None and item.id else self._item(data, "message")).grow("text").add(text)
        self._output = self._output or bool(text)
        return [TextDelta(text)] if text else []

    def _on_refusal_delta(self, data: dict) -> list[Event]:
        text = str(data.get("delta") or "")
        self._item(data, "message").grow("refusal").add(text)
        self._output = self._output or bool(text)
        return [RefusalDelta(text)] if text else []

    def _on_reasoning_delta(self, data: dict) -> list[Event]:
        item = self._item(data, "reasoning")
        text = str(data.get("delta") or "")
        part = data.get("summary_index", data.get("content_index"))
        if item.grow("text") and part != item.part and text:
            text = "\n\n" + text  # a new summary part
        item.part = part
        item.grow("text").add(text)
        self._output = self._output or bool(text)
        return [ThinkingDelta(text)] if text else []

    def _on_arguments_delta(self, data: dict) -> list[Event]:
        item = self._item(data, "function_call")
        delta = str(data.get("delta") or "")
        item.grow("arguments").add(delta)
        return [ToolCallDelta(key=item.id, args_delta=delta)] if delta else []

    def _on_arguments_done(self, data: dict) -> list[Event]:
        item = self._item(data, "function_call")
        if isinstance(data.get("arguments"), str):
            item.arguments = data["arguments"]
        return []

    def _on_item_done(self, data: dict) -> list[Event]:
        raw = data.get("item") or {}
        item = self._add(raw, data.get("output_index"))
        item.done = True
        if item.type == "message":
            return self._final_text(item, raw)
        if item.type == "reasoning":
            return self._final_reasoning(item, raw)
        if item.type != "function_call":
            return []
        if isinstance(raw.get("arguments"), str):
            item.arguments = raw["arguments"]
        call = ToolCall(str(raw.get("call_id") or ""), str(raw.get("name") or ""), parse_tool_arguments(item.arguments))
        return [ToolCallEnd(key=item.id, call=call)]

    def _on_terminal(self, data: dict) -> list[Event]:  # completed / incomplete / failed
        self.response = data.get("response") or {}
        self.status = str(self.response.get("status") or data.get("type", "").rpartition(".")[2])
        self.model = str(self.response.get("model") or self.model)
        if self.status == "failed":
            raise self._error(self.response)
        events: list[Event] = []
        for n, raw in enumerate(self.response.get("output") or []):  # items a lax server never finished
            item = self.items.get(str(raw.get("id") or "")) if isinstance(raw, dict) else None
            if isinstance(raw, dict) and (item is None or not item.done) and raw.get("status") in (None, "completed"):
                events += self._on_item_done({"item": raw, "output_index": item.index if item else n})
        usage = self.response.get("usage")
        if isinstance(usage, dict) and usage:
            events.append(Usage(SPEC.read_usage(usage), raw=usage))
        return events

    # -- the end ------------------------------------------------------------

    def close(self) -> list[Event]:
        if self.status is None:
            raise NetworkError(
                "the Responses stream ended before response.completed: the reply is incomplete "
                "(connection cut or proxy timeout)", provider=self.provider)
        parts, cut = self._parts()
        text = "".join(p.text for p in parts if isinstance(p, TextPart) and not p.provider_details.get(REFUSAL))
        refused = any(isinstance(p, TextPart) and p.provider_details.get(REFUSAL) for p in parts)
        details = self.response.get("incomplete_details") or {}
        raw = str(details.get("reason") or self.status) if self.status == "incomplete" else self.status
        reason = finish_reason(self.status, incomplete_reason=raw, refused=refused,
                               called_tools=any(isinstance(p, ToolUsePart) for p in parts))
        structured = _json(text) if self.structured else None
        return [Finish(reason=reason, raw_reason=raw, message=Message("assistant", parts),
                       structured_output=structured, model=self.model, cut_tool_calls=cut)]

    def _parts(self) -> tuple[list, list[CutToolCall]]:
        parts: list = []
        cut: list[CutToolCall] = []
        items = sorted(self.items.values(), key=lambda i: i.index)
        for n, item in enumerate(items):
            following = items[n + 1].type if n + 1 < len(items) else ""
            if item.type == "reasoning":
                replay = following in ("message", "function_call") and _replayable(item.raw)
                if item.text or replay:
                    parts.append(ThinkingPart(str(item.text), provider_details={OPENAI_ITEM: item.raw} if replay else {}))
            elif item.type == "message":
                details = {ITEM_ID: item.id, **({PHASE: item.raw["phase"]} if item.raw.get("phase") else {})}
                parts += [TextPart(str(item.text), provider_details=dict(details))] if item.text else []
                parts += [TextPart(str(item.refusal), provider_details={**details, REFUSAL: True})] if item.refusal else []
            elif item.type == "function_call":
                call_id, name = str(item.raw.get("call_id") or ""), str(item.raw.get("name") or "")
                if item.done:
                    parts.append(ToolUsePart(call_id, name, parse_tool_arguments(item.arguments), {ITEM_ID: item.id}))
                else:  # never finished: cut by the token limit
                    cut.append(CutToolCall(call_id, name, str(item.arguments)))
        return parts, cut

    # -- helpers ------------------------------------------------------------

    def _item(self, data: dict, kind: str) -> _Item:
        """The item a delta event (``item_id``) is about; made up when ``output_item.added`` was skipped."""
        return self._add({"id": data.get("item_id"), "type": kind}, data.get("output_index"), full=False)

    def _add(self, raw: dict, index: Any, full: bool = True) -> _Item:
        item_id = str(raw.get("id") or "")
        item = self.items.get(item_id)
        if item is None:
            position = index if isinstance(index, int) else len(self.items)
            item = self.items[item_id] = _Item(str(raw.get("type") or ""), item_id, position, dict(raw))
        elif full:
            item.raw = dict(raw)
        return item

    def _final_text(self, item: _Item, raw: dict) -> list[Event]:
        """Take the done item's text as final; stream whatever the deltas had not shown."""
        content = [c for c in raw.get("content") or [] if isinstance(c, dict)]
        text = "".join(str(c.get("text") or "") for c in content if c.get("type") == "output_text")
        refusal = "".join(str(c.get("refusal") or "") for c in content if c.get("type") == "refusal")
        events: list[Event] = []
        if text and text.startswith(item.text) and text != item.text:
            events.append(TextDelta(text[len(item.text):]))
        if refusal and refusal.startswith(item.refusal) and refusal != item.refusal:
            events.append(RefusalDelta(refusal[len(item.refusal):]))
        item.text, item.refusal = text or item.text, refusal or item.refusal
        return events

    def _final_reasoning(self, item: _Item, raw: dict) -> list[Event]:
        """Show reasoning text that arrived only in the done item (servers that send no deltas)."""
        if item.text:
            return []
        pieces = [str(p.get("text") or "") for key in ("summary", "content")
                  for p in raw.get(key) or [] if isinstance(p, dict)]
        item.text = "\n\n".join(p for p in pieces if p)
        return [ThinkingDelta(item.text)] if item.text else []

    def _error(self, data: dict) -> NbagentError:
        error_body = data.get("error")
        err = error_body if isinstance(error_body, dict) else data
        code, message = err.get("code"), str(err.get("message") or "the response failed")
        error = classify_error(None, f"OpenAI Responses stream error ({code or 'error'}): {message}",
                               codes=[code, err.get("type")], provider=self.provider)
        if self._output:  # a partial reply was shown: do not retry it
            error.retryable = False
        return error


def _replayable(raw: dict) -> bool:
    """A reasoning item can go back statelessly only with its encrypted (or raw) content."""
    return bool(raw.get("encrypted_content") or raw.get("content"))


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


_P = OpenAIResponsesStreamParser
_HANDLERS = {
    "response.created": _P._on_response,
    "response.in_progress": _P._on_response,
    "response.output_item.added": _P._on_item_added,
    "response.output_text.delta": _P._on_text_delta,
    "response.refusal.delta": _P._on_refusal_delta,
    "response.reasoning_summary_text.delta": _P._on_reasoning_delta,
    "response.reasoning_text.delta": _P._on_reasoning_delta,
    "response.function_call_arguments.delta": _P._on_arguments_delta,
    "response.function_call_arguments.done": _P._on_arguments_done,
    "response.output_item.done": _P._on_item_done,
    "response.completed": _P._on_terminal,
    "response.incomplete": _P._on_terminal,
    "response.failed": _P._on_terminal,
}
