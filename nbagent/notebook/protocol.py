"""The widgets' custom messages, declared once: a dataclass per request (front end -> kernel) and
per event (kernel -> front end), in one registry per widget (``CHAT``, ``BROWSER``, ``CLASS``).

On the wire a message is ``{"type": kind, **fields}``, and a field nobody declared is refused (as the
schema's ``additionalProperties: false`` says). A request that expects an answer names its answer class
and has an ``id`` its answer carries back (``Protocol.request`` checks it; ``encode_answer`` sets it): in
the chat the answer is itself an event (``Names`` answers ``NamesRequest``), in the session browser and
the class view every answer goes in the ``reply`` envelope ``{"type": "reply", "id", "ok": true,
**answer}`` (or ``"ok": false, "error"`` when it failed).

A widget serves its protocol with a :class:`Handlers`: one handler per request class, so no widget
branches on kinds. ``Handlers.receive`` decodes a message (each field checked against its declared
type: a malformed one is an :class:`~nbagent.core.errors.InvalidRequest` naming the field), runs the
handler, and sends its answer. Adding a message is one declaration here plus its handler::

    @CHAT.request("ping", answer=Pong)
    @dataclass(frozen=True)
    class Ping(Message):
        id: str = ""

    widget.handlers.on(Ping, lambda req: Pong(id=req.id))

``schema()`` is the same declaration as JSON Schema (js/src/protocol.json, written by
``python -m nbagent.notebook.protocol``; a test keeps it current and the JS tests check the
front end's messages against it).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from enum import Enum
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Required, TypedDict, TypeVar
from collections.abc import Callable

from ..core.errors import InvalidRequest
from ..core.steps import Delivery, Step, StepKind, field_roles
from ..core.usage import UsageMetadata

M = TypeVar("M", bound="Message")
T = TypeVar("T")
__all__ = ["BROWSER", "CHAT", "CLASS", "DeltaItem", "Handlers", "Message", "Patch", "PATCH_RULES", "PatchRules", "Protocol",
           "schema", "SCHEMA_PATH"]
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "js" / "src" / "protocol.json"


class Message:
    """A widget message: its ``KIND`` is the wire ``type`` (set by ``Protocol.request`` / ``event``)."""

    KIND: ClassVar[str] = ""


@dataclass(frozen=True)
class _Field:
    name: str
    check: tuple[type, ...]  # the JSON types the value may have
    optional: bool  # None allowed
    required: bool  # no default: the message must carry it
    schema: dict
    omit_empty: bool = False  # defaults to an empty list / dict: an event leaves it out while empty


_JSON_TYPES: dict[Any, tuple[tuple[type, ...], dict]] = {
    str: ((str,), {"type": "string"}),
    bool: ((bool,), {"type": "boolean"}),
    int: ((int,), {"type": "integer"}),
    float: ((int, float), {"type": "number"}),
    list: ((list,), {"type": "array"}),
    dict: ((dict,), {"type": "object"}),
}


def _field_of(f: dataclasses.Field, hint: Any) -> _Field:
    optional = False
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        optional = True
        rest = [a for a in args if a is not type(None)]
        hint = functools.reduce(lambda a, b: a | b, rest)
    required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    omit_empty = f.default_factory is not dataclasses.MISSING
    if hint is Any:
        return _Field(f.name, (object,), True, required, {}, omit_empty)
    base = typing.get_origin(hint) or hint
    check = _JSON_TYPES[base][0] if base in _JSON_TYPES else (object,)
    sch = _schema_of(hint)
    if optional:
        sch = {"anyOf": [sch, {"type": "null"}]}
    return _Field(f.name, check, optional, required, sch, omit_empty)


def _unwrapped(hint: Any) -> Any:
    """``hint`` without ``Required[...]`` / ``NotRequired[...]``."""
    return typing.get_args(hint)[0] if typing.get_origin(hint) in (Required, typing.NotRequired) else hint


def _schema_of(hint: Any) -> dict:
    """The JSON Schema of a declared type: a JSON type, a list of one, a tuple (a fixed array), a
    ``Literal``, a union, or a ``TypedDict`` (an object with exactly its keys)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return {}
    if origin is Literal:
        return {"const": args[0]} if len(args) == 1 else {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema_of(a) for a in args]}
    if origin is tuple:
        return {"type": "array", "prefixItems": [_schema_of(a) for a in args], "minItems": len(args), "maxItems": len(args)}
    if typing.is_typeddict(hint):
        hints = typing.get_type_hints(hint, include_extras=True)  # Required[...] survives string annotations so
        required = sorted(k for k, v in hints.items() if typing.get_origin(v) is Required or
                          (hint.__total__ and typing.get_origin(v) is not typing.NotRequired))
        return {"type": "object", "properties": {k: _schema_of(_unwrapped(v)) for k, v in hints.items()},
                "required": required, "additionalProperties": False}
    base = origin or hint
    sch = dict(_JSON_TYPES[base][1])
    if base is list and args:
        sch["items"] = _schema_of(args[0])
    return sch


class _Spec:
    """A declared message class, its answer, and its fields (read from its type hints at first use,
    not at import: the chat's first display pays for no message it has not sent, issue #32)."""

    def __init__(self, cls: type, answer: type | None = None) -> None:
        self.cls = cls
        self.answer = answer

    @functools.cached_property
    def fields(self) -> tuple[_Field, ...]:
        return _fields(self.cls)


class Protocol:
    """The requests and events of one widget, by kind."""

    def __init__(self, widget: str, reply: str = "") -> None:
        self.widget = widget
        self.reply = reply  # the envelope kind of answers ("": an answer is an event of its own)
        self.requests: dict[str, _Spec] = {}
        self.events: dict[str, _Spec] = {}
        self.answers: dict[type, _Spec] = {}  # a reply envelope's contents, by class

    def _declare(self, table: dict[str, _Spec], kind: str, answer: type | None = None) -> Callable[[type[M]], type[M]]:
        def register(cls: type[M]) -> type[M]:
            if kind in table:
                raise ValueError(f"{self.widget}: {kind!r} is declared twice")
            cls.KIND = kind
            table[kind] = _Spec(cls, answer)
            return cls
        return register

    def request(self, kind: str, answer: type | None = None) -> Callable[[type[M]], type[M]]:
        """Declare a request (front end -> kernel); ``answer``: the class its handler returns. A request
        with an answer has an ``id``, and its answer carries it back (one correlation style: in the
        chat an answer is an event with its own ``id``, in a reply envelope the envelope's ``id``)."""
        declare = self._declare(self.requests, kind, answer)

        def checked(cls: type[M]) -> type[M]:
            named = [c for c in (cls, None if self.reply else answer) if c is not None]
            if answer is not None and any("id" not in {f.name for f in dataclasses.fields(c)} for c in named):
                raise ValueError(f"{self.widget}: {kind!r} has an answer: it and its answer need an 'id'")
            return declare(cls)
        return checked

    def event(self, kind: str) -> Callable[[type[M]], type[M]]:
        """Declare an event (kernel -> front end)."""
        return self._declare(self.events, kind)

    def answer(self, cls: type[T]) -> type[T]:
        """Declare what goes in a reply envelope (the session browser's answers)."""
        self.answers[cls] = _Spec(cls)
        return cls

    def decode(self, content: Any) -> Message:
        """The request a message carries; InvalidRequest naming what is wrong when it is malformed."""
        if not isinstance(content, dict):
            raise InvalidRequest(f"a {self.widget} message must be an object, got {type(content).__name__}")
        kind = content.get("type")
        spec = self.requests.get(kind) if isinstance(kind, str) else None
        if spec is None:
            raise InvalidRequest(f"unknown {self.widget} request {kind!r}")
        return _build(spec, content, str(kind))

    def encode(self, message: Message) -> dict:
        """An event as the wire dict (its fields as they are, shallow; one that defaults to an empty
        list or dict is left out while empty)."""
        values = ((f, getattr(message, f.name)) for f in self.events[message.KIND].fields)
        return {"type": message.KIND, **{f.name: v for f, v in values if v or not f.omit_empty}}

    def encode_answer(self, request: Message, answer: Any) -> dict:
        """What a handler returned as the wire message answering ``request``."""
        if not self.reply:  # the answer is an event of its own, with the request's id
            return {**self.encode(answer), "id": getattr(request, "id", "")}
        body: dict[str, Any] = {} if answer is None else {f.name: getattr(answer, f.name) for f in self.answers[type(answer)].fields}
        return {"type": self.reply, "id": getattr(request, "id", ""), "ok": True, **body}

    def failure(self, rid: str, error: str) -> dict:
        """A reply envelope saying a request failed."""
        return {"type": self.reply, "id": rid, "ok": False, "error": error}

    def schema(self) -> dict:
        """This widget's messages as JSON Schema: ``requests`` and ``events`` by kind (and the reply's answers)."""
        out: dict[str, Any] = {
            "requests": {k: _object_schema(k, s) for k, s in sorted(self.requests.items())},
            "events": {k: _object_schema(k, s) for k, s in sorted(self.events.items())},
        }
        if self.reply:
            out["reply"] = self.reply
            out["answers"] = {k: s.answer.__name__ if s.answer else None for k, s in sorted(self.requests.items())}
            out["answer_fields"] = {s.cls.__name__: _object_schema("", s) for s in self.answers.values()}
        else:
            out["answers"] = {k: getattr(s.answer, "KIND", None) for k, s in sorted(self.requests.items())}
        return out


def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return tuple(_field_of(f, hints[f.name]) for f in dataclasses.fields(cls))


def _build(spec: _Spec, content: dict, kind: str) -> Any:
    unknown = sorted(set(content) - {"type"} - {f.name for f in spec.fields})
    if unknown:  # as the schema says (additionalProperties: false)
        raise InvalidRequest(f"the {kind!r} message has no field {unknown[0]!r}")
    values: dict[str, Any] = {}
    for f in spec.fields:
        if f.name not in content:
            if f.required:
                raise InvalidRequest(f"the {kind!r} message lacks {f.name!r}")
            continue
        value = content[f.name]
        if value is None and f.optional:
            values[f.name] = None
            continue
        if not isinstance(value, f.check) or (bool not in f.check and isinstance(value, bool) and f.check != (object,)):
            want = " or ".join(t.__name__ for t in f.check)
            raise InvalidRequest(f"the {kind!r} message's {f.name!r} must be {want}, got {type(value).__name__}")
        values[f.name] = value
    return spec.cls(**values)


def _object_schema(kind: str, spec: _Spec) -> dict:
    props: dict[str, Any] = {"type": {"const": kind}} if kind else {}
    props.update({f.name: f.schema for f in spec.fields})
    required = (["type"] if kind else []) + [f.name for f in spec.fields if f.required]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


class Handlers:
    """One widget's handlers for its protocol's requests; ``receive`` runs the one a message names.

    ``send`` puts a wire dict on the comm; ``failed(request kind, error)`` is called when decoding or a
    handler raised (the chat shows a notice; with a reply envelope the failure is also answered).
    """

    def __init__(self, protocol: Protocol, send: Callable[[dict], Any],
                 failed: Callable[[str, Exception], Any] | None = None) -> None:
        self.protocol = protocol
        self.send = send
        self.failed = failed
        self.table: dict[type, Callable[[Any], Any]] = {}

    def on(self, cls: type[M], handler: Callable[[M], Any]) -> None:
        """Handle requests of ``cls``; what the handler returns (not None) is sent as the answer."""
        if cls.KIND not in self.protocol.requests or self.protocol.requests[cls.KIND].cls is not cls:
            raise ValueError(f"{cls.__name__} is not a request of the {self.protocol.widget} protocol")
        self.table[cls] = handler

    def missing(self) -> list[str]:
        """The requests of the protocol nothing handles (a test keeps it empty)."""
        return sorted(k for k, s in self.protocol.requests.items() if s.cls not in self.table)

    def emit(self, event: Message) -> None:
        """Send an event."""
        self.send(self.protocol.encode(event))

    def receive(self, content: Any) -> None:
        """Decode a message from the front end and run its handler (errors go to ``failed``)."""
        kind = content.get("type") if isinstance(content, dict) else None
        rid = content.get("id") if isinstance(content, dict) else None
        try:
            request = self.protocol.decode(content)
            handler = self.table.get(type(request))
            if handler is None:
                raise InvalidRequest(f"the {self.protocol.widget} widget does not handle {kind!r}")
            answer = handler(request)
            if answer is not None or self.protocol.reply:  # a reply envelope answers every request
                self.send(self.protocol.encode_answer(request, answer))
        except Exception as exc:
            if self.protocol.reply:
                self.send(self.protocol.failure(rid if isinstance(rid, str) else "", str(exc) or type(exc).__name__))
            if self.failed is not None:
                self.failed(str(kind), exc)
            elif not self.protocol.reply:
                raise


CHAT = Protocol("chat")
BROWSER = Protocol("session browser", reply="reply")
CLASS = Protocol("class view", reply="reply")  # the teacher's live view (class_view.py)


# --- the chat widget: a live turn's payloads and the rules a view rebuilds it by ---------------------

DeltaItem = (tuple[int, Literal["c", "t"], int, str] | tuple[int, Literal["c", "t"], int, str, Literal[True]])
"""Text for a step: ``[step_index, "c" (content) | "t" (thinking), offset, text]``, the offset in UTF-16
units as JavaScript counts; a 5th ``true`` replaces the field from ``offset`` on (text rewritten)."""

NewStep = tuple[int, str]
"""A new step that is all its kind says: ``[step_index, kind]``."""


class Patch(TypedDict, total=False):
    """What changed in a live turn's structure since its last patch (turn_codec.TurnBuffer.patch), applied
    before the text: the record's changed fields (a new record starts from ``PATCH_RULES.new_record``);
    each new step whole but for what a view derives (``PATCH_RULES``: its usual shape, status, times,
    model and finish reason), or a ``NewStep``; each changed step as its ``step_index`` with its changed
    fields. A null field is gone; a usage is its counts in ``PATCH_RULES.usage_fields`` order.
    ``ended``: the turn ended (``PATCH_RULES.ended_record``, its active steps ``PATCH_RULES.ended_status``),
    with each step's lengths ``n`` unless the same message's deltas carry its text to its end."""

    turn: Required[int]
    record: dict
    steps: list[dict | NewStep]
    ended: bool


@dataclass(frozen=True)
class PatchRules:
    """What a view fills in of a live turn that its patches leave out: the encoder (turn_codec.py)
    leaves out exactly this, the decoder (js/src/reducer.js, from the generated js/src/protocol_data.js)
    puts it back. Declared once here, as data."""

    usage_fields: tuple[str, ...]  # a patch's usage counts, in this order (trailing zeros left out)
    usual_shapes: dict[str, dict[str, str]]  # a new step's type, source and target, left out when these for its kind
    new_record: dict[str, str]  # a running turn's record before its first patch...
    carried_over: tuple[str, ...]  # ...with these fields of the latest turn before it
    ended_record: dict[str, str]  # at an ended patch the record is these, finish_reason only when it has none
    step_status: str  # a step without a status has this one
    ended_status: str  # at its turn's end an active step has this one
    done_kinds: tuple[str, ...]  # a new step of these kinds is done, of any other active
    from_record: dict[str, str]  # a new step of this kind has this field of the record
    footer_only: tuple[str, ...]  # record figures only the footer shows: they wait for the ended patch
    live_hidden: dict[str, tuple[str, ...]]  # step fields of a kind the live view never shows: never patched
    usage_shown_if: str  # a model call's usage goes in a patch only with this count (the thinking block's)
    finish_shown: tuple[str, ...]  # a finish step with none of these says nothing: never patched


PATCH_RULES = PatchRules(
    usage_fields=tuple(f.name for f in dataclasses.fields(UsageMetadata)),
    usual_shapes={
        "prompt": {"type": "TEXT_RESPONSE", "source": "USER", "target": "UNSPECIFIED"},
        "model_call": {"type": "TEXT_RESPONSE", "source": "MODEL", "target": "USER"},
        "tool_run": {"type": "TOOL_CALL", "source": "SYSTEM", "target": "ENVIRONMENT"},
        "finish": {"type": "FINISH", "source": "SYSTEM", "target": "USER"},
    },
    new_record={"status": "running"},
    carried_over=("model", "provider"),
    ended_record={"status": "done", "finish_reason": "STOP"},
    step_status="ACTIVE",
    ended_status="DONE",
    done_kinds=("prompt", "finish"),
    from_record={"model_call": "model", "finish": "finish_reason"},
    footer_only=("usage", "ttft", "duration", "tps", "cost"),
    live_hidden={"prompt": ("created_at", "finished_at"),
                 "model_call": ("created_at", "finished_at", "finish_reason"),
                 "finish": ("created_at", "finished_at", "finish_reason")},
    usage_shown_if="thoughts_token_count",
    finish_shown=("error", "refusal", "content", "thinking", "n", "notice", "http_code", "tool_calls"),  # n: its text went as deltas
)


# --- the chat widget: events ----------------------------------------------------------------------

@CHAT.event("deltas")
@dataclass(frozen=True)
class Deltas(Message):
    """What changed since the last flush, in one message: the running turn's structure (``patches``,
    applied first), then its text (``items``). ``state``: trait values that changed with this flush
    (``running``; ``finished``, left out when the ended patches tell it; ``gauge``, its changed keys
    merged over the view's), set in the kernel without a state update of their own."""

    items: list[DeltaItem]
    patches: list[Patch] = dataclasses.field(default_factory=list)
    state: dict = dataclasses.field(default_factory=dict)


@CHAT.event("turn")
@dataclass(frozen=True)
class TurnEnded(Message):
    """A finished turn changed (a result set after its end): its structure, bare."""

    turn: dict


@CHAT.event("turns")
@dataclass(frozen=True)
class TurnsPage(Message):
    """A page of a resync's answer: whole turns, oldest first; ``first`` tells a view to drop what it has."""

    turns: list[dict]
    first: bool
    last: bool


@CHAT.event("refused")
@dataclass(frozen=True)
class Refused(Message):
    """A prompt was not run (empty, or a turn is running): the view that sent it unlocks."""

    text: str


@CHAT.event("confirm")
@dataclass(frozen=True)
class Confirm(Message):
    """An over-budget prompt: the view asks Send anyway / Cancel (see widget_usage.py)."""

    prompt: str
    text: str


@CHAT.event("asset")
@dataclass(frozen=True)
class AssetModule(Message):
    """A lazily loaded module's code (ASSETS: math, grammars)."""

    id: str
    name: str
    code: str


@CHAT.event("names")
@dataclass(frozen=True)
class Names(Message):
    """The user's variables for ``@`` autocomplete: ``[name, type name]`` pairs."""

    id: str
    names: list[list]


@CHAT.event("history")
@dataclass(frozen=True)
class History(Message):
    """The agent's newest sessions for the History list, and the open one's path."""

    id: str
    sessions: list[dict]
    current: str


@CHAT.event("notebook")
@dataclass(frozen=True)
class NotebookOp(Message):
    """A live-notebook operation for the view to apply to its notebook (live_notebook.py): ``op`` is
    read | set_source | insert | delete | set_metadata | add_action; ``id`` "" means apply, don't answer."""

    id: str
    op: str
    cell_id: str | None = None
    source: str | None = None
    expected_source: str | None = None
    after: str | None = None
    cell_type: str | None = None
    metadata: dict | None = None
    action: dict | None = None


@CHAT.event("undo")
@dataclass(frozen=True)
class UndoDone(Message):
    """A tool card's Undo ran (``conv.notebook.undo_async``): what to show on the card."""

    id: str
    call_id: str
    ok: bool
    text: str


@CHAT.event("provenance")
@dataclass(frozen=True)
class CellProvenance(Message):
    """The metadata for a cell the user inserted from a tool card (an ``inserted`` CellAction)."""

    id: str
    metadata: dict


@CHAT.event("replay")
@dataclass(frozen=True)
class ReplayState(Message):
    """A replay's counter and what it waits for: the ``replay`` trait's value (a trait, so a view that
    arrives late has it; never sent as a custom message). ``step`` of ``steps`` recorded model calls
    played; ``waiting``: Next plays the next one; ``mismatch``: the typed ``prompt`` differs from the
    ``recorded_prompt`` and the replay waits for a ReplayChoiceRequest; ``live``: the model "answer
    live" asks, ``live_unavailable``: why it cannot ("": it can); ``live_turn``: this turn is live;
    ``stepping``: a step=True replay (Next shows); ``waits``: a new wait for Next has a new number
    (a view that pressed Next knows its press was taken even if it never saw the replay not waiting)."""

    step: int
    steps: int
    waiting: bool = False
    mismatch: bool = False
    recorded_prompt: str = ""
    prompt: str = ""
    live: str = ""
    live_unavailable: str = ""
    live_turn: bool = False
    stepping: bool = False
    waits: int = 0


# --- the chat widget: requests --------------------------------------------------------------------

@CHAT.request("send")
@dataclass(frozen=True)
class Send(Message):
    """Run a prompt typed in the box (``over_budget``: the user chose Send anyway)."""

    prompt: str = ""
    over_budget: bool = False
    cells: list | None = None  # the @cell references the view resolved (cell_refs.py)


@CHAT.request("stop")
@dataclass(frozen=True)
class Stop(Message):
    """Stop the running turn, or drop a prompt whose turn has not begun."""


@CHAT.request("approve")
@dataclass(frozen=True)
class Approve(Message):
    call_id: str


@CHAT.request("deny")
@dataclass(frozen=True)
class Deny(Message):
    call_id: str
    reason: str | None = None


@CHAT.request("resync")
@dataclass(frozen=True)
class Resync(Message):
    """A view arrived late or missed text: every turn, whole."""


@CHAT.request("view")
@dataclass(frozen=True)
class ViewShown(Message):
    """A view of the widget was drawn in a live front end: a person can press its buttons (a widget
    displayed by nbclient or papermill, with no browser, never says this; view_presence.py)."""


@CHAT.request("asset", answer=AssetModule)
@dataclass(frozen=True)
class AssetRequest(Message):
    """The view met math or a code block needing a grammar (answered once per page, if known)."""

    name: str
    id: str = ""


@CHAT.request("names", answer=Names)
@dataclass(frozen=True)
class NamesRequest(Message):
    """``@`` typed in the box."""

    id: str = ""


@CHAT.request("new_chat")
@dataclass(frozen=True)
class NewChat(Message):
    pass


@CHAT.request("history", answer=History)
@dataclass(frozen=True)
class HistoryRequest(Message):
    id: str = ""


@CHAT.request("open_session")
@dataclass(frozen=True)
class OpenSession(Message):
    path: str = ""


@CHAT.request("next")
@dataclass(frozen=True)
class NextStep(Message):
    """Play a ``step=True`` replay's next step."""


@CHAT.request("replay_choice")
@dataclass(frozen=True)
class ReplayChoiceRequest(Message):
    """The teacher's answer to a replay's prompt-mismatch notice: ``choice`` is "continue" or "live"."""

    choice: str


@CHAT.request("notebook")
@dataclass(frozen=True)
class NotebookAnswer(Message):
    """The view's answer to a NotebookOp of the same ``id`` (``result`` or ``error`` with its ``kind``),
    or ``host``: this view can reach its notebook (sent when it renders)."""

    id: str = ""
    ok: bool = False
    result: Any = None
    error: str = ""
    kind: str = ""
    host: bool = False


@CHAT.request("undo", answer=UndoDone)
@dataclass(frozen=True)
class UndoRequest(Message):
    """A tool card's Undo of an applied edit_cell / insert_cell (answered when the undo ran)."""

    id: str = ""
    call_id: str = ""


@CHAT.request("provenance", answer=CellProvenance)
@dataclass(frozen=True)
class ProvenanceRequest(Message):
    """*Insert as cell below*: the metadata that records the new cell as the agent's."""

    id: str = ""
    call_id: str = ""
    source: str = ""


# --- the session browser: answers (in the reply envelope) and requests ------------------------------

@BROWSER.answer
@dataclass(frozen=True)
class Opened:
    path: str
    turns: list[dict]
    usage: list[dict]


@BROWSER.answer
@dataclass(frozen=True)
class Found:
    paths: list[str]


@BROWSER.answer
@dataclass(frozen=True)
class Exported:
    written: str


@BROWSER.answer
@dataclass(frozen=True)
class Trashed:
    moved: str
    undo: str  # what a Restore request names to move the file back


@BROWSER.answer
@dataclass(frozen=True)
class Restored:
    restored: str


@BROWSER.answer
@dataclass(frozen=True)
class Resumed:
    path: str


@BROWSER.answer
@dataclass(frozen=True)
class AssetCode:
    code: str


@BROWSER.request("refresh")
@dataclass(frozen=True)
class Refresh(Message):
    id: str = ""


@BROWSER.request("search", answer=Found)
@dataclass(frozen=True)
class Search(Message):
    id: str = ""
    text: str = ""


@BROWSER.request("asset", answer=AssetCode)
@dataclass(frozen=True)
class BrowserAsset(Message):
    id: str = ""
    name: str = ""


@BROWSER.request("open", answer=Opened)
@dataclass(frozen=True)
class Open(Message):
    id: str = ""
    path: str = ""


@BROWSER.request("export", answer=Exported)
@dataclass(frozen=True)
class Export(Message):
    id: str = ""
    path: str = ""
    fmt: str = "md"


@BROWSER.request("trash", answer=Trashed)
@dataclass(frozen=True)
class Trash(Message):
    id: str = ""
    path: str = ""


@BROWSER.request("restore", answer=Restored)
@dataclass(frozen=True)
class Restore(Message):
    """*Undo* of a Delete: ``path`` is the ``undo`` a Trashed answer gave."""

    id: str = ""
    path: str = ""


@BROWSER.request("resume", answer=Resumed)
@dataclass(frozen=True)
class Resume(Message):
    id: str = ""
    path: str = ""


# --- the class view: the browser's open / asset requests and answers, its rows, and changed rows -----

CLASS.request("open", answer=Opened)(Open)  # a student's latest session, read-only
CLASS.request("asset", answer=AssetCode)(BrowserAsset)
CLASS.answer(Opened)
CLASS.answer(AssetCode)


@CLASS.answer
@dataclass(frozen=True)
class ClassRows:
    rows: list[dict]  # every student's row (analysis/class_summary.py's CLASS_COLUMNS, as JSON)
    notice: str  # files skipped, the folder missing ("" none)


@CLASS.request("rows", answer=ClassRows)
@dataclass(frozen=True)
class RowsRequest(Message):
    id: str = ""


@CLASS.event("changed")
@dataclass(frozen=True)
class RowsChanged(Message):
    """Sessions saved: only the rows that changed, the users whose rows went, and the notice."""

    rows: list[dict]
    removed: list[str]
    notice: str = ""


def schema() -> dict:
    """Every widget's messages as JSON Schema (js/src/protocol.json), and the chat's ``PATCH_RULES``."""
    return {"$comment": "generated by `python -m nbagent.notebook.protocol` from nbagent/notebook/protocol.py; do not edit",
            "chat": {**CHAT.schema(), "patch_rules": rules_data()},
            "session_browser": BROWSER.schema(), "class_view": CLASS.schema()}


def rules_data() -> dict:
    """``PATCH_RULES`` as JSON data (tuples as lists)."""
    return json.loads(json.dumps(dataclasses.asdict(PATCH_RULES)))


def schema_text() -> str:
    return json.dumps(schema(), indent=1, sort_keys=True) + "\n"


_TS = {"string": "string", "boolean": "boolean", "integer": "number", "number": "number", "object": "Record<string, any>"}


def _ts_type(sch: dict) -> str:
    if "anyOf" in sch:
        return " | ".join(_ts_type(s) for s in sch["anyOf"])
    if "const" in sch:
        return json.dumps(sch["const"])
    if "enum" in sch:
        return " | ".join(json.dumps(v) for v in sch["enum"])
    if sch.get("type") == "null":
        return "null"
    if sch.get("type") == "array":
        if "prefixItems" in sch:
            return "[" + ", ".join(_ts_type(s) for s in sch["prefixItems"]) + "]"
        item = _ts_type(sch["items"]) if "items" in sch else "any"
        return f"({item})[]" if " " in item else f"{item}[]"
    if sch.get("type") == "object" and "properties" in sch:
        required = set(sch.get("required", []))
        fields = [f"{k}{'' if k in required else '?'}: {_ts_type(v)};" for k, v in sch["properties"].items()]
        return "{ " + " ".join(fields) + " }"
    return _TS.get(sch.get("type", ""), "any")


def _ts_interface(name: str, kind: str, spec: _Spec) -> str:
    fields = [f'type: "{kind}";'] if kind else []
    fields += [f"{f.name}{'' if f.required else '?'}: {_ts_type(f.schema)};" for f in spec.fields]
    return f"export interface {name} {{ {' '.join(fields)} }}"


def _ts_step() -> list[str]:
    """The wire form of a step (turn_codec.step_dict): every field that leaves the kernel, typed."""
    hints = typing.get_type_hints(Step)
    lines = []
    for name, role in field_roles().items():
        if role.delivery is Delivery.KERNEL or not role.saved:
            continue
        hint = hints[name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        base = args[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) else hint
        if isinstance(base, type) and issubclass(base, Enum):
            ts = " | ".join(f'"{m.value}"' for m in base)
        elif base in (str,):
            ts = "string"
        elif base in (int, float):
            ts = "number"
        elif typing.get_origin(base) is list:
            ts = "any[]"
        else:
            ts = "any"
        required = role.keep_empty and role.delivery is not Delivery.TEXT  # a bare step's text went as deltas
        lines.append(f"  {name}{'' if required else '?'}: {ts};  // {role.delivery.value}{', shown' if role.shown else ''}")
    lines.append("  kind: " + " | ".join(f'"{k.value}"' for k in StepKind) + ";  // Step.kind")
    lines.append("  n?: [number, number];  // a bare step: the lengths of its content and thinking")
    return lines


def typescript() -> str:
    """The same declaration as TypeScript types (js/src/protocol.d.ts), for ``tsc --checkJs``."""
    out = ["// Generated by `python -m nbagent.notebook.protocol` from nbagent/notebook/protocol.py and the Step",
           "// fields' roles (nbagent/core/steps.py); do not edit. The JS front end's JSDoc imports these types.", ""]
    for proto, prefix in ((CHAT, "Chat"), (BROWSER, "Browser"), (CLASS, "Class")):
        names: dict[str, list[str]] = {}
        for table, what in ((proto.requests, "Request"), (proto.events, "Event")):
            for kind, spec in sorted(table.items()):
                name = f"{prefix}{what}_{kind}"
                names.setdefault(what, []).append(name)
                out.append(_ts_interface(name, kind, spec))
            if names.get(what):
                out.append(f"export type {prefix}{what} = {' | '.join(names[what])};")
        for spec in proto.answers.values():
            out.append(_ts_interface(f"{prefix}Answer_{spec.cls.__name__}", "", spec))
        out.append("")
    if BROWSER.reply:
        out.append('export interface BrowserReply { type: "reply"; id: string; ok: boolean; error?: string; [field: string]: any }')
    out += ["", "/** A step as the widget gets it (turn_codec.step_dict). */", "export interface WireStep {", *_ts_step(), "}", ""]
    return "\n".join(out)


def module() -> str:
    """The data the front end imports (js/src/protocol_data.js): ``PATCH_RULES`` and each chat event's fields
    (a view drops an event with a field it does not know, as the schema does)."""
    fields = {k: sorted(["type", *(f.name for f in s.fields)]) for k, s in sorted(CHAT.events.items())}
    return ("// Generated by `python -m nbagent.notebook.protocol` from nbagent/notebook/protocol.py; do not edit.\n"
            "/** What a view fills in of a live turn that its patches leave out (protocol.py PatchRules). */\n"
            f"export const PATCH_RULES = {json.dumps(rules_data(), indent=1, sort_keys=True)};\n"
            "/** The fields each chat event may carry. @type {Record<string, string[]>} */\n"
            f"export const CHAT_EVENT_FIELDS = {json.dumps(fields, indent=1, sort_keys=True)};\n")


TS_PATH = SCHEMA_PATH.with_name("protocol.d.ts")
MODULE_PATH = SCHEMA_PATH.with_name("protocol_data.js")

if __name__ == "__main__":  # write js/src/protocol.json, js/src/protocol.d.ts and js/src/protocol_data.js
    SCHEMA_PATH.write_text(schema_text(), encoding="utf-8")
    TS_PATH.write_text(typescript(), encoding="utf-8")
    MODULE_PATH.write_text(module(), encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}, {TS_PATH} and {MODULE_PATH}")
