"""Whole-session files: steps, the turn ledger and the ChatSession in one JSON."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .errors import NbagentError
from .ledger import TurnRecord
from .chat_session import ChatSession, atomic_write_json, read_json
from .steps import Step, UsageMetadata

FORMAT = "nbagent.session"
VERSION = 1


def save_conversation(conv, path: str | Path) -> Path:
    """Write ``conv`` to ``path`` atomically. Holds no keys: only history and usage."""
    with conv._lock:
        steps = list(conv._steps)
        turns = list(conv._ledger)
        doc: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "conversation_id": conv.conversation_id,
            "saved_at": time.time(),
            "model": turns[-1].model if turns else "",
            "provider": turns[-1].provider if turns else "",
            "max_history_size": conv._max,
            "trimmed": conv._trimmed,
            "turn_starts": list(conv._turn_starts),
            "compactions": list(conv._compactions),
            "total_usage": conv._total.to_dict(),
            "last_response": conv._last_response,
            "steps": [s.to_dict() for s in steps],
            "turns": [t.to_dict() for t in turns],
        }
    session = getattr(conv.connection, "session", None) or conv._loaded_session
    doc["chat_session"] = session.to_dict() if isinstance(session, ChatSession) else None
    try:
        from ..analysis.sessions import export_frames

        doc["frames"] = export_frames(steps, turns)
    except ImportError:  # pandas-free installs still save everything needed
        doc["frames"] = None
    return atomic_write_json(path, doc)


def read_session_file(path: str | Path) -> dict:
    """Read and check a saved session; ``NbagentError(kind="io")`` when unusable."""
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise NbagentError(f"{path} is not an nbagent session file", kind="io")
    if doc.get("version") != VERSION:
        raise NbagentError(
            f"{path} has session version {doc.get('version')!r}; this nbagent reads version {VERSION}",
            kind="io",
        )
    return doc


def load_conversation(cls, path: str | Path, connection: Any = None):
    doc = read_session_file(path)
    try:
        steps = [Step.from_dict(s) for s in doc["steps"]]
        turns = [TurnRecord.from_dict(t) for t in doc["turns"]]
        chat = doc.get("chat_session")
        session = ChatSession.from_dict(chat, source=str(path)) if chat else None
        total = UsageMetadata.from_dict(doc.get("total_usage")) or UsageMetadata()
    except NbagentError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise NbagentError(f"{path} is damaged: {exc!r}", kind="io") from None
    if connection is not None and session is not None and hasattr(connection, "restore_session"):
        connection.restore_session(session)
    conv = cls(connection, max_history_size=doc.get("max_history_size"))
    with conv._lock:
        conv._steps = steps
        conv._trimmed = int(doc.get("trimmed", 0))
        conv._ledger = turns
        conv._turn_starts = [int(i) for i in doc.get("turn_starts", [])]
        conv._compactions = [int(i) for i in doc.get("compactions", [])]
        conv._total = total
        conv._last_response = doc.get("last_response", "")
        conv._loaded_id = doc.get("conversation_id", "")
        conv._loaded_session = session
    if connection is not None and hasattr(connection, "next_step_index"):
        connection.next_step_index = max((s.step_index for s in steps), default=-1) + 1
    return conv
