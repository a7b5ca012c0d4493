"""The turn codec: how the ChatWidget's turns reach its views, with no comm, lock or timer.

Conversation events in (``TurnCodec.take_event``), protocol payloads out (``TurnCodec.flush``):
compact step dicts, records with the footer's figures, and a per-turn buffer that remembers what
the views already have (its text goes as deltas; its structure without the text, see
``TurnBuffer.bare_dict``; while it runs, only what changed in that structure, see
``TurnBuffer.patch``). js/src/reducer.js is the decoder; tests/test_turn_codec_pair.py runs both."""

from __future__ import annotations

import json
import dataclasses
from typing import Any, Literal
from collections.abc import Mapping

from ..core.conversation_state import ConversationEvent
from ..core.ledger import TurnRecord
from ..core.steps import Delivery, Step, StepSource, TurnStatus, field_roles
from ..providers.recordings import is_recording_path, replay_label
from .protocol import PATCH_RULES, DeltaItem, NewStep, Patch, TurnEnded, TurnsPage

# made from the fields' declared roles (core/steps.py): what the compact dict keeps at its default,
# what stays in the kernel, and the structural fields with what of each counts as a change
_KEEP_EMPTY = frozenset(n for n, r in field_roles().items() if r.keep_empty)
_NOT_SHOWN = frozenset(n for n, r in field_roles().items() if r.delivery is Delivery.KERNEL)  # raw usage stays in the kernel
_TIMES = ("created_at", "finished_at", "decided_at")
_STRUCTURAL = tuple((n, r.shape) for n, r in field_roles().items() if r.delivery is Delivery.STRUCTURAL)


def step_dict(step: Step) -> dict:
    """A compact JSON-ready dict of a step: empty / default fields, zero token counts and raw usage
    left out, its ``kind`` (prompt, model_call, tool_run, compaction, finish) added."""
    d = step.to_dict()
    out = {k: v for k, v in d.items()
           if k not in _NOT_SHOWN and (k in _KEEP_EMPTY or v not in (None, "", [], {}, 0, -1))}
    if step.usage_metadata is not None:
        out["usage_metadata"] = step.usage_metadata.to_dict(compact=True)
    for name in _TIMES:  # to the millisecond: what a card's duration shows
        if out.get(name) is not None:
            out[name] = round(out[name], 3)
    out["kind"] = step.kind.value
    return out


def record_dict(rec: TurnRecord, pricing: Mapping | None = None) -> dict:
    """A turn record with the derived figures the footer shows (cost when known)."""
    d = rec.to_dict()
    if rec.provider == "replay" and is_recording_path(rec.model):  # the recording's path, until its answer names the model
        d["model"] = "" if rec.status == TurnStatus.RUNNING else replay_label(rec.model)
    d["usage"] = rec.usage.to_dict(compact=True)  # a missing count is 0
    d.update(duration=_rounded(rec.duration, 4), ttft=_rounded(rec.time_to_first_token, 4),
             tps=_rounded(rec.output_tokens_per_s, 1))
    try:
        from ..analysis.estimate import turn_cost

        cost = turn_cost(rec, pricing)
        d["cost"] = None if cost != cost else cost  # NaN: unknown price
    except Exception:  # an odd model name or a broken price override: no cost shown
        d["cost"] = None
    return d


def _rounded(value: float | None, digits: int) -> float | None:
    """A figure the footer shows, to the precision it shows (0.1 ms, 0.1 token/s): fewer bytes."""
    return None if value is None else round(value, digits)


def utf16_len(text: str) -> int:
    """The length of ``text`` in a JavaScript string (UTF-16 units): offsets and lengths on the wire
    count these, so a view's ``string.length`` agrees with them beyond the BMP (emoji)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class TurnBuffer:
    """One turn as the widget knows it: latest step updates and what the views have of them."""

    __slots__ = ("record", "steps", "sent", "shape", "cache", "bare_cache", "shown_record", "shown_steps")

    def __init__(self, record: TurnRecord | None):
        self.record = record
        self.steps: dict[int, Step] = {}  # step_index -> latest update
        # (step_index, field) -> what the views have: its text and that text's length in UTF-16 units
        self.sent: dict[tuple[int, str], tuple[str, int]] = {}
        self.shape: dict[int, tuple] = {}  # step_index -> last structural fingerprint
        self.cache: dict | None = None
        self.bare_cache: dict | None = None
        # the bare structure the views have from patches (``patch``): its record and steps by index
        self.shown_record: dict | None = None
        self.shown_steps: dict[int, dict] = {}

    def to_dict(self, pricing: Mapping | None = None) -> dict:
        """The turn with its steps' text (a resync: the view has none of it)."""
        if self.cache is None:
            rec = record_dict(self.record, pricing) if self.record is not None else None
            steps = [step_dict(s) for s in sorted(self.steps.values(), key=lambda s: s.step_index)]
            self.cache = jsonable({"record": rec, "steps": steps})
            self.bare_cache = None
        return self.cache

    def bare_dict(self, pricing: Mapping | None = None) -> dict:
        """The turn without its steps' text, which went out as deltas: each step's ``content`` and
        ``thinking`` are replaced by ``n``: [their lengths in UTF-16 units] (none when both are 0), so a view
        can tell it misses some; its id and turn are left out too (the view reads neither)."""
        full = self.to_dict(pricing)
        if self.bare_cache is None:
            steps = [{**{k: v for k, v in s.items() if k not in _NOT_BARE}, **_lengths(s)} for s in full["steps"]]
            self.bare_cache = {"record": bare_record(full["record"], steps), "steps": steps}
        return self.bare_cache

    def patch(self, turn: int, pricing: Mapping | None = None, ended: bool = False,
              covered: frozenset[int] = frozenset(), before: dict | None = None) -> Patch | None:
        """What changed in the live turn (``live_step`` of each bare step) since the last patch (the
        first: all of it), or None: ``{"turn", "record"?, "steps"?, "ended"?}``, the record's changed
        fields and, for each step that appeared or changed, its ``step_index`` with its changed fields
        (a new step whole but for what a view derives, ``derived_fields`` and ``USUAL_SHAPES``, as
        ``[step_index, kind]`` when that is all it says; a field gone is null). A step's lengths ``n``
        go once it is no longer active or the turn ended (mid-turn the deltas' offsets tell a view
        what it misses), unless the same message carries its text up
        to its end (the steps in ``covered``: a view then has it all or sees the gap in the offsets),
        so a mid-turn patch is a few fields, not the turn. The first record patch sends what differs
        from ``new_record`` (``before``: the record of the turn before, as the views have it); the
        record's ``FOOTER_ONLY`` figures wait for the ended patch, which sends what differs from
        ``ended_record`` and ``ended_step`` of what the views have."""
        bare = self.bare_dict(pricing)
        rec = bare["record"]
        shown = self.shown_record or new_record(turn, before)
        if ended:
            shown = ended_record(shown)
            self.shown_steps = {i: ended_step(s) for i, s in self.shown_steps.items()}
        if rec is None:
            record = None
        elif ended:
            record = changed_fields(shown, rec)
            self.shown_record = rec
        else:  # the footer's figures wait for the turn's end (the footer shows once it ended)
            record = changed_fields(_without_footer(shown), _without_footer(rec))
            self.shown_record = {**_without_footer(rec), **{k: v for k, v in shown.items() if k in FOOTER_ONLY}}
        steps: list[dict | NewStep] = []
        for step in (live_step(s) for s in bare["steps"]):
            idx = step["step_index"]
            if idx not in self.shown_steps and silent_finish(step):
                continue  # a finish with nothing to show: the turn's end says it
            final = ended or _status(step) != _RULES.step_status  # its text is all there: its lengths go
            new = step if final else {k: v for k, v in step.items() if k != "n"}
            old = self.shown_steps.get(idx)
            if old is not None:
                fields = changed_fields(old, new)
            else:
                prior = max((i for i in self.shown_steps if i < idx), default=-1)  # the step before it, as shown
                fields = _without_derived(_without_usual(new), new, self.shown_steps.get(prior), self.shown_record)
            if idx in covered:
                fields.pop("n", None)
            if old is None and set(fields) == {"step_index", "kind"}:
                steps.append((idx, fields["kind"]))  # a new step that is all its kind says: [step_index, kind]
            elif fields:
                steps.append({"step_index": idx, **_with_counts(fields, "usage_metadata")})
            self.shown_steps[idx] = new
        if not (record or steps or ended):
            return None
        out: Patch = {"turn": turn}
        if record:
            out["record"] = _with_counts(record, "usage")
        if steps:
            out["steps"] = steps
        if ended:
            out["ended"] = True
        return out

    def shown_whole(self, pricing: Mapping | None = None) -> None:
        """The views got the whole turn (a resync, the whole state): later patches start from it
        (from what they show of it, ``live_step``)."""
        bare = self.bare_dict(pricing)
        self.shown_record = bare["record"]
        self.shown_steps = {s["step_index"]: {k: v for k, v in live_step(s).items() if k != "n"} for s in bare["steps"]}

    def live_dict(self, pricing: Mapping | None = None) -> dict:
        """The bare turn as a view that followed it through its patches has it: each step's
        ``live_step`` (lengths aside), a finish with nothing to show left out (tests compare the
        reducer's turns with it)."""
        bare = self.bare_dict(pricing)
        steps = [{k: v for k, v in live_step(s).items() if k != "n"} for s in bare["steps"]]
        return {"record": bare["record"], "steps": [s for s in steps if not silent_finish(s)]}


def _without_usual(step: dict) -> dict:
    """A new step as a patch sends it: its type, source and target left out when usual for its kind."""
    usual = USUAL_SHAPES.get(step.get("kind", ""))
    if usual is None or any(step.get(k) != v for k, v in usual.items()):
        return changed_fields(None, step)
    return {k: v for k, v in step.items() if v is not None and k not in usual}


def _with_counts(fields: dict, name: str) -> dict:
    """Patch fields with the usage ``name`` as a list of its counts in ``USAGE_FIELDS`` order (trailing
    zeros left out; a view reads a missing or 0 count as absent, as the compact dict has it)."""
    usage = fields.get(name)
    if not isinstance(usage, dict) or not set(usage) <= set(USAGE_FIELDS) or not all(type(v) is int for v in usage.values()):
        return fields
    counts = [usage.get(n, 0) for n in USAGE_FIELDS]
    while counts and not counts[-1]:
        counts.pop()
    return {**fields, name: counts}


def new_record(turn: int, before: dict | None = None) -> dict:
    """What a view takes a running turn's record to be before its first patch: ``PATCH_RULES.new_record``
    with the ``carried_over`` fields of the turn before it (``before``, the record of the latest turn
    before it); the patch sends the fields that differ."""
    out: dict = {"turn": turn, **_RULES.new_record}
    out.update((k, before[k]) for k in _RULES.carried_over if before is not None and before.get(k) is not None)
    return out


_RULES = PATCH_RULES
USAGE_FIELDS = _RULES.usage_fields  # a patch's usage counts, in this order
USUAL_SHAPES = _RULES.usual_shapes  # a new step's type, source and target, left out when these for its kind
FOOTER_ONLY = frozenset(_RULES.footer_only)  # mid-turn patches leave them out
_LIVE_HIDDEN = {kind: frozenset(names) for kind, names in _RULES.live_hidden.items()}


def _without_footer(record: dict) -> dict:
    """``record`` without its footer's figures: what a new turn's record starts with of the turn before."""
    return {k: v for k, v in record.items() if k not in FOOTER_ONLY}


def ended_record(record: dict) -> dict:
    """What a view takes a turn's record to be at its end (an ended patch) before that patch's fields
    (``PATCH_RULES.ended_record``: done, finished for STOP unless it says otherwise)."""
    out = {**record, **{k: v for k, v in _RULES.ended_record.items() if k != "finish_reason"}}
    out["finish_reason"] = record.get("finish_reason") or _RULES.ended_record["finish_reason"]
    return out


def ended_step(step: dict) -> dict:
    """What a view takes a step to be at its turn's end before the ended patch's fields: an active
    step is done (``PATCH_RULES.ended_status``)."""
    return {**step, "status": _RULES.ended_status} if _status(step) == _RULES.step_status else step


def _status(step: dict) -> str:
    return step.get("status", _RULES.step_status)


def live_step(step: dict) -> dict:
    """A bare step as the live view gets it in patches: without ``PATCH_RULES.live_hidden``; a model
    call's usage only when it counts thinking tokens (``usage_shown_if``: the thinking block shows them)."""
    hidden = _LIVE_HIDDEN.get(step.get("kind", ""))
    if hidden is None:
        return step
    out = {k: v for k, v in step.items() if k not in hidden}
    usage = out.get("usage_metadata")
    if step.get("kind") == "model_call" and isinstance(usage, dict) and not usage.get(_RULES.usage_shown_if):
        del out["usage_metadata"]
    return out


def silent_finish(step: dict) -> bool:
    """Whether a step is a finish that shows nothing (none of ``PATCH_RULES.finish_shown``): patches leave it out."""
    return step.get("kind") == "finish" and not any(step.get(k) for k in _RULES.finish_shown)


def derived_fields(step: dict, before: dict | None, record: dict | None) -> dict:
    """What a view derives of a patch's new step that the patch leaves out (``PATCH_RULES``): its
    ``status`` (``done_kinds``); its ``created_at``, the end (or start) of the step before it; its
    ``finished_at`` when it is not active, its ``created_at``; the record's field of ``from_record``."""
    kind = step.get("kind", "")
    out: dict = {"status": _RULES.ended_status if kind in _RULES.done_kinds else _RULES.step_status}
    if before is not None:
        start = before.get("finished_at")
        out["created_at"] = start if start is not None else before.get("created_at")
    created = step.get("created_at")
    if step.get("status") != _RULES.step_status and created is not None:
        out["finished_at"] = created
    name = _RULES.from_record.get(kind)
    if name is not None and record is not None:
        out[name] = record.get(name)
    return {k: v for k, v in out.items() if v is not None}


def _without_derived(fields: dict, step: dict, before: dict | None, record: dict | None) -> dict:
    """A new step's patch fields without what the view derives (``derived_fields``); a derivable
    field the step lacks goes as null (a view then leaves it out)."""
    out = dict(fields)
    for name, value in derived_fields(step, before, record).items():
        if step.get(name) == value:
            out.pop(name, None)
        elif name not in step:
            out[name] = None
    return out


def changed_fields(old: dict | None, new: dict) -> dict:
    """The fields of ``new`` that ``old`` lacks or holds otherwise, and null for each field of ``old``
    that ``new`` lacks (to a view, a null field is a missing one)."""
    if old is None:
        return {k: v for k, v in new.items() if v is not None}
    out = {k: v for k, v in new.items() if old.get(k) != v}  # a null field and a missing one are the same
    out.update((k, None) for k, v in old.items() if v is not None and k not in new)
    return out


# a bare step leaves out its text (sent as deltas) and what the live view never reads (its id; its
# turn, which the turn's record names)
_NOT_BARE = frozenset(("content", "thinking", "id", "turn"))

# the view shows none of these (the provider it does: a model switch names it)
_NOT_RENDERED = {"started_at", "finished_at", "first_token_at", "model_calls", "tool_calls",
                 "prefix_change", "context_tokens", "context_window"}


def _lengths(step: dict) -> dict:
    """``n``, a bare step's text lengths, when it has text (a step without any has none to miss)."""
    n = [utf16_len(step.get("content", "")), utf16_len(step.get("thinking", ""))]
    return {"n": n} if any(n) else {}


def bare_record(record: dict | None, steps: list[dict]) -> dict | None:
    """A record as the live view needs it: without the fields it never shows, nor the prompt when
    the prompt step (whose text went as deltas) is there."""
    if record is None:
        return None
    drop = _NOT_RENDERED | ({"prompt"} if any(s.get("kind") == "prompt" for s in steps) else set())
    return {k: v for k, v in record.items() if k not in drop and not (k in ("error", "http_code", "usage") and not v)}


def step_shape(step: Step) -> tuple:
    """What makes an update structural (re-synced) rather than a text delta: the fields declared
    ``Delivery.STRUCTURAL``, each through its ``shape`` (a list's length, whether a record is there)."""
    return tuple(getattr(step, n) if shape is None else shape(getattr(step, n)) for n, shape in _STRUCTURAL)


@dataclasses.dataclass(slots=True)
class PendingDelta:
    """Text queued for the next ``deltas`` message: ``pieces`` go into step ``index``'s content
    ("c") or thinking ("t") at ``offset``; ``offset`` and ``size`` count UTF-16 units. A
    ``replace`` delta replaces the field from ``offset`` on (text rewritten, not appended)."""

    index: int
    field: str
    offset: int
    size: int
    replace: bool = False
    pieces: list[str] = dataclasses.field(default_factory=list)

    def continues(self, index: int, field: str, offset: int) -> bool:
        """Whether text at ``offset`` of that field appends to this delta."""
        return not self.replace and self.index == index and self.field == field and self.offset + self.size == offset

    def item(self) -> DeltaItem:
        """The wire item: ``[index, field, offset, text]``, plus ``true`` for a replace."""
        field: Literal["c", "t"] = "c" if self.field == "c" else "t"
        text = "".join(self.pieces)
        return (self.index, field, self.offset, text, True) if self.replace else (self.index, field, self.offset, text)


PAGE_CHARS = 500_000  # a resync's finished turns go in messages of about this size at most


@dataclasses.dataclass(slots=True)
class Flush:
    """What one flush sends: the text items and patches of a ``deltas`` message (the patches' turns
    ended with ``ended``), then the other messages (a finished turn changed, a resync's pages)."""

    items: list[DeltaItem]
    patches: list[Patch]
    messages: list[TurnEnded | TurnsPage]


class TurnCodec:
    """The turns as the views have them: conversation events in, protocol events out.

    No comm, no lock, no timer: its host (``ChatWidget``) calls it under its own lock and decides
    when to flush. ``take_event`` takes a conversation event; ``flush`` returns what goes out since the
    last one: every text delta once (``[step_index, "c"|"t", offset, text]``, offsets in UTF-16
    units, a 5th ``true`` replaces), the running turn's structural changes as patches
    (``TurnBuffer.patch``), the end of each turn that was running as its ended patch, a finished
    turn that changed whole and bare (``TurnEnded``), and after ``ask_resync`` every turn whole in
    pages (``TurnsPage``). The rules a view applies to rebuild a turn are data in protocol.py
    (``PATCH_RULES``), shared with js/src/reducer.js."""

    def __init__(self) -> None:
        self.turns: dict[int, TurnBuffer] = {}
        self.live: int | None = None  # the running turn's number
        self._pending: list[PendingDelta] = []
        self._changed = False  # the running turn's structure changed since the last flush
        self._ended: set[int] = set()  # finished turns whose structure goes out as a "turn" message
        self._ended_live: set[int] = set()  # turns that ended running: their end goes out as a patch
        self._resync = False  # send every turn whole (a view asked)
        self._first_text = False  # a model step's first text is queued since the last ``urgent``

    def load(self, records: list[TurnRecord], history: list[Step]) -> None:
        """Start from a conversation's turns and steps (what a view asks for whole)."""
        self.clear()
        by_turn = {r.turn: r for r in records}
        for step in history:
            self._remember(self.turns.setdefault(step.turn, TurnBuffer(by_turn.get(step.turn))), step)
        last = records[-1] if records else None
        if last is not None and last.status == TurnStatus.RUNNING:
            self.turns.setdefault(last.turn, TurnBuffer(last))
            self.live = last.turn
        self._changed = True

    def clear(self) -> None:
        self.turns.clear()
        self._pending.clear()
        self.live = None
        self._ended.clear()
        self._ended_live.clear()

    @property
    def finished(self) -> int:
        """How many finished turns there are (the ``finished`` trait)."""
        return sum(1 for n in self.turns if n != self.live)

    def urgent(self) -> bool:
        """Whether a model step's first text was queued since the last call: flush without waiting."""
        first, self._first_text = self._first_text, False
        return first

    def ask_resync(self) -> None:
        """A view arrived late or missed some text: the next flush sends every turn whole."""
        self._resync = True

    def take_event(self, event: str, payload: Any) -> None:
        """A conversation event (core/conversation_state.py ``ConversationEvent``)."""
        if event == ConversationEvent.TURN_FINISHED:
            turn = self.turns.setdefault(payload.turn, TurnBuffer(payload))
            turn.record, turn.cache = payload, None
            if payload.turn == self.live:
                self._finish_live()
            else:
                self._mark(payload.turn)
        elif event == ConversationEvent.TURN_STARTED:
            self._finish_live()
            self.turns[payload.turn] = TurnBuffer(payload)
            self.live = payload.turn
            self._changed = True
        elif event == ConversationEvent.STEP:
            self._on_step(payload)
        elif event == ConversationEvent.CLEARED:
            self.clear()
            self._resync = True  # the views drop every turn
            self._changed = True

    def _remember(self, turn: TurnBuffer, step: Step) -> None:
        turn.steps[step.step_index] = step
        turn.shape[step.step_index] = step_shape(step)
        turn.sent[(step.step_index, "c")] = (step.content, utf16_len(step.content))
        turn.sent[(step.step_index, "t")] = (step.thinking, utf16_len(step.thinking))
        turn.cache = None

    def _finish_live(self) -> None:
        if self.live is not None:
            self._ended_live.add(self.live)
            self.live = None
            self._changed = True

    def _on_step(self, step: Step) -> None:
        turn_no = step.turn if step.turn >= 0 else (self.live if self.live is not None else -1)
        turn = self.turns.get(turn_no)
        if turn is None:
            turn = self.turns[turn_no] = TurnBuffer(None)
        idx = step.step_index
        new_shape = step_shape(step)
        turn.steps[idx] = step
        turn.cache = None
        for field, value in (("c", step.content), ("t", step.thinking)):
            had, at = turn.sent.get((idx, field), ("", 0))
            if value is had or value == had:
                continue
            if value.startswith(had):  # appended (a str the views have is kept, not copied)
                if not had and step.source == StepSource.MODEL:  # the step's first text: the first token
                    self._first_text = True
                piece = value[len(had):]
                size = utf16_len(piece)
                self._push(idx, field, at, piece, size)
                turn.sent[(idx, field)] = (value, at + size)
            else:  # rewritten, not appended: the view replaces it
                size = utf16_len(value)
                self._push(idx, field, 0, value, size, replace=True)
                turn.sent[(idx, field)] = (value, size)
        if turn.shape.get(idx) != new_shape:  # structural: the turn's structure goes out (bare)
            turn.shape[idx] = new_shape
            self._mark(turn_no)
        elif turn_no == self.live and idx not in turn.shown_steps and (step.content or step.thinking):
            self._changed = True  # text for a step no patch showed yet (a finish that said nothing until now)

    def _mark(self, turn_no: int) -> None:
        if turn_no == self.live:
            self._changed = True
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

    # --- out ------------------------------------------------------------------------------

    def flush(self, pricing: Mapping | None = None) -> Flush:
        """Everything that changed since the last flush, as protocol payloads."""
        items = [p.item() for p in self._pending]
        covered = self._covered(self._pending)
        self._pending = []
        changed, self._changed = self._changed, False
        patches, messages = self._turn_messages(pricing, covered)
        if changed and self.live is not None and self.live in self.turns:  # after the ended turns: its new
            patches.append(self._patch(self.live, pricing, covered))  # record starts from the one before it
        return Flush(items, [p for p in patches if p is not None], messages)

    def whole_turns(self, pricing: Mapping | None = None, finished_only: bool = False) -> list[dict]:
        """Every turn with its text, oldest first (the running one too unless ``finished_only``)."""
        return [self.turns[n].to_dict(pricing) for n in sorted(self.turns) if not (finished_only and n == self.live)]

    def _live_turn(self) -> TurnBuffer | None:
        """The running turn's buffer (None between turns)."""
        return self.turns.get(self.live) if self.live is not None else None

    def shown_whole(self, pricing: Mapping | None = None) -> None:
        """The views got every turn whole: the running turn's next patch starts from that."""
        live = self._live_turn()
        if live is not None:
            live.shown_whole(pricing)

    def current(self, pricing: Mapping | None = None) -> dict | None:
        """The running turn, bare (None between turns)."""
        live = self._live_turn()
        return live.bare_dict(pricing) if live is not None else None

    def _covered(self, pending: list[PendingDelta]) -> frozenset[int]:
        """The steps whose text the deltas in ``pending`` carry up to its end in every field that has
        any: a view that reads them has it all or sees the gap, so their patches need no lengths ``n``."""
        live = self._live_turn()
        ended = [self.turns[n] for n in self._ended_live if n in self.turns]
        out = set()
        for idx in {p.index for p in pending}:
            fields = {p.field for p in pending if p.index == idx}
            for turn in [t for t in [live, *ended] if t is not None and idx in t.steps]:
                if all(turn.sent.get((idx, f), ("", 0))[1] == 0 or f in fields for f in ("c", "t")):
                    out.add(idx)
        return frozenset(out)

    def _patch(self, n: int, pricing: Mapping | None, covered: frozenset[int], ended: bool = False) -> Patch | None:
        """Turn ``n``'s patch, its new record starting from the turn before's (``new_record``)."""
        before = max((i for i in self.turns if i < n and self.turns[i].record is not None), default=None)
        prior = self.turns[before].bare_dict(pricing)["record"] if before is not None else None
        return self.turns[n].patch(n, pricing, ended=ended, covered=covered, before=prior)

    def _turn_messages(self, pricing: Mapping | None, covered: frozenset[int]
                       ) -> tuple[list[Patch | None], list[TurnEnded | TurnsPage]]:
        """The end of each turn that was running, as a patch (``"ended": true``); each finished turn
        that changed, bare (``TurnEnded``); after a resync request, every turn whole, oldest first,
        in pages (``TurnsPage``; the first tells a view to drop the turns it has)."""
        ended, self._ended = self._ended, set()
        ended_live, self._ended_live = self._ended_live, set()
        patches = [self._patch(n, pricing, covered, ended=True) for n in sorted(ended_live) if n in self.turns]
        if not self._resync:
            return patches, [TurnEnded(self.turns[n].bare_dict(pricing)) for n in sorted(ended - ended_live)
                             if n in self.turns and n != self.live]
        self._resync = False
        self.shown_whole(pricing)
        pages: list[TurnEnded | TurnsPage] = []
        page: list[dict] = []
        size = 0
        for turn in self.whole_turns(pricing):
            cost = len(json.dumps(turn))
            if page and size + cost > PAGE_CHARS:
                pages.append(TurnsPage(page, first=not pages, last=False))
                page, size = [], 0
            page.append(turn)
            size += cost
        pages.append(TurnsPage(page, first=not pages, last=True))
        return patches, pages
