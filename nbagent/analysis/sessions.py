"""Frames in saved sessions, and usage across many saved sessions (``load_sessions``)."""

from __future__ import annotations

import glob as _glob
import json
import os
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import NbagentError
from .frames import (EXPORT_VERSION, FORMAT, PENDING, PREVIEW_CHARS, PROMPT_CHARS, _args_json,
                     _enum_value, _exec_duration, _from_iso, _iso, _none_if_nan, _pandas, _shorten,
                     _tool_call_rows, usage_frame)
from ..core.ledger import TurnRecord
from ..core.steps import Step, UsageMetadata


def _usage_row(r: TurnRecord, price) -> dict:
    u = r.usage
    writes = r.cache_write_tokens or 0
    if price is None:
        cost = None
    else:
        cost = price.cost(u.prompt_token_count, u.cached_content_token_count, writes,
                          u.thoughts_token_count, u.candidates_token_count)
    return {
        "turn": r.turn,
        "prompt": _shorten(r.prompt or "", PROMPT_CHARS),
        "model": r.model or None,
        "provider": r.provider or None,
        "started": _iso(r.started_at),
        "finished": _iso(r.finished_at),
        "duration_s": r.duration,
        "ttft_s": r.time_to_first_token,
        "output_tokens_per_s": r.output_tokens_per_s,
        "model_calls": r.model_calls,
        "tool_calls": r.tool_calls,
        "input_tokens": u.prompt_token_count,
        "cached_tokens": u.cached_content_token_count,
        "cache_write_tokens": writes,
        "thinking_tokens": u.thoughts_token_count,
        "output_tokens": u.candidates_token_count,
        "total_tokens": u.total_token_count,
        "cost_usd": cost,
        "finish_reason": _enum_value(r.finish_reason),
        "status": r.status or None,
        "error": r.error or None,
        "http_code": r.http_code or None,
    }


def _history_row(s: Step) -> dict:
    u = s.usage_metadata
    return {
        "step_index": s.step_index,
        "turn": s.turn,
        "type": _enum_value(s.type),
        "source": _enum_value(s.source),
        "target": _enum_value(s.target),
        "status": _enum_value(s.status),
        "tool_names": ",".join(c.name for c in s.tool_calls) or None,
        "prompt_tokens": None if u is None else u.prompt_token_count,
        "cached_tokens": None if u is None else u.cached_content_token_count,
        "cache_write_tokens": None if u is None else int((s.metadata or {}).get("cache_write_tokens") or 0),
        "thinking_tokens": None if u is None else u.thoughts_token_count,
        "output_tokens": None if u is None else u.candidates_token_count,
        "total_tokens": None if u is None else u.total_token_count,
        "http_code": s.http_code or None,
        "error": s.error or None,
        "created": _iso(s.created_at),
        "finished": _iso(s.finished_at),
        "duration_s": s.duration,
    }


def export_frames(steps: list[Step], records: list[TurnRecord], pricing: Mapping | None = None) -> dict:
    """The frames as JSON-safe records (no pandas needed), for ``Conversation.save``.

    ``{"version", "prices_date", "usage": [...], "tool_calls": [...], "history": [...]}``:
    each a list of row dicts with the frame's columns (the index as a column),
    timestamps as ISO 8601 UTC strings and missing values as ``null``.
    ``history`` leaves out ``content`` and ``thinking``: the saved ``steps``
    hold them in full.
    """
    from .pricing import PRICES_DATE, get_price

    prices: dict[tuple, Any] = {}
    usage = []
    for r in records:
        key = (r.model, r.provider)
        if key not in prices:
            prices[key] = get_price(r.model or "", r.provider or "", pricing)
        usage.append(_usage_row(r, prices[key]))
    steps = list(steps)
    calls = []
    for turn, call_id, name, args, req, ex in _tool_call_rows(steps):
        calls.append({
            "call": len(calls),
            "turn": turn,
            "call_id": call_id,
            "name": name,
            "arguments": _args_json(args),
            "approval": (ex.metadata.get("approval") if ex is not None and ex.metadata else None),
            "status": PENDING if ex is None else _enum_value(ex.status),
            "duration_s": _none_if_nan(_exec_duration(ex)),
            "result_preview": None if ex is None else _shorten(ex.content or "", PREVIEW_CHARS),
            "error": None if ex is None else (ex.error or None),
            "request_step": req,
            "result_step": None if ex is None else ex.step_index,
        })
    return {
        "version": EXPORT_VERSION,
        "prices_date": PRICES_DATE,
        "usage": usage,
        "tool_calls": calls,
        "history": [_history_row(s) for s in steps],
    }


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _record_from_dict(d: Any) -> TurnRecord:
    """A TurnRecord from ``TurnRecord.to_dict()`` output, checking every type."""
    if not isinstance(d, Mapping):
        raise TypeError(f"a turn record must be an object, got {type(d).__name__}")
    usage = d.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        raise TypeError("a turn record's usage must be an object")
    reason = d.get("finish_reason")
    return TurnRecord(
        turn=int(d["turn"]),
        prompt=str(d.get("prompt") or ""),
        model=str(d.get("model") or ""),
        provider=str(d.get("provider") or ""),
        started_at=float(d.get("started_at") or 0.0),
        finished_at=_opt_float(d.get("finished_at")),
        first_token_at=_opt_float(d.get("first_token_at")),
        usage=UsageMetadata.from_dict(usage) or UsageMetadata(),
        cache_write_tokens=int(d.get("cache_write_tokens") or 0),
        model_calls=int(d.get("model_calls") or 0),
        tool_calls=int(d.get("tool_calls") or 0),
        finish_reason=None if reason is None else str(reason),
        status=str(d.get("status") or "done"),
        error=str(d.get("error") or ""),
        http_code=int(d.get("http_code") or 0),
    )


def _record_from_usage_row(row: Mapping) -> TurnRecord:
    started = _from_iso(row.get("started")) or 0.0
    ttft = _none_if_nan(row.get("ttft_s"))
    return TurnRecord(
        turn=int(row["turn"]),
        prompt=row.get("prompt") or "",
        model=row.get("model") or "",
        provider=row.get("provider") or "",
        started_at=started,
        finished_at=_from_iso(row.get("finished")),
        first_token_at=None if ttft is None else started + float(ttft),
        usage=UsageMetadata(
            prompt_token_count=int(row.get("input_tokens") or 0),
            candidates_token_count=int(row.get("output_tokens") or 0),
            total_token_count=int(row.get("total_tokens") or 0),
            cached_content_token_count=int(row.get("cached_tokens") or 0),
            thoughts_token_count=int(row.get("thinking_tokens") or 0),
        ),
        cache_write_tokens=int(row.get("cache_write_tokens") or 0),
        model_calls=int(row.get("model_calls") or 0),
        tool_calls=int(row.get("tool_calls") or 0),
        finish_reason=row.get("finish_reason"),
        status=row.get("status") or "done",
        error=row.get("error") or "",
        http_code=int(row.get("http_code") or 0),
    )


def _read_session(path: Path) -> tuple[str, list[TurnRecord]]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise NbagentError(f"cannot read session file {path}: {exc.strerror or exc}", kind="io") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise NbagentError(f"session file {path} is not valid JSON: {exc}", kind="io") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise NbagentError(f"{path} is not an nbagent session file (no \"format\": \"{FORMAT}\")", kind="io")
    session_id = str(data.get("conversation_id") or path.stem)
    try:
        turns = data.get("turns")
        if isinstance(turns, list):
            return session_id, [_record_from_dict(t) for t in turns]
        usage = (data.get("frames") or {}).get("usage")
        if isinstance(usage, list):
            return session_id, [_record_from_usage_row(row) for row in usage]
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise NbagentError(f"session file {path} has a corrupt turn ledger: {exc}", kind="io") from None
    raise NbagentError(f"session file {path} has no turn ledger (\"turns\")", kind="io")


_GLOB_CHARS = frozenset("*?[")


def _expand(paths_or_glob: Any) -> list[Path]:
    items = [paths_or_glob] if isinstance(paths_or_glob, (str, os.PathLike)) else list(paths_or_glob)
    out: list[Path] = []
    for item in items:
        text = os.path.expanduser(os.fspath(item))
        if _GLOB_CHARS.intersection(text):
            out.extend(Path(p) for p in sorted(_glob.glob(text, recursive=True)) if os.path.isfile(p))
        elif os.path.isdir(text):
            out.extend(sorted(Path(text).glob("*.json")))
        else:
            out.append(Path(text))
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def load_sessions(paths_or_glob: Any, pricing: Mapping | None = None):
    """One usage DataFrame across saved sessions.

    ``paths_or_glob`` is a path, a glob pattern (``"sessions/*.json"``,
    ``"**/*.json"``), a directory (its ``*.json``) or a list of those. Rows
    are the turns of every session (from the ``turns`` ledger, or from
    ``frames["usage"]`` when a file has no ledger), with ``session_id``
    (the conversation id), ``path`` and ``turn`` first. A pattern that
    matches nothing gives an empty frame; a missing or corrupt file raises
    ``NbagentError(kind="io")`` naming it.
    """
    pd, np = _pandas()
    records: list[TurnRecord] = []
    session_ids: list[str] = []
    file_paths: list[str] = []
    for path in _expand(paths_or_glob):
        sid, recs = _read_session(path)
        records.extend(recs)
        session_ids.extend([sid] * len(recs))
        file_paths.extend([str(path)] * len(recs))
    df = usage_frame(records, pricing=pricing)
    turn = df.index.to_numpy()
    df = df.reset_index(drop=True)
    df.insert(0, "turn", turn)
    df.insert(0, "path", pd.array(file_paths, dtype="string"))
    df.insert(0, "session_id", pd.Categorical(session_ids, categories=list(dict.fromkeys(session_ids))))
    return df
