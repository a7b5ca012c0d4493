"""What the agent did to a notebook cell, as recorded in the cell's own metadata.

Each cell the agent inserted, edited or ran carries ``metadata["nbagent"]["actions"]``: one
``CellAction`` per action, oldest first. The record is plain JSON, so it survives save, close and
reopen in every front end and in ``nbformat``; ``nbagent.provenance(path)`` lists it as a DataFrame.
"""

from __future__ import annotations

import contextvars
import enum
import hashlib
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


@dataclass(frozen=True)
class CellAction:
    """One agent action on one cell: who asked, which turn and tool call, what code resulted."""

    action: CellActionKind
    session_id: str = ""  # the conversation's id
    turn: int = -1  # the turn number as conv.turns and the widget count it
    model: str = ""
    call_id: str = ""  # the tool call (or "" for a user's "Insert as cell below" / %chat_code)
    approved_by: str = ""  # "user", "policy …", "approve_code=False", ...
    code_sha256: str = ""  # code_hash() of the cell's source after the action
    at: float = field(default_factory=time.time)  # when (seconds since the epoch)
    author: str = ""  # an outside MCP client's name and version ("": nbagent's own agent; not written)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["action"] = self.action.value
        if not self.author:
            del data["author"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CellAction:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["action"] = CellActionKind(known.get("action", "edited"))
        return cls(**known)


def recorded_actions(metadata: dict[str, Any] | None) -> list[CellAction]:
    """The actions recorded in one cell's metadata (unreadable entries are skipped)."""
    entries = ((metadata or {}).get(METADATA_KEY) or {}).get("actions") or []
    actions = []
    for entry in entries if isinstance(entries, list) else []:
        try:
            actions.append(CellAction.from_json(entry))
        except (TypeError, ValueError, AttributeError):
            continue
    return actions


def with_action(metadata: dict[str, Any] | None, action: CellAction) -> dict[str, Any]:
    """A copy of a cell's metadata with ``action`` appended to its record."""
    updated = dict(metadata or {})
    record = dict(updated.get(METADATA_KEY) or {})
    record["actions"] = [a.to_json() for a in recorded_actions(updated)] + [action.to_json()]
    updated[METADATA_KEY] = record
    return updated
