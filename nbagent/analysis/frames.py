"""History, usage and tool calls as pandas DataFrames.

pandas (and numpy) are imported inside the functions, so ``import nbagent``
stays light; a missing pandas raises ``NbagentError(kind="config")``.
:func:`nbagent.analysis.sessions.export_frames` needs neither: ``Conversation.save`` embeds its output.

Conventions for every frame
---------------------------
- timestamps are tz-aware UTC (``datetime64[ns, UTC]``, from epoch seconds
  rounded to the microsecond), ``NaT`` when unknown;
- durations are float seconds in columns ending in ``_s`` (NaN when unknown);
- enumerations are ``category`` columns whose categories are every value of
  the enum (in enum order), so ``value_counts()`` shows zero counts too;
- token and other counts are nullable ``Int64`` (``<NA>`` where there is no
  count, e.g. a step that carries no usage);
- text is the nullable ``string`` dtype; ``error``, ``tool_names`` and an
  absent ``http_code`` (0) are ``<NA>`` rather than empty.

``history_frame(steps)`` -- one row per step; index ``step_index`` (the
step's position in the whole trajectory, unique across turns):

==================  ===================  =======================================
column              dtype                meaning
==================  ===================  =======================================
turn                int64                0-based absolute turn number
type                category             StepType value
source              category             StepSource value
target              category             StepTarget value
status              category             StepStatus value
content             string               full text of the step
thinking            string               full reasoning text
tool_names          string               comma-joined tool call names, NA if none
prompt_tokens       Int64                usage: every input token (NA: no usage)
cached_tokens       Int64                usage: cache reads among them
cache_write_tokens  Int64                metadata["cache_write_tokens"] (0 if absent)
thinking_tokens     Int64                usage: reasoning tokens
output_tokens       Int64                usage: generated non-thinking tokens
total_tokens        Int64                usage: provider's total
http_code           Int64                NA when 0
error               string               NA when empty
created             datetime64[ns, UTC]  created_at
finished            datetime64[ns, UTC]  finished_at, NaT while running
duration_s          float64              finished - created
==================  ===================  =======================================

``usage_frame(records, pricing=None)`` -- one row per turn from the
never-trimmed ledger; index ``turn``:

====================  ===================  =====================================
column                dtype                meaning
====================  ===================  =====================================
prompt                string               at most 80 characters ("…" marks a cut)
model                 category             NA when unknown
provider              category             NA when unknown
started               datetime64[ns, UTC]
finished              datetime64[ns, UTC]  NaT while running
duration_s            float64              finished - started
ttft_s                float64              time to the first token
output_tokens_per_s   float64              (thinking + output) / (finished - first token)
model_calls           Int64
tool_calls            Int64
input_tokens          Int64                every input token (cached + written included)
cached_tokens         Int64                cache reads
cache_write_tokens    Int64                tokens written to a prompt cache
thinking_tokens       Int64
output_tokens         Int64                generated tokens other than thinking
total_tokens          Int64                provider's total (sums to total_usage)
cost_usd              float64              see nbagent.analysis.pricing; NaN: unknown model
finish_reason         category             FinishReason values (+ any other seen)
status                category             running/done/waiting/error/interrupted
error                 string               NA when empty
http_code             Int64                NA when 0
====================  ===================  =====================================

``tool_calls_frame(steps)`` -- one row per tool call the model asked for,
paired by call id with the step that executed it (calls whose execution
step has no model request left in history, e.g. after trimming, get a row
too); a ``RangeIndex`` named ``call``:

==============  ========  =====================================================
column          dtype     meaning
==============  ========  =====================================================
turn            int64
call_id         string
name            category  tool name
arguments       string    JSON of the call's arguments
approval        category  auto/approved/denied/policy_denied/manual, NA if none
status          category  StepStatus of the execution step, or "pending" when
                          no execution step exists yet
duration_s      float64   metadata["duration"], else finished - created
result_preview  string    first 200 characters of the result, NA if pending
error           string    NA when empty
request_step    Int64     step_index of the model step that asked for it
result_step     Int64     step_index of the execution step
==============  ========  =====================================================

``load_sessions(paths_or_glob)`` (in ``nbagent.analysis.sessions``) returns the usage columns for many saved
sessions with ``session_id`` (category: the conversation id), ``path``
(string) and ``turn`` (int64) as the first columns and a fresh
``RangeIndex`` (turn numbers repeat across sessions). The same conversation
saved to two files appears twice; ``path`` tells them apart.

``usage_summary(records)`` (in ``nbagent.analysis.report``) gives a ``UsageSummary`` (totals, cost,
mean time to first token and tokens/s; a table in notebooks) and
``plot_usage(records)`` a matplotlib ``Figure``. ``export_frames(steps,
records)`` is what ``Conversation.save`` stores under ``"frames"``: the same
frames as JSON rows, so a saved session can be analysed without the kernel
that produced it (``load_sessions`` reads it when a file has no ledger).

Examples::

    df = conv.usage_df()
    df.groupby("model", observed=True)[["total_tokens", "cost_usd"]].sum()
    week = nbagent.load_sessions("~/chats/*.json")
    week[week.started >= pd.Timestamp.now(tz="UTC") - pd.Timedelta(days=7)] \
        .groupby("model", observed=True).cost_usd.sum()
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from itertools import chain, repeat
from operator import attrgetter
from typing import Any, Iterable, Mapping

from ..core.errors import NbagentError
from ..core.ledger import TurnRecord
from ..core.steps import (
    FinishReason,
    Step,
    StepSource,
    StepStatus,
    StepTarget,
    StepType,
)

__all__ = [
    "history_frame",
    "usage_frame",
    "tool_calls_frame",
    "HISTORY_COLUMNS",
    "USAGE_COLUMNS",
    "TOOL_CALL_COLUMNS",
]

HISTORY_COLUMNS = (
    "turn", "type", "source", "target", "status", "content", "thinking", "tool_names",
    "prompt_tokens", "cached_tokens", "cache_write_tokens", "thinking_tokens", "output_tokens",
    "total_tokens", "http_code", "error", "created", "finished", "duration_s",
)
USAGE_COLUMNS = (
    "prompt", "model", "provider", "started", "finished", "duration_s", "ttft_s",
    "output_tokens_per_s", "model_calls", "tool_calls", "input_tokens", "cached_tokens",
    "cache_write_tokens", "thinking_tokens", "output_tokens", "total_tokens", "cost_usd",
    "finish_reason", "status", "error", "http_code",
)
TOOL_CALL_COLUMNS = (
    "turn", "call_id", "name", "arguments", "approval", "status", "duration_s",
    "result_preview", "error", "request_step", "result_step",
)

TURN_STATUSES = ("running", "done", "waiting", "error", "interrupted")
APPROVALS = ("auto", "approved", "denied", "policy_denied", "manual")
PENDING = "pending"
PROMPT_CHARS = 80
PREVIEW_CHARS = 200
FORMAT = "nbagent.session"
EXPORT_VERSION = 1


# --- helpers ---------------------------------------------------------------------------


def _pandas():
    try:
        import numpy as np
        import pandas as pd
    except ImportError:  # pragma: no cover - exercised only without pandas
        raise NbagentError(
            "DataFrames need pandas: pip install 'nbagent[frames]'", kind="config"
        ) from None
    return pd, np


def _shorten(text: str, limit: int) -> str:
    if len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def _shorten_all(texts: list, limit: int) -> list:
    """Cut each text to ``limit`` characters (the last one an ellipsis)."""
    cut = limit - 1
    return [t if len(t) <= limit else t[:cut] + "…" for t in texts]


def _categorical(pd, np, values: list, known: Iterable[str] = ()) -> Any:
    """A Categorical from str / str-Enum values; "" and None are NA.

    Categories are ``known`` (e.g. every enum value, in enum order) followed
    by any other value seen, sorted. Codes come from one dict lookup per row.
    """
    cats = [str(c) for c in known]
    code: dict = {c: i for i, c in enumerate(cats)}
    seen = set(values)
    seen.discard(None)
    seen.discard("")
    missing = [v for v in seen if v not in code]  # str-Enum members hash like their value
    if missing:
        names = {v: str(_enum_value(v)) for v in missing}
        for name in sorted(set(names.values()).difference(code)):
            code[name] = len(cats)
            cats.append(name)
        for v, name in names.items():
            code[v] = code[name]
    codes = np.fromiter(map(code.get, values, repeat(-1)), dtype=np.int32, count=len(values))
    return pd.Categorical.from_codes(codes, categories=cats)


def _enum_columns(pd, np, objs: list, names: tuple, enums: tuple) -> list:
    """Several enum attributes as Categoricals, their codes read in one C-level pass.

    Members of different enums are distinct objects, so one ``id`` -> code
    table serves every column.
    """
    n, k = len(objs), len(names)
    by_id = {}
    for enum_cls in enums:
        by_id.update({id(m): i for i, m in enumerate(enum_cls)})
    flat = np.fromiter(
        map(by_id.get, map(id, chain.from_iterable(map(attrgetter(*names), objs))), repeat(-1)),
        dtype=np.int32,
        count=n * k,
    ).reshape(n, k)
    out = []
    for j, (name, enum_cls) in enumerate(zip(names, enums)):
        codes = np.ascontiguousarray(flat[:, j])
        cats = [m.value for m in enum_cls]
        if (codes < 0).any():  # a plain string or a foreign value: general path
            out.append(_categorical(pd, np, [getattr(o, name) for o in objs], cats))
        else:
            out.append(pd.Categorical.from_codes(codes, categories=cats))
    return out


def _string_array(pd, np, values: list) -> Any:
    """A ``string`` array from a list of str (None -> NA)."""
    obj = np.empty(len(values), dtype=object)
    obj[:] = values
    try:
        return pd.arrays.StringArray(obj)
    except (TypeError, ValueError):  # non-str values: let pandas convert them
        return pd.array(obj, dtype="string")


def _string_na_empty(pd, np, values: list) -> Any:
    """A ``string`` array where "" (and None) become NA."""
    obj = np.empty(len(values), dtype=object)
    obj[:] = values
    empty = obj == ""
    if empty.any():
        obj[empty] = None
    try:
        return pd.arrays.StringArray(obj)
    except (TypeError, ValueError):
        return pd.array(obj, dtype="string")


def _int_array(pd, np, values: list, mask: Any = None) -> Any:
    data = np.asarray(values, dtype=np.int64).reshape(-1)
    if mask is None:
        mask = np.zeros(len(data), dtype=bool)
    return pd.arrays.IntegerArray(data, mask)


def _float_or_nan(values: list) -> list:
    return [math.nan if v is None else v for v in values]


def _utc(pd, np, seconds: Any) -> Any:
    """Epoch seconds (NaN = unknown) as tz-aware UTC timestamps, rounded to the
    microsecond (a float epoch carries no more, and 1.1 should not read 1.0999999)."""
    us = np.round(np.asarray(seconds, dtype=np.float64) * 1e6)
    with np.errstate(invalid="ignore"):
        nat = ~(np.abs(us) < 9e15)  # NaN, inf, or beyond datetime64[ns] (year 2255)
    ns = np.where(nat, 0.0, us).astype(np.int64) * 1000
    values = ns.view("datetime64[ns]")
    if nat.any():
        values[nat] = np.datetime64("NaT")
    return pd.DatetimeIndex(values).tz_localize("UTC")


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError, TypeError):  # a nonsense time: leave it out
        return None


def _from_iso(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and math.isnan(value) else float(value)
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _none_if_nan(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


# --- history ---------------------------------------------------------------------------


def history_frame(steps: list[Step]):
    """One row per step, index ``step_index``; columns in the module docstring."""
    pd, np = _pandas()
    steps = list(steps)
    n = len(steps)
    usages = [s.usage_metadata for s in steps]
    no_usage = np.fromiter((u is None for u in usages), dtype=bool, count=n)
    has_usage = ~no_usage
    with_usage = [u for u in usages if u is not None]
    prompt, cached, thinking, output, total = _int_fields(np, with_usage, _USAGE_FIELDS)

    def usage_col(values):
        data = np.zeros(n, dtype=np.int64)
        data[has_usage] = values
        return pd.arrays.IntegerArray(data, no_usage.copy())

    metas = [s.metadata for s, u in zip(steps, usages) if u is not None]
    try:
        writes = np.fromiter(map(dict.get, metas, repeat("cache_write_tokens"), repeat(0)), np.int64, len(metas))
    except TypeError:  # None values or a metadata that is not a dict
        writes = [int((md or {}).get("cache_write_tokens") or 0) for md in metas]
    calls = [s.tool_calls for s in steps]
    tool_names: list = [None] * n
    for i in np.flatnonzero(np.fromiter(map(bool, calls), dtype=bool, count=n)).tolist():
        tool_names[i] = ",".join([c.name for c in calls[i]])
    kinds, sources, targets, statuses = _enum_columns(
        pd, np, steps, ("type", "source", "target", "status"), (StepType, StepSource, StepTarget, StepStatus)
    )

    step_index, turn, http = _int_fields(np, steps, ("step_index", "turn", "http_code"))
    created = np.fromiter((s.created_at for s in steps), dtype=np.float64, count=n)
    finished = np.fromiter(
        (math.nan if s.finished_at is None else s.finished_at for s in steps), dtype=np.float64, count=n
    )
    columns = {
        "turn": np.ascontiguousarray(turn),
        "type": kinds,
        "source": sources,
        "target": targets,
        "status": statuses,
        "content": _string_array(pd, np, [s.content for s in steps]),
        "thinking": _string_array(pd, np, [s.thinking for s in steps]),
        "tool_names": _string_array(pd, np, tool_names),
        "prompt_tokens": usage_col(prompt),
        "cached_tokens": usage_col(cached),
        "cache_write_tokens": usage_col(writes),
        "thinking_tokens": usage_col(thinking),
        "output_tokens": usage_col(output),
        "total_tokens": usage_col(total),
        "http_code": pd.arrays.IntegerArray(np.ascontiguousarray(http), http == 0),
        "error": _string_na_empty(pd, np, [s.error for s in steps]),
        "created": _utc(pd, np, created),
        "finished": _utc(pd, np, finished),
        "duration_s": finished - created,
    }
    index = pd.Index(np.ascontiguousarray(step_index), name="step_index")
    return pd.DataFrame(columns, index=index, copy=False)


# --- usage -----------------------------------------------------------------------------


def _rates(np, model_cat, provider_cat, pricing: Mapping | None):
    """Per-row (input, cached, write, output) USD per token; NaN rows for unknown models.

    Each distinct (model, provider) pair is priced once.
    """
    from .pricing import get_price

    n = len(model_cat)
    if not n:
        return np.zeros((0, 4), dtype=np.float64)
    mcats, pcats = list(model_cat.categories), list(provider_cat.categories)
    pair = model_cat.codes.astype(np.int64) * (len(pcats) + 1) + provider_cat.codes + 1
    uniq, inverse = np.unique(pair, return_inverse=True)
    table = np.empty((len(uniq), 4), dtype=np.float64)
    for k, key in enumerate(uniq.tolist()):
        mi, pi = divmod(key, len(pcats) + 1)
        model = mcats[mi] if mi >= 0 else ""
        provider = pcats[pi - 1] if pi > 0 else ""
        price = get_price(model, provider, pricing)
        table[k] = (math.nan,) * 4 if price is None else (
            price.input / 1e6, price.cached_rate / 1e6, price.cache_write_rate / 1e6, price.output / 1e6
        )
    return table[inverse.reshape(-1)]


_USAGE_FIELDS = (
    "prompt_token_count", "cached_content_token_count", "thoughts_token_count",
    "candidates_token_count", "total_token_count",
)
_RECORD_INT_FIELDS = ("turn", "cache_write_tokens", "model_calls", "tool_calls", "http_code")


def _int_fields(np, objs: list, names: tuple) -> Any:
    """A (len(names), len(objs)) int64 array of attributes, read in one C-level pass.

    ``None`` counts as 0 (slow path, only when some attribute is None).
    """
    k, n = len(names), len(objs)
    if k == 1:  # attrgetter of one name returns the value, not a tuple
        names = names * 2
        return _int_fields(np, objs, names)[:1]
    try:
        flat = np.fromiter(chain.from_iterable(map(attrgetter(*names), objs)), dtype=np.int64, count=k * n)
    except TypeError:
        flat = np.fromiter(
            (int(v or 0) for o in objs for v in attrgetter(*names)(o)), dtype=np.int64, count=k * n
        )
    return flat.reshape(n, k).T


def usage_frame(records: list[TurnRecord], pricing: Mapping | None = None):
    """One row per turn, index ``turn``; columns in the module docstring.

    ``pricing`` maps model names to a ``Price``, a mapping with
    ``input``/``output`` (and optional ``cached_input``/``cache_write``) or a
    tuple, in USD per 1M tokens; it wins over ``set_price`` and ``PRICES``.
    """
    pd, np = _pandas()
    records = list(records)
    n = len(records)
    usages = [r.usage for r in records]

    def floats(values):
        return np.fromiter(values, dtype=np.float64, count=n)

    def counts(data):
        return pd.arrays.IntegerArray(np.ascontiguousarray(data), np.zeros(n, dtype=bool))

    inp, cached, thinking, output, total = _int_fields(np, usages, _USAGE_FIELDS)
    turn, writes, model_calls, tool_calls, http = _int_fields(np, records, _RECORD_INT_FIELDS)

    started = floats(r.started_at for r in records)
    finished = floats(math.nan if r.finished_at is None else r.finished_at for r in records)
    first = floats(math.nan if r.first_token_at is None else r.first_token_at for r in records)
    generated = (thinking + output).astype(np.float64)
    span = finished - first
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where((span > 0) & (generated > 0), generated / span, np.nan)

    model_cat = _categorical(pd, np, [r.model for r in records])
    provider_cat = _categorical(pd, np, [r.provider for r in records])
    rates = _rates(np, model_cat, provider_cat, pricing)
    uncached = np.maximum(inp - cached - writes, 0)
    cost = uncached * rates[:, 0] + cached * rates[:, 1] + writes * rates[:, 2] + (output + thinking) * rates[:, 3]

    columns = {
        "prompt": _string_array(pd, np, _shorten_all([r.prompt or "" for r in records], PROMPT_CHARS)),
        "model": model_cat,
        "provider": provider_cat,
        "started": _utc(pd, np, started),
        "finished": _utc(pd, np, finished),
        "duration_s": finished - started,
        "ttft_s": first - started,
        "output_tokens_per_s": rate,
        "model_calls": counts(model_calls),
        "tool_calls": counts(tool_calls),
        "input_tokens": counts(inp),
        "cached_tokens": counts(cached),
        "cache_write_tokens": counts(writes),
        "thinking_tokens": counts(thinking),
        "output_tokens": counts(output),
        "total_tokens": counts(total),
        "cost_usd": cost,
        "finish_reason": _categorical(pd, np, [r.finish_reason for r in records], [m.value for m in FinishReason]),
        "status": _categorical(pd, np, [r.status for r in records], TURN_STATUSES),
        "error": _string_na_empty(pd, np, [r.error for r in records]),
        "http_code": pd.arrays.IntegerArray(np.ascontiguousarray(http), http == 0),
    }
    index = pd.Index(turn, name="turn")
    return pd.DataFrame(columns, index=index, copy=False)


def _enum_value(v: Any) -> Any:
    if v is None or v == "":
        return None
    return v.value if hasattr(v, "value") else v


# --- tool calls ------------------------------------------------------------------------


def _is_execution(s: Step) -> bool:
    return s.target == StepTarget.ENVIRONMENT and s.type == StepType.TOOL_CALL and bool(s.tool_calls)


def _tool_call_rows(steps: list[Step]) -> list[tuple]:
    """(turn, call_id, name, args, request_step_index, exec_step) per call, in history order."""
    steps = [s for s in steps if s.tool_calls]  # only these can request or run a call
    executions: dict[str, Step] = {}
    anonymous: dict[tuple, list[Step]] = {}
    requested: set[str] = set()
    for s in steps:
        if _is_execution(s):
            call = s.tool_calls[0]
            if call.id:
                executions[call.id] = s
            else:
                anonymous.setdefault((s.turn, call.name), []).append(s)
        elif s.source == StepSource.MODEL:
            requested.update(c.id for c in s.tool_calls if c.id)
    rows = []
    for s in steps:
        if s.source == StepSource.MODEL and s.tool_calls:
            for c in s.tool_calls:
                if c.id:
                    ex = executions.get(c.id)
                else:
                    queue = anonymous.get((s.turn, c.name))
                    ex = queue.pop(0) if queue else None
                rows.append((s.turn, c.id, c.name, c.args, s.step_index, ex))
        elif _is_execution(s):
            call = s.tool_calls[0]
            if call.id and call.id not in requested:  # its request was trimmed away
                rows.append((s.turn, call.id, call.name, call.args, None, s))
            elif not call.id:  # still queued: no model request claimed it
                queue = anonymous.get((s.turn, call.name)) or []
                if any(x is s for x in queue):
                    queue[:] = [x for x in queue if x is not s]
                    rows.append((s.turn, call.id, call.name, call.args, None, s))
    return rows


_ARGS_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def _args_json(args: Any) -> str:
    try:
        return _ARGS_ENCODER.encode(args)
    except (TypeError, ValueError):  # e.g. circular references
        return json.dumps(str(args))


def _exec_duration(ex: Step | None) -> float | None:
    if ex is None:
        return None
    d = ex.metadata.get("duration") if ex.metadata else None
    if d is not None:
        try:
            return float(d)
        except (TypeError, ValueError):
            pass
    return ex.duration


def tool_calls_frame(steps: list[Step]):
    """One row per tool call, ``RangeIndex`` named ``call``; columns in the module docstring."""
    pd, np = _pandas()
    rows = _tool_call_rows(list(steps))
    execs = [r[5] for r in rows]
    statuses = [PENDING if ex is None else _enum_value(ex.status) for ex in execs]
    approvals = [(ex.metadata.get("approval") if ex is not None and ex.metadata else None) for ex in execs]
    req = [r[4] for r in rows]
    res = [None if ex is None else ex.step_index for ex in execs]
    columns = {
        "turn": np.asarray([r[0] for r in rows], dtype=np.int64),
        "call_id": pd.array([r[1] for r in rows], dtype="string"),
        "name": _categorical(pd, np, [r[2] for r in rows]),
        "arguments": pd.array([_args_json(r[3]) for r in rows], dtype="string"),
        "approval": _categorical(pd, np, approvals, APPROVALS),
        "status": _categorical(pd, np, statuses, [m.value for m in StepStatus] + [PENDING]),
        "duration_s": np.asarray(_float_or_nan([_exec_duration(ex) for ex in execs]), dtype=np.float64),
        "result_preview": pd.array(
            [None if ex is None else _shorten(ex.content or "", PREVIEW_CHARS) for ex in execs], dtype="string"
        ),
        "error": _string_na_empty(pd, np, ["" if ex is None else ex.error for ex in execs]),
        "request_step": _int_array(pd, np, [0 if v is None else v for v in req], np.array([v is None for v in req], dtype=bool)),
        "result_step": _int_array(pd, np, [0 if v is None else v for v in res], np.array([v is None for v in res], dtype=bool)),
    }
    return pd.DataFrame(columns, index=pd.RangeIndex(len(rows), name="call"), copy=False)
