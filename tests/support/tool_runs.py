"""A conversation's tool runs, an approver of its calls, and a call that must not hang, for the tool and
notebook tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from nbagent import ApprovalDecision, StepStatus, StepType
from nbagent.core.conversation_state import plumbing_of


def tool_steps(conv: Any, name: str | None = None) -> list:
    """Every tool execution step of ``conv`` (of the tool ``name`` when given), whatever its status."""
    return [s for s in conv.history if s.type == StepType.TOOL_CALL and s.source.value == "SYSTEM"
            and (name is None or s.tool_calls[0].name == name)]


def finished_tool_steps(conv: Any) -> list:
    """The tool runs of ``conv`` that have ended (no longer ACTIVE)."""
    return [s for s in conv.history if s.is_tool_run and s.status != StepStatus.ACTIVE]


def in_a_thread(fn: Callable[[], Any], wait: float = 120.0) -> Any:
    """``fn()`` on a daemon thread; its result, or a failure if it still runs after ``wait`` s (a hang)."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    thread.join(wait)
    assert not thread.is_alive(), f"still running after {wait:g} s: it hangs"
    return out[0]


def approving(conv: Any) -> Any:
    """A listener added to ``conv`` that approves every call waiting for the user (what pressing Approve
    does); its ``approved`` lists the call ids, in order."""
    approved: list[str] = []

    def listener(event: str, step: Any) -> None:
        if event == "step" and step.status == StepStatus.WAITING_FOR_USER and step.approval == ApprovalDecision.PENDING:
            for call in step.tool_calls:
                approved.append(call.id)
                conv.approve(call.id)

    plumbing_of(conv).add_listener(listener)
    listener.approved = approved  # type: ignore[attr-defined]
    return listener
