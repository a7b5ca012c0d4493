"""The seam between a conversation and the policy it obeys: :class:`TurnPolicy`.

The conversation, its tool loop, the widget and the agent that makes them consult one ``TurnPolicy``
and never name what implements it (the course policy does: ``nbagent/course.py``;
``tests/test_architecture.py`` holds that no other module imports it). What they ask:

- before a turn, ``refusal``: why it may not start (closed, over a period's budget), or None; inside
  it, ``stop_reason`` before each further model call;
- for its tools, ``tools``: the ones the connection may carry; ``tool_refusal``: what the model is
  told when it calls one the policy forbids (one added after the agent was made included);
- rules text, ``rules``: put in front of the agent's own system prompt, named in the widget's footer;
- the agent's arguments, ``model``, ``budget_usd``, ``save_to``, ``user``: checked or narrowed, never
  loosened; ``source``: the policy file a saved session records.

This base allows everything and adds nothing (no policy in force). Outside agents over MCP run their
calls as turns of an ``Agent`` (served_notebook.py), so they meet the same policy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import NbagentError
from .ledger import TurnRecord


@dataclass(frozen=True)
class Rules:
    """Rules added to the system prompt: where they come from and their text."""

    label: str  # what the widget shows: the file's name, or the preset's ("tutor")
    source: str  # the preset name, or the file's absolute path (recorded in saved sessions)
    text: str

    def system_prompt(self, system: str | None) -> str:
        """The rules, then the agent's own system prompt (when it has one)."""
        return f"{self.text}\n\n{system}" if system else self.text

    def strip_from(self, system: str | None) -> str | None:
        """``system`` without these rules in front (a resumed session's saved prompt)."""
        if system and system.startswith(self.text):
            return system[len(self.text):].lstrip("\n") or None
        return system


@dataclass(frozen=True)
class PolicySource:
    """The policy file in force, as a saved session records it."""

    path: str  # absolute
    content_hash: str  # "sha256:<hex>" of its content now


class TurnPolicy:
    """What a conversation, its tools and its agent obey (see the module docstring); this base
    allows everything. ``name`` says whose refusal a notice shows."""

    name = "Policy"
    rules: Rules | None = None

    def refusal(self, turns: Sequence[TurnRecord], conversation_id: str,
                expected_usd: Callable[[], float]) -> NbagentError | None:
        """Why the next turn may not start now (``expected_usd()``: the next request's expected cost,
        asked only when needed); None: it may."""
        return None

    def stop_reason(self, turns: Sequence[TurnRecord], conversation_id: str) -> str:
        """Why a running turn must stop before its next model call ("" lets it go on)."""
        return ""

    def tools(self, tools: Any) -> Any:
        """The tools a connection may carry, of ``tools`` (anything ``Agent(tools=...)`` takes)."""
        return tools

    def tool_refusal(self, tool: Any) -> str:
        """What the model is told instead of running ``tool`` ("" runs it)."""
        return ""

    def model(self, model: Any, default: Callable[[], str]) -> Any:
        """The model to use: ``model``, or ``default()`` when None (a ``ConfigError`` when refused)."""
        return default() if model is None else model

    def budget_usd(self, given: float | None) -> float | None:
        """The conversation's own budget."""
        return given

    def save_to(self, given: str | os.PathLike | None) -> Path | None:
        """Where sessions are saved."""
        return None if given is None else Path(given).expanduser()

    def user(self, given: str) -> str:
        """Who chats."""
        return given

    @property
    def source(self) -> PolicySource | None:
        """The policy file in force (None: none)."""
        return None


NO_POLICY = TurnPolicy()
