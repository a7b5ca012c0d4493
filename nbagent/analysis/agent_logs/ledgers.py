"""Agent logs as nbagent's session ledgers: a turn per model call, so every usage frame reads them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence

from ...core.ledger import TurnRecord
from ...core.session_file import SessionHead, SessionLedger
from .log import AgentLog
from .readers import read_logs


@dataclass
class AgentLedger(SessionLedger):
    """A :class:`SessionLedger` read from another agent's log."""

    source: str = ""
    project: str = ""
    skipped: Counter = field(default_factory=Counter)
    subagent: list[bool] = field(default_factory=list)  # each turn (model call): a subagent's


def as_ledger(log: AgentLog) -> AgentLedger:
    if log.turns is None:  # a log read before and not changed keeps its turns
        log.turns = [call.turn_dict(n) for n, call in enumerate(log.calls)]
    turns = log.turns
    model = log.calls[-1].model if log.calls else ""
    return AgentLedger(log.path, log.session_id, None, None, turns, model, log.source, log.project, log.skipped,
                       [call.sidechain for call in log.calls])


def agent_ledgers(paths: Sequence[Path]) -> dict[Path, AgentLedger]:
    """The ledger of each of ``paths`` that an agent log reader recognises (``StorageError`` for a
    file that cannot be read); duplicates across them counted once."""
    if not paths:
        return {}
    return {p: as_ledger(log) for p, log in zip(paths, read_logs(paths)) if log is not None}


def as_head(ledger: AgentLedger) -> SessionHead:
    """The ledger as a session head (``list_sessions``' rows): its turns as records."""
    return SessionHead(ledger.path, ledger.conversation_id, None, None,
                       [TurnRecord.from_dict(t) for t in ledger.turns], ledger.model)
