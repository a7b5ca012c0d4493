"""Another agent's session as a read-only ``Conversation`` (``nbagent.open_agent_log``)."""

from __future__ import annotations

import os

from .analysis.agent_logs.transcript import agent_log_state
from .conversation import Conversation, from_state


def open_agent_log(path: str | os.PathLike) -> Conversation:
    """A Claude Code or Codex session log as a read-only conversation: ``history_df()``, ``usage_df()``,
    ``tool_calls_df()`` and the cache analytics as for nbagent's own sessions."""
    return from_state(agent_log_state(os.path.expanduser(os.fspath(path))))
