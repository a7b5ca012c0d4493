"""The approval audit: every decision on a tool call, who or what made it, and when.

``conv.approvals_df()`` is ``approvals_frame(conv.history)``: one row per tool
execution step that carries an ``approval`` (auto runs included), index
``step_index`` (joins ``history_df()``). Steps are saved whole, so a loaded
session gives the same frame; ``approvals_json_rows`` gives the same rows as
JSON (for ``save(path, frames=True)``).

``decided_by`` says who or what decided (filled by the tool runner):
``"user"`` (``approve()`` / ``deny()``, the widget's buttons), ``"policy
allow_all"``, ``"policy deny_all"``, ``"policy <function>"``, ``"hook
<function>"`` (a ``pre_tool_use`` hook blocked the call), ``"caller"`` (a
manual result, ``auto_execute_tools=False``), ``"interrupt"`` (interrupted
before a decision), ``"loop"`` (never run: token limit, tool-call limit or a
model error). Sessions saved before these fields existed show NA.
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any
from collections.abc import Sequence

from ..core.steps import ApprovalDecision, Step, StepStatus
from .column_values import args_json
from .columns import Column, Kind, column_table
from .frames import build_frame
from .tables import Table

__all__ = ["approvals_frame", "approvals_json_rows", "approval_steps", "APPROVAL_COLUMNS", "DECIDERS"]

DECIDERS = ("user", "caller", "policy allow_all", "policy deny_all", "interrupt", "loop")  # known decided_by values
NOT_RUN = frozenset({ApprovalDecision.DENIED, ApprovalDecision.POLICY_DENIED, ApprovalDecision.BLOCKED,
                     ApprovalDecision.CANCELED})


def approval_steps(steps: Sequence[Step]) -> list[Step]:
    """The tool execution steps that carry an approval decision, in history order."""
    return [s for s in steps if s.approval is not None and s.is_tool_run and s.tool_calls]


def _floats(values: Any) -> Any:
    import numpy as np

    return np.fromiter((math.nan if v is None else v for v in values), dtype=np.float64)


def _decided_at(step: Step) -> float | None:
    """When the decision was made; a manual result saved without a time counts from its finish."""
    if step.decided_at is None and step.approval == ApprovalDecision.MANUAL and step.status != StepStatus.WAITING_FOR_USER:
        return step.finished_at
    return step.decided_at


def _decided(table: Table) -> Any:
    return table.cached("decided", lambda: _floats(map(_decided_at, table.objs)))


def _requested(table: Table) -> Any:
    return table.cached("requested", lambda: _floats(map(attrgetter("created_at"), table.objs)))


def _call(attr: str):
    get = attrgetter(attr)
    return lambda t: [get(s.tool_calls[0]) for s in t.objs]


INDEX = Column("step_index", Kind.INT, lambda t: [s.step_index for s in t.objs], "the execution step (joins history_df)")
COLUMNS = (
    Column("turn", Kind.INT, lambda t: [s.turn for s in t.objs], "0-based turn number"),
    Column("call_id", Kind.TEXT, _call("id"), "the provider's call id"),
    Column("tool", Kind.CATEGORY, _call("name"), "tool name"),
    Column("arguments", Kind.TEXT, lambda t: [args_json(s.tool_calls[0].args) for s in t.objs],
           "JSON of the arguments the call ran (or would have run) with"),
    Column("decision", Kind.CATEGORY, lambda t: [s.approval for s in t.objs], "ApprovalDecision value",
           tuple(m.value for m in ApprovalDecision)),
    Column("decided_by", Kind.CATEGORY, lambda t: [s.decided_by or None for s in t.objs],
           "who or what decided (see the module docstring); NA: not yet, or an older session", DECIDERS),
    Column("requested", Kind.TIME, _requested, "when the call reached the tool runner"),
    Column("decided_at", Kind.TIME, _decided, "when the decision was made; NaT while pending"),
    Column("wait_s", Kind.FLOAT, lambda t: _decided(t) - _requested(t), "decided_at - requested"),
    Column("reason", Kind.TEXT, lambda t: [s.content or None if s.approval in NOT_RUN else None for s in t.objs],
           "a call not run: what the model was told (a deny reason included); NA when it ran"),
    Column("status", Kind.CATEGORY, lambda t: [s.status for s in t.objs], "StepStatus of the execution step",
           tuple(m.value for m in StepStatus)),
)
APPROVAL_COLUMNS = tuple(c.name for c in COLUMNS)

__doc__ = (__doc__ or "") + f"\napprovals_frame\n\n{column_table(INDEX, COLUMNS)}\n"


def approvals_frame(steps: Sequence[Step]):
    """One row per approval decision on a tool call, index ``step_index`` (pandas)."""
    return build_frame(Table(approval_steps(steps)), INDEX, COLUMNS)


def approvals_json_rows(steps: Sequence[Step]) -> list[dict]:
    """The rows of :func:`approvals_frame` as JSON-ready dicts (times ISO 8601 UTC, missing = null)."""
    table = Table(approval_steps(steps))
    names = [INDEX.name] + [c.name for c in COLUMNS]
    values = [c.to_json(c.extract(table)) for c in (INDEX, *COLUMNS)]
    return [dict(zip(names, row)) for row in zip(*values)]
