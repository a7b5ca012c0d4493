"""Steps, stream chunks and usage: the values a conversation is made of.

A *step* is one logical event of a turn (the user's prompt, one model call's
answer, one tool execution, a compaction, the turn's end). It is streamed as a
sequence of updates that share a ``step_index``; each update carries the full
accumulated ``content`` / ``thinking`` and the newest ``content_delta`` /
``thinking_delta``.

Conventions used by nbagent's own connections:

- the user's prompt: TEXT_RESPONSE, USER -> UNSPECIFIED;
- a model call: TEXT_RESPONSE (or TOOL_CALL when it asked for tools),
  MODEL -> USER, carrying thinking, text, the complete tool calls and the
  call's usage; a refusal (OpenAI's ``refusal`` field) goes to ``refusal``,
  not ``content``; a tool call cut by the token limit is kept in
  ``cut_tool_calls`` (never run, never replayed);
- a tool execution: TOOL_CALL, SYSTEM -> ENVIRONMENT, ``tool_calls=[call]``,
  ``content`` the result shown to the model, WAITING_FOR_USER while it waits
  for approval or a manual result;
- COMPACTION: SYSTEM -> ENVIRONMENT, ``compaction`` has the token counts;
- FINISH: SYSTEM -> USER, ``finish_reason`` says why the turn ended, and
  ``content`` a short explanation when there is one (a prompt the provider
  blocked, a reply cut at the token limit); no usage of its own.

What crosses layers travels in typed fields: ``finish_reason``
(:class:`FinishReason`), ``model``, ``approval`` (:class:`ApprovalDecision`),
``run_seconds``, ``preparing_tool``, ``compaction`` (:class:`CompactionStats`),
``refusal``, ``notice`` (a provider's retry), ``cut_tool_calls`` (:class:`CutToolCall`), ``preview``
(:class:`CellPreview`: a notebook cell tool's diff, shown before Approve), ``changes``
(:class:`VariableChange`: what code the agent ran did to the namespace), and ``raw_usage`` --
the provider's own usage object, kept for analysis (saved with the session,
never sent to the widget).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass, field
from enum import Enum
from functools import partial
from typing import Any

from .usage import UsageMetadata


class StepType(str, Enum):
    """What a step is: an answer, tool calls, a system message, a compaction, the turn's end."""

    TEXT_RESPONSE = "TEXT_RESPONSE"
    TOOL_CALL = "TOOL_CALL"
    SYSTEM_MESSAGE = "SYSTEM_MESSAGE"
    COMPACTION = "COMPACTION"
    FINISH = "FINISH"
    UNKNOWN = "UNKNOWN"


class StepSource(str, Enum):
    """Who produced a step: the system, the user or the model."""

    SYSTEM = "SYSTEM"
    USER = "USER"
    MODEL = "MODEL"
    UNKNOWN = "UNKNOWN"


class StepTarget(str, Enum):
    """Whom a step is for: the user (an answer) or the environment (tool calls to run)."""

    USER = "USER"
    ENVIRONMENT = "ENVIRONMENT"
    UNSPECIFIED = "UNSPECIFIED"
    UNKNOWN = "UNKNOWN"


class StepStatus(str, Enum):
    """Where a step is: running, done, waiting for the user (an approval), failed or cancelled."""

    ACTIVE = "ACTIVE"
    DONE = "DONE"
    WAITING_FOR_USER = "WAITING_FOR_USER"
    ERROR = "ERROR"
    CANCELED = "CANCELED"
    TERMINAL_ERROR = "TERMINAL_ERROR"
    UNKNOWN = "UNKNOWN"


class FinishReason(str, Enum):
    """Why a model call, or the turn, ended: its answer was done, the length limit, tool calls, a filter..."""

    STOP = "STOP"
    LENGTH = "LENGTH"
    TOOL_CALLS = "TOOL_CALLS"
    CONTENT_FILTER = "CONTENT_FILTER"
    INTERRUPTED = "INTERRUPTED"
    ERROR = "ERROR"
    OTHER = "OTHER"


class ApprovalDecision(str, Enum):
    """How a tool call was let through (or not): the ``approval`` of its execution step."""

    AUTO = "auto"  # the policy runs every call
    APPROVED = "approved"  # a person approved it
    DENIED = "denied"  # a person denied it
    POLICY_ALLOWED = "policy_allowed"  # a policy function allowed it
    POLICY_DENIED = "policy_denied"  # deny_all, or a policy function refused it
    MANUAL = "manual"  # the caller supplies the result (auto_execute_tools=False)
    PENDING = "pending"  # waiting for approve() / deny()
    BLOCKED = "blocked"  # a pre_tool_use hook blocked it
    CANCELED = "canceled"  # the turn was interrupted before a decision


class PrefixChange(str, Enum):
    """What changed in a request's prefix since the previous model call: why a prompt cache missed."""

    SYSTEM = "system"  # the system prompt changed
    TOOLS = "tools"  # the tool list or a tool's schema changed
    HISTORY = "history"  # earlier messages were edited, cleared or trimmed
    COMPACTION = "compaction"  # a compaction rewrote the history
    MODEL = "model"  # another model answers (caches are per model)


class TurnStatus(str, Enum):
    """Where a turn stands: the ``status`` of its ledger record."""

    RUNNING = "running"
    DONE = "done"
    WAITING = "waiting"  # stopped for a tool result or an approval
    ERROR = "error"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class CompactionStats:
    """What a compaction did to the wire history (approximate tokens)."""

    tokens_before: int
    tokens_after: int
    budget: int

    @property
    def removed(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_dict(self) -> dict:
        return {"tokens_before": self.tokens_before, "tokens_after": self.tokens_after, "budget": self.budget}


@dataclass
class ToolCall:
    """A tool call the model asked for; ``args`` is the parsed JSON object."""

    id: str = ""
    name: str = ""
    args: dict = field(default_factory=dict)
    canonical_path: str | None = None

    def to_dict(self) -> dict:
        """The call as JSON values (as saved files hold it)."""
        return {
            "id": self.id,
            "name": self.name,
            "args": self.args,
            "canonical_path": self.canonical_path,
        }

    @classmethod
    def from_dict(cls, d: dict) -> ToolCall:
        """A call from ``to_dict()``'s values."""
        return cls(d.get("id", ""), d.get("name", ""), d.get("args") or {}, d.get("canonical_path"))


class ChangeKind(str, Enum):
    """What running code did to one variable of the namespace."""

    CREATED = "created"
    CHANGED = "changed"  # rebound, or its type, shape or length differs
    DELETED = "deleted"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class VariableChange:
    """One variable that code the agent ran created, changed or deleted (``Step.changes``): its
    name, type and size (``"7 rows × 3 columns"``, ``"length 4"``; "" when it has none)."""

    name: str
    change: ChangeKind
    type: str = ""
    size: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "change": self.change.value, "type": self.type, "size": self.size}

    @classmethod
    def from_dict(cls, d: dict) -> VariableChange:
        return cls(str(d.get("name", "")), ChangeKind(d.get("change", "changed")), str(d.get("type", "")),
                   str(d.get("size", "")))


def changes_line(found: Any) -> str:
    """Variable changes as one line: ``created by_month (Series, 4 rows); deleted tmp (int)``."""
    parts: dict[str, list[str]] = {}
    for c in found:
        what = f"{c.name} ({c.type}{', ' + c.size if c.size else ''})" if c.type else c.name
        parts.setdefault(c.change.value, []).append(what)
    return "; ".join(f"{kind} {', '.join(names)}" for kind, names in parts.items())


@dataclass(frozen=True)
class CutToolCall:
    """A tool call the model was still writing when the token limit cut its reply.

    ``arguments`` is the partial JSON text received; the call was not run.
    """

    id: str = ""
    name: str = ""
    arguments: str = ""

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, d: dict) -> CutToolCall:
        return cls(str(d.get("id") or ""), str(d.get("name") or ""), str(d.get("arguments") or ""))


def cut_note(calls: list[CutToolCall]) -> str:
    """What a FINISH step says when the token limit cut the model while it wrote ``calls``."""
    names = ", ".join(c.name or "a tool" for c in calls)
    return f"The reply was cut at the token limit while the model was writing a call to {names}; nothing was run."


PREVIEW_MAX_CHARS = 20_000  # each source a CellPreview keeps, at most (the rest is cut, ``cut`` set)
PREVIEW_MAX_LINES = 2_000  # diff lines a CellPreview keeps, at most


@dataclass(frozen=True)
class CellPreview:
    """What a notebook cell tool (``edit_cell``, ``insert_cell``, ``run_cell``) will do, computed
    before the call waits for Approve so its card can show the diff: the cell, its source before
    and after, and the line diff between them (``(" " | "-" | "+", line)`` pairs, old to new)."""

    action: str  # "edit" | "insert" ("insert markdown" / "insert raw" for such a new cell) | "run"
    cell_id: str = ""  # the cell edited or run; an insert: the cell it goes after ("" at the end)
    position: int = 0  # 1-based, as the user counts cells: the cell's, or the new cell's place
    old_source: str = ""  # the cell's source now ("" for an insert)
    new_source: str = ""  # the source after the call (run: the source that will run)
    diff: tuple[tuple[str, str], ...] = ()
    notebook: str = ""  # where the cell lives: "live", "file: <path>", "history"
    problem: str = ""  # non-empty: the call will be refused if approved, and why (a stale cell, ...)
    cut: bool = False  # a source or the diff was longer than the card keeps

    @property
    def added(self) -> int:
        return sum(1 for op, _ in self.diff if op == "+")

    @property
    def removed(self) -> int:
        return sum(1 for op, _ in self.diff if op == "-")

    def to_dict(self) -> dict:
        return {"action": self.action, "cell_id": self.cell_id, "position": self.position,
                "old_source": self.old_source, "new_source": self.new_source,
                "diff": [list(d) for d in self.diff], "added": self.added, "removed": self.removed,
                "notebook": self.notebook, "problem": self.problem, "cut": self.cut}

    @classmethod
    def from_dict(cls, d: dict) -> CellPreview:
        if not isinstance(d, dict):
            raise TypeError(f"step field 'preview' must be an object, got {type(d).__name__}")
        diff = tuple((str(op), str(line)) for op, line in d.get("diff") or ())
        return cls(str(d.get("action") or ""), str(d.get("cell_id") or ""), int(d.get("position") or 0),
                   str(d.get("old_source") or ""), str(d.get("new_source") or ""), diff,
                   str(d.get("notebook") or ""), str(d.get("problem") or ""), bool(d.get("cut")))


class StepKind(str, Enum):
    """What a step is to its reader, from the conventions above (``Step.kind``)."""

    PROMPT = "prompt"  # the user's prompt
    MODEL_CALL = "model_call"  # one model call's answer
    TOOL_RUN = "tool_run"  # one tool execution
    COMPACTION = "compaction"
    FINISH = "finish"
    OTHER = "other"  # a system message, or a step of unknown shape


class Delivery(str, Enum):
    """How a Step field reaches the live widget (notebook/turn_codec.py); not a provider's wire format."""

    STRUCTURAL = "structural"  # sent with the turn's structure, and a change re-sends it
    TEXT = "text"  # sent as deltas (content, thinking)
    CARRIED = "carried"  # sent with the structure; a change alone does not re-send it
    KERNEL = "kernel"  # never sent to the widget


@dataclass(frozen=True)
class FieldRole:
    """What a Step field is to each of its views, declared on the field (``Step`` and ``field_roles``).

    ``saved``: in session files and ``to_dict``; ``shown``: the live widget draws it (a contract test
    checks each such field reaches its DOM); ``transcript``: the transcripts drawn without the widget
    (the saved output, ``to_markdown``, ``to_html``) show it, declared for every shown field (a contract
    test checks each such field changes the transcript); ``keep_empty``: the widget's compact dict keeps
    it at its default; ``shape``: for a structural field, what of its value counts as a change (default:
    the value).
    """

    delivery: Delivery
    saved: bool = True
    shown: bool = False
    keep_empty: bool = False
    shape: Any = None  # Callable[[value], Hashable] | None
    transcript: bool | None = None  # None: not declared (only fields the widget does not show)


def _present(value: Any) -> bool:
    return value is not None


def _field(default: Any, delivery: Delivery, *, saved: bool = True, shown: bool = False, keep_empty: bool = False,
           shape: Any = None, transcript: bool | None = None) -> Any:
    """A Step field with its roles; ``default`` may be a factory (``list``, ``time.time``)."""
    role = {FieldRole: FieldRole(delivery, saved, shown, keep_empty, shape, transcript)}  # keyed by the class
    if callable(default):
        return field(default_factory=default, metadata=role)
    return field(default=default, metadata=role)


@dataclass
class Step:
    """One logical event of a turn; see the module docstring for conventions."""

    # each field declares its roles (FieldRole): how it reaches the live widget, whether it is saved and
    # whether the widget draws it; the widget's, fingerprint and saved forms are made from these (see FieldRole)
    id: str = _field("", Delivery.CARRIED)
    step_index: int = _field(0, Delivery.CARRIED, keep_empty=True)  # the step's identity in its turn
    type: StepType = _field(StepType.UNKNOWN, Delivery.STRUCTURAL, shown=True, transcript=True, keep_empty=True)
    source: StepSource = _field(StepSource.UNKNOWN, Delivery.STRUCTURAL, shown=True, transcript=True, keep_empty=True)
    target: StepTarget = _field(StepTarget.UNKNOWN, Delivery.STRUCTURAL, shown=True, transcript=True, keep_empty=True)
    status: StepStatus = _field(StepStatus.ACTIVE, Delivery.STRUCTURAL, shown=True, transcript=True, keep_empty=True)
    content: str = _field("", Delivery.TEXT, shown=True, transcript=True, keep_empty=True)
    content_delta: str = _field("", Delivery.KERNEL, saved=False)  # transient
    thinking: str = _field("", Delivery.TEXT, shown=True, transcript=True)
    thinking_delta: str = _field("", Delivery.KERNEL, saved=False)  # transient
    tool_calls: list[ToolCall] = _field(list, Delivery.STRUCTURAL, shown=True, transcript=True, shape=len)
    error: str = _field("", Delivery.STRUCTURAL, shown=True, transcript=True)
    is_complete_response: bool | None = _field(None, Delivery.KERNEL, saved=False)  # derived (see ``derive``)
    structured_output: Any = _field(None, Delivery.CARRIED)
    usage_metadata: UsageMetadata | None = _field(None, Delivery.STRUCTURAL, shown=True, transcript=False, shape=_present)
    cascade_id: str = _field("", Delivery.KERNEL, saved=False)  # the conversation's id (see ``derive``)
    trajectory_id: str = _field("", Delivery.KERNEL, saved=False)  # named by the public API; nbagent leaves it empty
    http_code: int = _field(0, Delivery.STRUCTURAL, shown=True, transcript=False)
    # nbagent additions
    created_at: float = _field(time.time, Delivery.CARRIED)
    finished_at: float | None = _field(None, Delivery.STRUCTURAL, shown=True, transcript=False, shape=_present)
    turn: int = _field(-1, Delivery.CARRIED)
    finish_reason: FinishReason | None = _field(None, Delivery.STRUCTURAL)  # a model call's or the turn's (FINISH) end
    model: str = _field("", Delivery.CARRIED)  # the model that answered (model steps)
    # tool execution steps
    approval: ApprovalDecision | None = _field(None, Delivery.STRUCTURAL, shown=True, transcript=True)
    # how long the tool ran (approval wait excluded)
    run_seconds: float | None = _field(None, Delivery.STRUCTURAL, shown=True, transcript=False)
    preparing_tool: str = _field("", Delivery.STRUCTURAL)  # a tool call the model is still writing
    # COMPACTION steps
    compaction: CompactionStats | None = _field(None, Delivery.STRUCTURAL, shown=True, transcript=False, shape=_present)
    raw_usage: dict | None = _field(None, Delivery.KERNEL)  # the provider's own usage object (analysis only)
    # the model declined: its refusal text (not in content)
    refusal: str = _field("", Delivery.STRUCTURAL, shown=True, transcript=True)
    cut_tool_calls: list[CutToolCall] = _field(list, Delivery.CARRIED)  # cut by the token limit
    # tool runs: what the user sees
    display: dict | None = _field(None, Delivery.STRUCTURAL, shown=True, transcript=False, shape=_present)
    prefix_change: PrefixChange | None = _field(None, Delivery.CARRIED)  # model steps: what changed in the request prefix
    decided_at: float | None = _field(None, Delivery.CARRIED)  # tool execution steps: when the approval decision was made
    decided_by: str = _field("", Delivery.CARRIED)  # tool execution steps: who or what decided ("user", "policy deny_all", ...)
    # tool execution steps: the MCP server ("": a local tool)
    tool_server: str = _field("", Delivery.STRUCTURAL, shown=True, transcript=True)
    # model steps: the provider's latest retry or wait ("… retrying in 1 s")
    notice: str = _field("", Delivery.STRUCTURAL, shown=True, transcript=False)
    # cell tools: the diff before Approve
    preview: CellPreview | None = _field(None, Delivery.STRUCTURAL, shown=True, transcript=True, shape=_present)
    # code runs: the variables it changed
    changes: list[VariableChange] = _field(list, Delivery.STRUCTURAL, shown=True, transcript=True, shape=len)
    # another agent's log read (agent_logs): a subagent's step (a Claude Code sidechain, a Codex subagent)
    subagent: bool = _field(False, Delivery.KERNEL, saved=False)

    def __post_init__(self) -> None:
        # a script may write the enums' values ("STOP", "approved"): keep the fields typed
        if self.finish_reason is not None and not isinstance(self.finish_reason, FinishReason):
            self.finish_reason = FinishReason(self.finish_reason)
        if self.approval is not None and not isinstance(self.approval, ApprovalDecision):
            self.approval = ApprovalDecision(self.approval)
        if self.prefix_change is not None and not isinstance(self.prefix_change, PrefixChange):
            self.prefix_change = PrefixChange(self.prefix_change)

    @property
    def kind(self) -> StepKind:
        """What this step is: a prompt, a model call, a tool run, a compaction or the turn's finish."""
        if self.type == StepType.FINISH:
            return StepKind.FINISH
        if self.type == StepType.COMPACTION:
            return StepKind.COMPACTION
        if self.type == StepType.TOOL_CALL and self.target == StepTarget.ENVIRONMENT:
            return StepKind.TOOL_RUN
        if self.source == StepSource.MODEL:
            return StepKind.MODEL_CALL
        if self.source == StepSource.USER:
            return StepKind.PROMPT
        return StepKind.OTHER

    @property
    def is_tool_run(self) -> bool:
        """One tool execution (its ``tool_calls`` hold the call it ran)."""
        return self.type == StepType.TOOL_CALL and self.target == StepTarget.ENVIRONMENT

    @property
    def is_model_call(self) -> bool:
        """Whether the step is a model call (an answer, thoughts or tool calls)."""
        return self.kind == StepKind.MODEL_CALL

    @property
    def duration(self) -> float | None:
        """Seconds from creation to finish, once finished."""
        if self.finished_at is None:
            return None
        return self.finished_at - self.created_at

    @property
    def tool_seconds(self) -> float | None:
        """How long a tool ran: ``run_seconds`` when measured, else ``duration``."""
        return self.duration if self.run_seconds is None else self.run_seconds

    def derive(self, conversation_id: str) -> None:
        """Set the fields that follow from the step and its conversation (session files keep
        neither): ``cascade_id`` is the conversation's id; ``is_complete_response`` says whether a
        finished model call answered without asking for a tool (None for other steps)."""
        self.cascade_id = conversation_id
        done = self.status == StepStatus.DONE and self.source == StepSource.MODEL and self.type != StepType.FINISH
        self.is_complete_response = not self.tool_calls if done else None

    def copy(self, **changes: Any) -> Step:
        """A copy of the step with ``changes`` (``step.copy(content="...")``)."""
        return dataclasses.replace(self, **changes)

    def snapshot(self, content_delta: str = "", thinking_delta: str = "") -> Step:
        """A shallow copy carrying these deltas: what a connection emits as one update."""
        snap = copy.copy(self)
        snap.content_delta = content_delta
        snap.thinking_delta = thinking_delta
        return snap

    def to_dict(self, *, compact: bool = False) -> dict:
        """A JSON-ready dict (deltas dropped: they are transient).

        ``compact`` leaves out fields that hold their default (``from_dict`` restores them):
        session files use it (a typical step takes a third to a half of the bytes).
        """
        if compact:
            return self._compact_dict()
        return {name: _json_value(getattr(self, name)) for name in _SAVED_FIELDS}

    def _compact_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items()
             if (v or (v is not None and k not in _EMPTY_DEFAULTS)) and k in _SAVED}  # deltas never
        d["type"], d["source"], d["target"] = self.type._value_, self.source._value_, self.target._value_
        d["status"] = self.status._value_
        for key in _COMPACT_CONVERTED.intersection(d):
            if key in _COMPACT_ENUMS:
                d[key] = d[key]._value_
            elif key == "usage_metadata" and self.usage_metadata is not None:
                d[key] = self.usage_metadata.to_dict(compact=True)
            elif key == "compaction" and self.compaction is not None:
                d[key] = self.compaction.to_dict()
            elif key == "preview" and self.preview is not None:
                d[key] = self.preview.to_dict()
            else:  # tool_calls, cut_tool_calls, changes
                d[key] = [c.to_dict() for c in d[key]]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Step:
        """The inverse of ``to_dict``; raises TypeError / ValueError / KeyError on bad input.

        Also reads ``cascade_id``, ``trajectory_id`` and ``is_complete_response``, which session
        files before format 3 stored per step."""
        if not isinstance(d, dict):
            raise TypeError(f"a step must be an object, got {type(d).__name__}")
        step = object.__new__(cls)  # every field read and typed here: __init__ would only repeat it
        values = step.__dict__
        values.update(_FIELD_DEFAULTS)  # an absent key keeps the field's default; created_at is 0.0, not "now"
        for key, value in d.items():
            read = _READERS.get(key)
            if read is not None:
                values[key] = read(value)
        for name, make in _FIELD_FACTORIES:
            if name not in d:
                values[name] = make()
        return step


def field_roles() -> dict[str, FieldRole]:
    """Every Step field's declared roles, by name, in field order."""
    return _ROLES


_ROLES = {f.name: f.metadata[FieldRole] for f in dataclasses.fields(Step)}


def enum_member(enum_cls: type[Enum], value: Any) -> Any:
    """``enum_cls(value)`` by a dict lookup (readers call it per record); the same ValueError when unknown."""
    try:
        return _MEMBERS[enum_cls][value]  # type: ignore[index]  # enum_cls may be any Enum: KeyError
    except (KeyError, TypeError):  # unknown, unhashable, or an enum defined elsewhere
        return enum_cls(value)


def _optional(read):
    return lambda value: None if value is None else read(value)


def _text_reader(key: str):
    def read(value: Any) -> str:
        if type(value) is str:
            return value
        if not value:
            return ""
        if not isinstance(value, str):
            raise TypeError(f"step field {key!r} must be text, got {type(value).__name__}")
        return value
    return read


def _same(value: Any) -> Any:
    return value


_MEMBERS = {cls: {m.value: m for m in cls} for cls in (StepType, StepSource, StepTarget, StepStatus, FinishReason,
                                                     ApprovalDecision, PrefixChange, TurnStatus)}
_READERS: dict[str, Any] = {
    **{k: _text_reader(k) for k in ("id", "content", "thinking", "error", "cascade_id", "trajectory_id", "model",
                                    "preparing_tool", "decided_by", "tool_server", "notice")},
    "step_index": int,
    "type": partial(enum_member, StepType),
    "source": partial(enum_member, StepSource),
    "target": partial(enum_member, StepTarget),
    "status": partial(enum_member, StepStatus),
    "tool_calls": lambda v: [ToolCall.from_dict(c) for c in v],
    "is_complete_response": _same,
    "structured_output": _same,
    "usage_metadata": UsageMetadata.from_dict,
    "http_code": lambda v: int(v or 0),
    "created_at": lambda v: float(v or 0.0),
    "finished_at": _optional(float),
    "turn": int,
    "finish_reason": _optional(partial(enum_member, FinishReason)),
    "approval": _optional(partial(enum_member, ApprovalDecision)),
    "run_seconds": _optional(float),
    "compaction": _optional(lambda v: CompactionStats(**v)),
    "raw_usage": _same,
    "refusal": lambda v: str(v or ""),
    "cut_tool_calls": lambda v: [CutToolCall.from_dict(c) for c in v or []],
    "display": lambda v: _display(v),
    "prefix_change": _optional(partial(enum_member, PrefixChange)),
    "decided_at": _optional(float),
    "preview": _optional(CellPreview.from_dict),
    "changes": lambda v: [VariableChange.from_dict(c) for c in v or []],
}
_FIELD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Step) if f.default is not dataclasses.MISSING}
_FIELD_DEFAULTS["created_at"] = 0.0
_FIELD_FACTORIES = tuple((f.name, f.default_factory) for f in dataclasses.fields(Step)
                         if f.default_factory is not dataclasses.MISSING and f.name not in _FIELD_DEFAULTS)
# what compact to_dict leaves out besides None: the fields whose default is their type's empty value
_EMPTY_DEFAULTS = frozenset(f.name for f in dataclasses.fields(Step) if f.name in _READERS and (
    f.default in ("", 0) or f.default_factory is list) and f.name != "created_at")
_COMPACT_ENUMS = frozenset(("finish_reason", "approval", "prefix_change"))
# not saved (declared on the fields): the deltas are transient, the rest derived from the conversation
# (``Step.derive``) or unused
_UNSAVED = frozenset(f.name for f in dataclasses.fields(Step) if f.name in _READERS and not field_roles()[f.name].saved)
_SAVED = frozenset(f.name for f in dataclasses.fields(Step) if field_roles()[f.name].saved)
if not _SAVED <= set(_READERS):  # every saved field is read back
    raise AssertionError(f"saved Step fields without a reader: {sorted(_SAVED - set(_READERS))}")
_SAVED_FIELDS = tuple(f.name for f in dataclasses.fields(Step) if f.name in _SAVED)


def _json_value(value: Any) -> Any:
    """A Step field's value as JSON: enums by value, nested records by their ``to_dict``."""
    if isinstance(value, Enum):
        return value._value_
    if isinstance(value, (UsageMetadata, CompactionStats, CellPreview)):
        return value.to_dict()
    if isinstance(value, list) and value and isinstance(value[0], (ToolCall, CutToolCall, VariableChange)):
        return [c.to_dict() for c in value]
    return value
_COMPACT_CONVERTED = _COMPACT_ENUMS | {"usage_metadata", "compaction", "tool_calls", "cut_tool_calls", "preview",
                                       "changes"}


def _display(value: Any) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError("step field 'display' must map mime types to text")
    return dict(value)


@dataclass(frozen=True)
class Thought:
    """A fragment of the model's reasoning."""

    step_index: int
    text: str


@dataclass(frozen=True)
class Text:
    """A fragment of the model's answer to the user."""

    step_index: int
    text: str


@dataclass
class ChatResponse:
    """The result of a whole turn."""

    text: str = ""
    thinking: str = ""
    steps: list[Step] = field(default_factory=list)
    usage_metadata: UsageMetadata = field(default_factory=UsageMetadata)
    finish_reason: FinishReason = FinishReason.STOP
    structured_output: Any = None

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls the model made in the turn, in order."""
        return [c for s in self.steps if s.source == StepSource.MODEL for c in s.tool_calls]

    @property
    def refusal(self) -> str:
        """The model's refusal text when it declined, or the provider's notice when it blocked the
        prompt itself (``finish_reason`` CONTENT_FILTER; ``text`` then stays empty)."""
        return "\n\n".join(s.refusal for s in self.steps
                            if s.refusal and (s.source == StepSource.MODEL or s.type == StepType.FINISH))

    def __str__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        """The answer as Jupyter shows it: the model's markdown with raw HTML as text, only safe
        links, and math and dollars written the way the widget shows them."""
        from .safe_markdown import prose

        return prose(self.text)
