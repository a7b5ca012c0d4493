"""How the ChatWidget encodes turns for its front end: compact step dicts, records with the
footer's figures, and a per-turn buffer that remembers what the views already have (its text
goes as deltas; its structure without the text, see ``TurnBuffer.bare_dict``)."""

from __future__ import annotations

import json
import dataclasses
from typing import Any
from collections.abc import Mapping

from ..core.ledger import TurnRecord
from ..core.steps import Step, Wire, field_roles

# made from the fields' declared roles (core/steps.py): what the compact dict keeps at its default,
# what stays in the kernel, and the structural fields with what of each counts as a change
_KEEP_EMPTY = frozenset(n for n, r in field_roles().items() if r.keep_empty)
_NOT_SHOWN = frozenset(n for n, r in field_roles().items() if r.wire is Wire.KERNEL)  # raw usage stays in the kernel
_STRUCTURAL = tuple((n, r.shape) for n, r in field_roles().items() if r.wire is Wire.STRUCTURAL)


def step_dict(step: Step) -> dict:
    """A compact JSON-ready dict of a step: empty / default fields and raw usage left out, its
    ``kind`` (prompt, model_call, tool_run, compaction, finish) added."""
    d = step.to_dict()
    out = {k: v for k, v in d.items()
           if k not in _NOT_SHOWN and (k in _KEEP_EMPTY or v not in (None, "", [], {}, 0, -1))}
    out["kind"] = step.kind.value
    return out


def record_dict(rec: TurnRecord, pricing: Mapping | None = None) -> dict:
    """A turn record with the derived figures the footer shows (cost when known)."""
    d = rec.to_dict()
    d.update(duration=rec.duration, ttft=rec.time_to_first_token, tps=rec.output_tokens_per_s)
    try:
        from ..analysis.estimate import turn_cost

        cost = turn_cost(rec, pricing)
        d["cost"] = None if cost != cost else cost  # NaN: unknown price
    except Exception:  # an odd model name or a broken price override: no cost shown
        d["cost"] = None
    return d


def utf16_len(text: str) -> int:
    """The length of ``text`` in a JavaScript string (UTF-16 units): offsets and lengths on the wire
    count these, so a view's ``string.length`` agrees with them beyond the BMP (emoji)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class TurnBuffer:
    """One turn as the widget knows it: latest step updates and what the views have of them."""

    __slots__ = ("record", "steps", "sent", "shape", "cache", "bare_cache")

    def __init__(self, record: TurnRecord | None):
        self.record = record
        self.steps: dict[int, Step] = {}  # step_index -> latest update
        # (step_index, field) -> what the views have: (characters, its length in UTF-16 units)
        self.sent: dict[tuple[int, str], tuple[int, int]] = {}
        self.shape: dict[int, tuple] = {}  # step_index -> last structural fingerprint
        self.cache: dict | None = None
        self.bare_cache: dict | None = None

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
        ``thinking`` are replaced by ``n``: [their lengths in UTF-16 units], so a view can tell it misses some."""
        full = self.to_dict(pricing)
        if self.bare_cache is None:
            steps = [{**{k: v for k, v in s.items() if k not in ("content", "thinking")},
                      "n": [utf16_len(s.get("content", "")), utf16_len(s.get("thinking", ""))]} for s in full["steps"]]
            self.bare_cache = {"record": bare_record(full["record"], steps), "steps": steps}
        return self.bare_cache


# the view shows none of these (the provider it does: a model switch names it)
_NOT_RENDERED = {"started_at", "finished_at", "first_token_at", "model_calls", "tool_calls",
                 "prefix_change", "context_tokens", "context_window"}


def bare_record(record: dict | None, steps: list[dict]) -> dict | None:
    """A record as the live view needs it: without the fields it never shows, nor the prompt when
    the prompt step (whose text went as deltas) is there."""
    if record is None:
        return None
    drop = _NOT_RENDERED | ({"prompt"} if any(s.get("kind") == "prompt" for s in steps) else set())
    return {k: v for k, v in record.items() if k not in drop and not (k in ("error", "http_code") and not v)}


def step_shape(step: Step) -> tuple:
    """What makes an update structural (re-synced) rather than a text delta: the fields declared
    ``Wire.STRUCTURAL``, each through its ``shape`` (a list's length, whether a record is there)."""
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

    def item(self) -> list:
        """The wire item: ``[index, field, offset, text]``, plus ``true`` for a replace."""
        item: list = [self.index, self.field, self.offset, "".join(self.pieces)]
        return item + [True] if self.replace else item
