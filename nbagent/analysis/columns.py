"""Every analysis column, defined once.

A :class:`Column` names a column, its kind and how to read it from the
objects of a table (steps, turn records, tool calls). The same definition
yields the pandas column (:meth:`Column.to_pandas`, for the DataFrames) and
the JSON values (:meth:`Column.to_json`, for the rows a saved session can
embed). Extractors are vectorized: they take every object at once and return
the column in its kind's plain form:

=========  ===================  ==========================================
kind       plain form           pandas dtype / JSON value
=========  ===================  ==========================================
INT        int64 array          ``int64`` / int
COUNT      float64, NaN = NA    ``Int64`` / int or null
FLOAT      float64, NaN         ``float64`` / float or null
TEXT       list of str | None   ``string`` / str or null
CATEGORY   list of str | None   ``category`` (known values first) / str or null
TIME       epoch s, NaN         ``datetime64[ns, UTC]`` / ISO 8601 or null
BOOL       bool array           ``bool`` / true or false
=========  ===================  ==========================================

The objects and how their attributes are read are in ``tables.py``; the conversions of a plain
form to pandas and Arrow in ``column_values.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from itertools import compress
from operator import attrgetter
from typing import Any
from collections.abc import Callable, Sequence

from ..core.ledger import tokens_per_second
from ..core.usage import TOKEN_COUNTS
from .cache import EXPIRED, UNKNOWN
from .coded import Coded
from .column_values import (args_json, categorical, count_ints, enum_value, iso, shorten, shorten_column, text_array,
                            utc_times)
from .tables import Form, Table, float_array
from ..core.steps import (ApprovalDecision, FinishReason, PrefixChange, StepSource, StepStatus, StepTarget, StepType,
                          TurnStatus, changes_line)

PROMPT_CHARS = 80
PREVIEW_CHARS = 200


class Kind(Enum):
    INT = "int64"
    COUNT = "Int64"
    FLOAT = "float64"
    TEXT = "string"
    CATEGORY = "category"
    TIME = "datetime64[ns, UTC]"
    BOOL = "bool"


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    extract: Callable[[Table], Any]
    doc: str = ""
    categories: tuple[str, ...] = ()  # CATEGORY: the known values, in order
    limit: int = 0  # TEXT: cut to this many characters (see ``shorten``); None reads ""

    def to_pandas(self, values: Any) -> Any:
        """The plain form as a pandas array of this column's dtype."""
        import numpy as np
        import pandas as pd

        if self.kind is Kind.INT:
            return np.ascontiguousarray(values, dtype=np.int64)
        if isinstance(values, Coded) and self.kind is not Kind.CATEGORY:
            values = values.floats() if self.kind is Kind.COUNT else values.tolist()
        if self.kind is Kind.COUNT:
            return pd.arrays.IntegerArray(*count_ints(values))
        if self.kind is Kind.FLOAT:
            return np.asarray(values, dtype=np.float64)
        if self.kind is Kind.TEXT:
            return shorten_column(values, self.limit) if self.limit else text_array(values)
        if self.kind is Kind.CATEGORY:
            return categorical(values, self.categories)
        if self.kind is Kind.BOOL:
            return np.asarray(values, dtype=bool)
        return utc_times(values)

    def to_json(self, values: Any) -> list:
        """The plain form as JSON-ready values (missing -> None)."""
        if isinstance(values, Coded):
            values = values.tolist()
        if self.kind is Kind.INT:
            return [int(v) for v in values]
        if self.kind is Kind.COUNT:
            return [None if math.isnan(v) else int(v) for v in values]
        if self.kind is Kind.FLOAT:
            return [None if math.isnan(v) else float(v) for v in values]
        if self.kind is Kind.TEXT:
            return shorten([v or "" for v in values], self.limit) if self.limit else list(values)
        if self.kind is Kind.CATEGORY:
            return [enum_value(v) for v in values]
        if self.kind is Kind.BOOL:
            return [bool(v) for v in values]
        return [iso(v) for v in values]


# --- extractor builders -------------------------------------------------------------------


def _floats(table: Table, get: Callable[[Any], Any]) -> Any:
    return float_array(list(map(get, table.objs)))


def _ints(path: str) -> Callable[[Table], Any]:
    return lambda table: table.ints(path)


def _counts(path: str, zero_is_na: bool = False) -> Callable[[Table], Any]:
    """A count read at ``path`` (float plain form, NaN where missing); 0 is NA when ``zero_is_na``."""
    def extract(table: Table) -> Any:
        data = table.floats(path)
        return _zero_is_na(data) if zero_is_na else data
    return extract


def _zero_is_na(data: Any) -> Any:
    import numpy as np

    data = data.copy()
    data[data == 0] = np.nan
    return data


def _optional_floats(path: str) -> Callable[[Table], Any]:
    return lambda table: table.floats(path)


def _texts(path: str, empty_is_na: bool = False) -> Callable[[Table], Any]:
    if empty_is_na:
        return lambda table: _empty_is_na(table.values(path))
    return lambda table: table.values(path)


def _empty_is_na(texts: Any) -> Any:
    """Texts with "" (and None) as None: a list, or Arrow strings with "" as null."""
    if isinstance(texts, list):
        return [v or None for v in texts]
    import pyarrow as pa
    import pyarrow.compute as pc

    pool = pa.system_memory_pool()
    empty = pc.equal(texts, "", memory_pool=pool)
    if not pc.any(empty).as_py():
        return texts
    return pc.if_else(empty, pa.scalar(None, texts.type), texts, memory_pool=pool)


def _values(path: str) -> Callable[[Table], Any]:
    return lambda table: table.values(path)


def _few(group: tuple[str, ...], path: str, empty_is_na: bool = False) -> Callable[[Table], Coded]:
    """The value at ``path``, one of ``group``: attributes with few distinct values, coded together."""
    k = group.index(path)

    def extract(table: Table) -> Coded:
        codes, rows = table.coded(group)
        return Coded(codes, [(row[k] or None) if empty_is_na else row[k] for row in rows])
    return extract


def _few_counts(group: tuple[str, ...], path: str) -> Callable[[Table], Any]:
    """A count of ``group`` (float plain form), NA when 0."""
    few = _few(group, path)
    return lambda table: _zero_is_na(few(table).floats())


def _tool_names(table: Table) -> list:
    """Each step's tool call names, comma-joined; None without calls (only the steps with calls are visited)."""
    name = attrgetter("name")
    calls = table.values("tool_calls")
    out: list = [None] * len(calls)
    for i in compress(range(len(calls)), calls):
        row = calls[i]
        out[i] = name(row[0]) if len(row) == 1 else ",".join(map(name, row))
    return out


def _enum_category(name: str, enum_cls: type[Enum], extra: tuple[str, ...] = (), doc: str = "",
                   few: tuple[str, ...] = ()) -> Column:
    return Column(name, Kind.CATEGORY, _few(few, name) if name in few else _values(name), doc,
                  tuple(m.value for m in enum_cls) + extra)


# --- history: one row per step ------------------------------------------------------------

_created = _optional_floats("created_at")
_step_finished = _optional_floats("finished_at")
# a step's attributes with few distinct values, coded together
STEP_FEW = ("type", "source", "target", "status", "finish_reason", "model", "http_code")

HISTORY_INDEX = Column("step_index", Kind.INT, _ints("step_index"), "position in the whole trajectory")
HISTORY = (
    Column("turn", Kind.INT, _ints("turn"), "0-based absolute turn number"),
    _enum_category("type", StepType, doc="StepType value", few=STEP_FEW),
    _enum_category("source", StepSource, doc="StepSource value", few=STEP_FEW),
    _enum_category("target", StepTarget, doc="StepTarget value", few=STEP_FEW),
    _enum_category("status", StepStatus, doc="StepStatus value", few=STEP_FEW),
    Column("content", Kind.TEXT, _texts("content"), "full text of the step"),
    Column("thinking", Kind.TEXT, _texts("thinking"), "full reasoning text"),
    Column("refusal", Kind.TEXT, _texts("refusal", empty_is_na=True), "the model's refusal, NA if none"),
    Column("tool_names", Kind.TEXT, _tool_names, "comma-joined tool call names, NA if none"),
    Column("model", Kind.CATEGORY, _few(STEP_FEW, "model", empty_is_na=True), "the model that answered"),
    *(Column(t.column, Kind.COUNT, _counts("usage_metadata." + t.field), t.meaning + " (NA: no usage)")
      for t in TOKEN_COUNTS),
    _enum_category("finish_reason", FinishReason, doc="why a model call or the turn ended", few=STEP_FEW),
    Column("http_code", Kind.COUNT, _few_counts(STEP_FEW, "http_code"), "NA when 0"),
    Column("error", Kind.TEXT, _texts("error", empty_is_na=True), "NA when empty"),
    Column("created", Kind.TIME, _created, "created_at"),
    Column("finished", Kind.TIME, _step_finished, "finished_at, NaT while running"),
    Column("duration_s", Kind.FLOAT, lambda t: _step_finished(t) - _created(t), "finished - created"),
    Column("subagent", Kind.BOOL, lambda t: [s.subagent for s in t.objs],
           "a subagent's step (another agent's log: a Claude Code sidechain, a Codex subagent)"),
)
# every Step attribute the history columns read, read together (see Table)
HISTORY_READS = {"step_index": Form.INTS, "turn": Form.INTS, **dict.fromkeys(STEP_FEW, Form.CODED),
                 **dict.fromkeys(("content", "thinking", "refusal", "error"), Form.TEXTS), "tool_calls": Form.OBJECTS,
                 **{"usage_metadata." + t.field: Form.FLOATS for t in TOKEN_COUNTS},
                 "created_at": Form.FLOATS, "finished_at": Form.FLOATS}


# --- usage: one row per turn --------------------------------------------------------------

_started = _optional_floats("started_at")
_turn_finished = _optional_floats("finished_at")
_first_token = _optional_floats("first_token_at")
# a turn record's attributes with few distinct values, coded together
TURN_FEW = ("model", "provider", "finish_reason", "status", "http_code", "prefix_change")


def _generated(table: Table) -> Any:
    return table.cached("generated", lambda: _counts("usage.thoughts_token_count")(table)
                        + _counts("usage.candidates_token_count")(table))


def _tokens_per_s(table: Table) -> Any:
    return tokens_per_second(_generated(table), _first_token(table), _turn_finished(table))


def _metrics(table: Table) -> Any:
    from .turn_metrics import TurnArrays, TurnMetrics

    def make() -> Any:
        import numpy as np

        codes, rows = table.coded(TURN_FEW)
        pairs: dict[tuple[str, str], int] = {}
        pair_of = [pairs.setdefault((row[0] or "", row[1] or ""), len(pairs)) for row in rows]
        arrays = TurnArrays(
            turn=_ints("turn")(table), started=_started(table), finished=_turn_finished(table),
            input=_counts("usage.prompt_token_count")(table), cached=_counts("usage.cached_content_token_count")(table),
            written=_counts("usage.cache_write_token_count")(table), generated=_generated(table),
            model_calls=_counts("model_calls")(table), context=_counts("context_tokens")(table),
            window=_optional_floats("context_window")(table),
            pair=np.asarray(pair_of, dtype=np.int64)[codes] if rows else np.zeros(0, np.int64), pairs=list(pairs),
            prefix_change=_few(TURN_FEW, "prefix_change")(table))
        return TurnMetrics(table.pricing, arrays)
    return table.cached("metrics", make)


def _metric(name: str) -> Callable[[Table], Any]:
    return lambda table: getattr(_metrics(table), name)


USAGE_INDEX = Column("turn", Kind.INT, _ints("turn"), "0-based turn number")
USAGE = (
    Column("prompt", Kind.TEXT, _values("prompt"), f"at most {PROMPT_CHARS} characters (\"…\" marks a cut)",
           limit=PROMPT_CHARS),
    Column("model", Kind.CATEGORY, _few(TURN_FEW, "model", empty_is_na=True), "NA when unknown"),
    Column("provider", Kind.CATEGORY, _few(TURN_FEW, "provider", empty_is_na=True), "NA when unknown"),
    Column("started", Kind.TIME, _started, "when the prompt was sent"),
    Column("finished", Kind.TIME, _turn_finished, "NaT while running"),
    Column("duration_s", Kind.FLOAT, lambda t: _turn_finished(t) - _started(t), "finished - started"),
    Column("ttft_s", Kind.FLOAT, lambda t: _first_token(t) - _started(t), "time to the first token"),
    Column("output_tokens_per_s", Kind.FLOAT, _tokens_per_s, "(thinking + output) / (finished - first token)"),
    Column("model_calls", Kind.COUNT, _counts("model_calls"), "model requests in the turn"),
    Column("tool_calls", Kind.COUNT, _counts("tool_calls"), "tool executions in the turn"),
    *(Column(t.column, Kind.COUNT, _counts("usage." + t.field), t.meaning) for t in TOKEN_COUNTS),
    Column("cost_usd", Kind.FLOAT, _metric("cost_usd"), "see nbagent.analysis.pricing; NaN: unknown model"),
    _enum_category("finish_reason", FinishReason, doc="FinishReason value", few=TURN_FEW),
    _enum_category("status", TurnStatus, doc="TurnStatus value", few=TURN_FEW),
    Column("error", Kind.TEXT, _texts("error", empty_is_na=True), "NA when empty"),
    Column("http_code", Kind.COUNT, _few_counts(TURN_FEW, "http_code"), "NA when 0"),
    Column("price_source", Kind.CATEGORY, _metric("price_source"),
           "where the price came from: \"genai-prices <version>\", \"override\", \"free\"; NA: unknown"),
    Column("cache_hit_ratio", Kind.FLOAT, _metric("cache_hit_ratio"), "cached / input tokens; NaN without input"),
    Column("cache_saved_usd", Kind.FLOAT, _metric("cache_saved_usd"),
           "cost without prompt caching - cost (writes cost a premium: may be < 0); NaN: unknown price"),
    Column("cache_busted", Kind.BOOL, _metric("cache_busted"),
           "the cache the previous turn built was not reused (see nbagent.analysis.cache)"),
    Column("cache_bust_cause", Kind.CATEGORY, _metric("cache_bust_cause"),
           "the PrefixChange value, \"expired\" or \"unknown\"; NA when not busted",
           tuple(m.value for m in PrefixChange) + (EXPIRED, UNKNOWN)),
    Column("context_tokens", Kind.COUNT, _counts("context_tokens", zero_is_na=True),
           "tokens in context after the turn: last call's input + output; NA when 0"),
    Column("context_window", Kind.COUNT, _metric("context_window"),
           "the model's window (its provider's, else genai-prices'); NA: unknown"),
    Column("context_fill", Kind.FLOAT, _metric("context_fill"),
           "context_tokens / context_window (above 1: overflow); NaN: unknown"),
)


# --- tool calls: one row per call ---------------------------------------------------------

PENDING = "pending"  # the status of a call that has no execution step yet


def _execution(attr: Callable[[Any], Any], missing: Any = None) -> Callable[[Table], list]:
    return lambda t: [missing if c.execution is None else attr(c.execution) for c in t.objs]


TOOL_CALL_INDEX = Column("call", Kind.INT, lambda t: list(range(len(t))), "row number")
TOOL_CALLS = (
    Column("turn", Kind.INT, _ints("turn"), "0-based turn number"),
    Column("call_id", Kind.TEXT, _texts("call_id"), "the provider's call id"),
    Column("name", Kind.CATEGORY, _values("name"), "tool name"),
    Column("arguments", Kind.TEXT, lambda t: [args_json(c.args) for c in t.objs], "JSON of the call's arguments"),
    Column("approval", Kind.CATEGORY, _execution(attrgetter("approval")),
           "ApprovalDecision value, NA if none", tuple(m.value for m in ApprovalDecision)),
    Column("status", Kind.CATEGORY, _execution(attrgetter("status"), PENDING),
           "StepStatus of the execution step, or \"pending\"", tuple(m.value for m in StepStatus) + (PENDING,)),
    Column("duration_s", Kind.FLOAT, lambda t: _floats(t, lambda c: None if c.execution is None
                                                       else c.execution.tool_seconds),
           "how long the tool ran (approval wait excluded)"),
    Column("result_preview", Kind.TEXT, lambda t: [None if c.execution is None else
                                                  shorten([c.execution.content or ""], PREVIEW_CHARS)[0]
                                                  for c in t.objs],
           f"first {PREVIEW_CHARS} characters of the result, NA if pending"),
    Column("error", Kind.TEXT, _execution(lambda s: s.error or None), "NA when empty"),
    Column("variables_changed", Kind.TEXT, _execution(lambda s: changes_line(s.changes) or None),
           "what the code did to the kernel's variables, e.g. \"created by_month (Series, 4 rows); "
           "deleted tmp\"; NA when nothing (or not code)"),
    Column("request_step", Kind.COUNT, lambda t: _floats(t, attrgetter("request_step")),
           "step_index of the model step that asked for it"),
    Column("result_step", Kind.COUNT, _execution(attrgetter("step_index"), math.nan),
           "step_index of the execution step"),
)


def column_table(index: Column, columns: Sequence[Column]) -> str:
    """The columns as a reStructuredText table (for docstrings and docs)."""
    rows = [(c.name, c.kind.value, c.doc) for c in (index, *columns)]
    w = [max(len(r[i]) for r in rows + [("column", "dtype", "meaning")]) for i in range(3)]
    line = "  ".join("=" * x for x in w)
    fmt = "  ".join(f"{{:<{x}}}" for x in w)
    body = [fmt.format(*r).rstrip() for r in rows]
    return "\n".join([line, fmt.format("column", "dtype", "meaning").rstrip(), line, *body, line])
