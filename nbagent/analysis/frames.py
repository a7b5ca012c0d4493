"""History, usage and tool calls as pandas DataFrames.

pandas (and numpy) are imported inside the functions, so ``import nbagent``
stays light; a missing pandas raises ``NbagentError(kind="config")``. Every
column is defined once in :mod:`nbagent.analysis.columns` (name, dtype,
meaning); the column tables at the end of this docstring are generated from it.

Conventions for every frame: timestamps are tz-aware UTC, ``NaT`` when
unknown; durations are float seconds in columns ending in ``_s``;
enumerations are ``category`` columns whose categories are every value of
the enum (in enum order), so ``value_counts()`` shows zero counts too;
counts are nullable ``Int64``; text is the nullable ``string`` dtype.
Every frame is marked by ``literal_frame`` (a key in ``df.attrs``): in JupyterLab
and Notebook 7 its table shows ``$5 and $10`` as written, not as math.

- ``history_frame(steps)``: one row per step, index ``step_index``.
- ``usage_frame(records, pricing=None)``: one row per turn from the
  never-trimmed ledger, index ``turn``.
- ``tool_calls_frame(steps)``: one row per tool call the model asked for,
  paired by call id with the step that executed it (an execution whose
  request was trimmed away gets a row too); index ``call``.

Examples::

    df = conv.usage_df()
    df.groupby("model", observed=True)[["total_tokens", "cost_usd"]].sum()
    week = nbagent.load_sessions("~/chats/*.json")
    week[week.started >= pd.Timestamp.now(tz="UTC") - pd.Timedelta(days=7)] \\
        .groupby("model", observed=True).cost_usd.sum()
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Iterator, Mapping, Sequence

from ..core.distribution import install_hint
from ..core.errors import ConfigError
from ..core.ledger import TurnRecord
from ..core.steps import Step, StepKind
from .columns import (HISTORY, HISTORY_INDEX, HISTORY_READS, TOOL_CALL_INDEX, TOOL_CALLS, USAGE, USAGE_INDEX,
                      Column, column_table)
from .tables import Table

__all__ = [
    "history_frame",
    "usage_frame",
    "tool_calls_frame",
    "tool_call_rows",
    "ToolCallRow",
    "HISTORY_COLUMNS",
    "USAGE_COLUMNS",
    "TOOL_CALL_COLUMNS",
]

__doc__ = (__doc__ or "") + "".join(
    f"\n{title}\n\n{column_table(index, columns)}\n"
    for title, index, columns in (("history_frame", HISTORY_INDEX, HISTORY), ("usage_frame", USAGE_INDEX, USAGE),
                                  ("tool_calls_frame", TOOL_CALL_INDEX, TOOL_CALLS)))

HISTORY_COLUMNS = tuple(c.name for c in HISTORY)
USAGE_COLUMNS = tuple(c.name for c in USAGE)
TOOL_CALL_COLUMNS = tuple(c.name for c in TOOL_CALLS)


def require_pandas():
    """pandas, or ``NbagentError(kind="config")`` saying how to install it."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - exercised only without pandas
        raise ConfigError(f"DataFrames need pandas: {install_hint('frames')}") from None
    return pd


def build_frame(table: Table, index: Column, columns: Sequence[Column]):
    """A DataFrame of ``columns`` over the table's objects, indexed by ``index``; a
    marked by :func:`~nbagent.analysis.literal_frame.literal_frame`, so notebooks show its text as written."""
    pd = require_pandas()
    from .literal_frame import literal_frame

    data = {c.name: c.to_pandas(c.extract(table)) for c in columns}
    index_values = pd.Index(index.to_pandas(index.extract(table)), name=index.name)
    return literal_frame(pd.DataFrame(data, index=index_values, copy=False))


def _frame_of(table: Callable[[], Table], index: Column, columns: Sequence[Column]):
    """:func:`build_frame` over the table ``table()`` makes, the cyclic garbage collector paused until
    that table is freed.

    The table holds lists of a million references while the columns are built (the values read);
    a collection that runs meanwhile walks every one of them (a million steps' 17 lists: 0.3 s),
    to find nothing: building a frame makes no reference cycles, and the lists are freed by
    reference counting with the table, before the collector runs again."""
    with _collector_paused():
        return build_frame(table(), index, columns)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off in the block (on again after, if it was on)."""
    import gc

    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def history_frame(steps: Sequence[Step]):
    """One row per step, index ``step_index``."""
    return _frame_of(lambda: Table(steps, reads=HISTORY_READS), HISTORY_INDEX, HISTORY)


def usage_frame(records: Sequence[TurnRecord], pricing: Mapping | None = None):
    """One row per turn, index ``turn``.

    ``pricing`` maps model names to a ``Price``, a mapping with
    ``input``/``output`` (and optional ``cached_input``/``cache_write``) or a
    tuple, in USD per 1M tokens; it wins over ``set_price`` and ``PRICES``.
    """
    return _frame_of(lambda: Table(records, pricing), USAGE_INDEX, USAGE)


def tool_calls_frame(steps: Sequence[Step]):
    """One row per tool call, a ``RangeIndex`` named ``call``."""
    pd = require_pandas()
    rows = tool_call_rows(steps)
    frame = build_frame(Table(rows), TOOL_CALL_INDEX, TOOL_CALLS)
    frame.index = pd.RangeIndex(len(rows), name="call")
    return frame


@dataclass
class ToolCallRow:
    """A tool call the model asked for, with the step that executed it (None: not yet)."""

    turn: int
    call_id: str
    name: str
    args: Any
    request_step: int | None
    execution: Step | None


def tool_call_rows(steps: Sequence[Step]) -> list[ToolCallRow]:
    """Every tool call in history order, paired with its execution step.

    Calls pair by id; calls without an id pair in order by (turn, name). An
    execution whose request is no longer in history (trimmed) gets a row too.
    """
    steps = [s for s in steps if s.tool_calls]  # only these can request or run a call
    executions: dict[str, Step] = {}
    anonymous: dict[tuple, list[Step]] = {}
    requested: set[str] = set()
    for s in steps:
        if s.is_tool_run:
            call = s.tool_calls[0]
            if call.id:
                executions[call.id] = s
            else:
                anonymous.setdefault((s.turn, call.name), []).append(s)
        elif s.kind is StepKind.MODEL_CALL:
            requested.update(c.id for c in s.tool_calls if c.id)
    rows = []
    for s in steps:
        if s.kind is StepKind.MODEL_CALL:
            for c in s.tool_calls:
                if c.id:
                    ex = executions.get(c.id)
                else:
                    queue = anonymous.get((s.turn, c.name))
                    ex = queue.pop(0) if queue else None
                rows.append(ToolCallRow(s.turn, c.id, c.name, c.args, s.step_index, ex))
        elif s.is_tool_run:
            call = s.tool_calls[0]
            if call.id and call.id not in requested:  # its request was trimmed away
                rows.append(ToolCallRow(s.turn, call.id, call.name, call.args, None, s))
            elif not call.id:  # still queued: no model request claimed it
                queue = anonymous.get((s.turn, call.name)) or []
                if any(x is s for x in queue):
                    queue[:] = [x for x in queue if x is not s]
                    rows.append(ToolCallRow(s.turn, call.id, call.name, call.args, None, s))
    return rows
