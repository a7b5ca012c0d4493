"""What the agent did to a notebook cell, as recorded in the cell's own metadata.

Each cell the agent inserted, edited or ran carries ``metadata["nbagent"]["actions"]``: one
``CellAction`` per action, oldest first. The record is plain JSON, so it survives save, close and
reopen in every front end and in ``nbformat``; ``nbagent.provenance(path)`` lists it as a DataFrame.
An edit or insert also records its diff (capped), which the JupyterLab extension's badge shows.
Anyone who can write the notebook can write this record, so it is read as untrusted: an entry that
is no action is skipped, a bad field gets its unknown value, and a record that cannot be read is
replaced when the next action is added -- never an error, above all not after a cell's code ran.
"""

from __future__ import annotations

import contextvars
import difflib
import enum
import hashlib
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

METADATA_KEY = "nbagent"  # cell.metadata[METADATA_KEY] = {"actions": [CellAction as dict, ...]}


class CellActionKind(str, enum.Enum):
    """What the agent did to the cell."""

    INSERTED = "inserted"
    EDITED = "edited"
    RAN = "ran"

    def __str__(self) -> str:
        return self.value


# who acts in this task: set by nbagent.serve while an outside client's call runs ("" for nbagent's agent)
acting_author: contextvars.ContextVar[str] = contextvars.ContextVar("nbagent_author", default="")


def code_hash(source: str) -> str:
    """The SHA-256 of a cell's source (hex), as recorded in ``CellAction.code_sha256``."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


AUTHOR = "nbagent"  # provenance()'s author of an action whose record names none (nbagent's own agent)
UNKNOWN_AUTHOR = "unknown"  # the author of a record whose author field cannot be read
_TEXT_FIELDS = ("session_id", "model", "call_id", "approved_by", "code_sha256")
_MAX_TURN = 2**31 - 1
_TIME_RANGE = (-9.2e9, 9.2e9)  # seconds since the epoch a pandas Timestamp can hold (1678-2261)
_MAX_AUTHOR = 200  # characters
_KINDS = frozenset(k.value for k in CellActionKind)
MAX_DIFF_CHARS = 4_000  # a recorded diff is cut here (and at MAX_DIFF_LINES), so notebooks do not bloat
MAX_DIFF_LINES = 80
DIFF_CONTEXT = 3  # unchanged lines shown around a change


def source_diff(before: str, after: str) -> str:
    """The unified diff of a cell's source before -> after an action (``""``: no change), cut at
    ``MAX_DIFF_LINES`` lines and ``MAX_DIFF_CHARS`` characters with a last line saying how much was cut."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after",
                                      n=DIFF_CONTEXT, lineterm=""))
    return capped_diff("\n".join(lines))


def capped_diff(diff: str) -> str:
    """``diff`` cut at ``MAX_DIFF_LINES`` lines and ``MAX_DIFF_CHARS`` characters, whole lines kept,
    with a last line saying how many lines were cut; unchanged when within both."""
    lines = diff.split("\n")
    if len(lines) <= MAX_DIFF_LINES and len(diff) <= MAX_DIFF_CHARS:
        return diff
    kept: list[str] = []
    size = 0
    for line in lines[:MAX_DIFF_LINES - 1]:  # room for the note
        if size + len(line) + 1 > MAX_DIFF_CHARS - 100:
            break
        kept.append(line)
        size += len(line) + 1
    if not kept:  # one line longer than the cap: its start
        kept, size = [lines[0][:MAX_DIFF_CHARS - 100]], MAX_DIFF_CHARS - 100
    cut = len(lines) - len(kept)
    return "\n".join(kept + [f"… diff cut: {cut} more line{'s' if cut != 1 else ''} "
                              f"({len(diff) - size:,} characters) not recorded"])


@dataclass(frozen=True)
class CellAction:
    """One agent action on one cell: who asked, which turn and tool call, what code resulted."""

    action: CellActionKind
    session_id: str = ""  # the conversation's id
    turn: int = -1  # the turn number as conv.turns and the widget count it (-1: unknown)
    model: str = ""
    call_id: str = ""  # the tool call (or "" for a user's "Insert as cell below" / %chat_code)
    approved_by: str = ""  # "user", "policy …", "approve_code=False", ...
    code_sha256: str = ""  # code_hash() of the cell's source after the action
    at: float = field(default_factory=time.time)  # when (seconds since the epoch; NaN: unknown)
    author: str = ""  # an outside MCP client's name and version ("": nbagent's own agent; not written)
    diff: str = ""  # source_diff() of the source before -> after an edit or insert ("": none; not written)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["action"] = self.action.value
        data["at"] = self.at if math.isfinite(self.at) else None  # JSON has no NaN
        for optional in ("author", "diff"):
            if not data[optional]:
                del data[optional]
        return data

    @classmethod
    def from_json(cls, data: Any) -> CellAction:
        """A recorded action, read as untrusted: a field of the wrong type or out of range gets its
        unknown value ("", -1, NaN, ``UNKNOWN_AUTHOR``); ``ValueError`` when ``data`` is no action record."""
        if not isinstance(data, dict):
            raise ValueError(f"an action record is an object, not {type(data).__name__}")
        kind = data.get("action", CellActionKind.EDITED.value)
        if not isinstance(kind, str) or kind not in _KINDS:
            raise ValueError(f"unknown action {kind!r}")
        texts = {name: value for name in _TEXT_FIELDS if isinstance(value := data.get(name), str)}
        return cls(CellActionKind(kind), **texts, turn=_turn(data.get("turn")), at=_time(data.get("at")),
                   author=_author(data.get("author")), diff=_diff(data.get("diff")))


def _turn(value: Any) -> int:
    """A recorded turn number, or -1 (unknown) for anything else (a bool, a string, one past int32)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and -1 <= value <= _MAX_TURN
    return value if ok else -1


def _time(value: Any) -> float:
    """A recorded time a pandas Timestamp can hold, or NaN (unknown)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and _TIME_RANGE[0] <= value <= _TIME_RANGE[1]
    return float(value) if ok else math.nan


def _author(value: Any) -> str:
    """A recorded author made fit to show: "" (nbagent's own agent) when none is recorded; a name's
    unprintable characters (line breaks, bidirectional controls) become spaces, cut at 200
    characters; anything else (a number, a list, only blanks) is ``UNKNOWN_AUTHOR``."""
    if value is None:
        return ""
    text = "".join(c if c.isprintable() else " " for c in value[:_MAX_AUTHOR]) if isinstance(value, str) else ""
    return " ".join(text.split()) or UNKNOWN_AUTHOR


def _diff(value: Any) -> str:
    """A recorded diff: a string, cut as ``capped_diff`` cuts (a hand-written one may be longer); else ""."""
    return capped_diff(value) if isinstance(value, str) else ""


def recorded_actions(metadata: Any) -> list[CellAction]:
    """The actions recorded in one cell's metadata, read as untrusted: a record that is not an
    object, or an entry that is no action, is skipped; a bad field gets its unknown value."""
    record = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    entries = record.get("actions") if isinstance(record, dict) else None
    actions = []
    for entry in entries if isinstance(entries, list) else []:
        try:
            actions.append(CellAction.from_json(entry))
        except ValueError:
            continue
    return actions


def with_action(metadata: Any, action: CellAction) -> dict[str, Any]:
    """A copy of a cell's metadata with ``action`` appended to its record (a record that cannot be
    read is replaced; the readable actions are kept, written back valid)."""
    updated = dict(metadata) if isinstance(metadata, dict) else {}
    record = updated.get(METADATA_KEY)
    record = dict(record) if isinstance(record, dict) else {}
    record["actions"] = [a.to_json() for a in recorded_actions(updated)] + [action.to_json()]
    updated[METADATA_KEY] = record
    return updated
