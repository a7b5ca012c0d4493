"""Gemini CLI session logs (``~/.gemini/tmp/<project hash>/chats/session-*.jsonl``): a record a line.

The first record names the session (``sessionId``, ``projectHash``, ``startTime``); then one record
per message. Usage is in ``type: "gemini"`` records' ``tokens`` (``input``, ``output``, ``cached``,
``thoughts``, ``tool``, ``total``), counted as ccusage 20 counts them (``adapter/gemini``): a record
rewritten under the same ``id`` counts once, as its last version, in its first's place; the model is
the record's or the latest any record named (none: not counted); an all-zero count is no call.
``input`` includes the cached tokens when ``total`` is the sum of the others without them; the
``tool`` tokens are input; ``thoughts``, and what ``total`` holds beyond the known kinds, are thinking
(output when there is none). Whole-JSON ``.json`` chats and ``stats`` records are not read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .log import AgentCall, AgentLog, iso_seconds, unreadable

SOURCE = "gemini-cli"
PROVIDER = "google"
MESSAGE_TYPES = frozenset(("user", "gemini", "info", "error", "warning"))
_ALIASES = {"input": ("input", "prompt", "input_tokens", "prompt_tokens"),
            "output": ("output", "candidates", "output_tokens", "candidates_tokens"),
            "cached": ("cached", "cached_tokens"),
            "thoughts": ("thoughts", "reasoning", "thoughts_tokens", "reasoning_tokens"),
            "tool": ("tool", "tool_tokens")}


def recognises(record: dict) -> bool:
    """Whether a log's first record is Gemini CLI's (its session header or a message)."""
    if "projectHash" in record and "sessionId" in record:
        return True
    return record.get("type") in MESSAGE_TYPES and "content" in record and "message" not in record


def read(path: Path, records: Iterable[tuple[bytes, Any]]) -> AgentLog:
    """The calls of one session log; ``records`` gives each line with its parsed value (None: not JSON)."""
    log = AgentLog(SOURCE, path, path.stem, "")
    calls: list[AgentCall] = []
    by_id: dict[str, int] = {}
    model, prompt = "", ""
    for _, record in records:
        if not isinstance(record, dict):
            log.skipped[unreadable(record)] += 1
            continue
        log.session_id = _text(record.get("sessionId")) or _text(record.get("session_id")) or log.session_id
        log.project = log.project or _text(record.get("projectHash"))
        model = _text(record.get("model")) or model
        kind = record.get("type")
        if kind == "user":
            prompt = _prompt(record.get("content")) or prompt
        if kind != "gemini" or not isinstance(record.get("tokens"), dict):
            continue
        call = _call(record, model, prompt, log)
        if call is None:
            continue
        key = _text(record.get("id"))
        if key and key in by_id:
            calls[by_id[key]] = call
        else:
            if key:
                by_id[key] = len(calls)
            calls.append(call)
    log.calls = calls
    log.project = log.project or path.parent.parent.name
    return log


def _call(record: dict, model: str, prompt: str, log: AgentLog) -> AgentCall | None:
    tokens = record["tokens"]
    n = {kind: next((v for v in map(_count, (tokens.get(a) for a in names)) if v is not None), 0)
         for kind, names in _ALIASES.items()}
    given_total = _count(tokens.get("total", tokens.get("total_tokens")))
    inclusive = n["input"] + n["output"] + n["thoughts"] + n["tool"]
    fresh = n["input"]
    if n["cached"] and given_total == inclusive and given_total != inclusive + n["cached"]:
        fresh -= min(n["input"], n["cached"])  # the input count includes the cached tokens
    fresh += n["tool"]
    output, thinking = n["output"], n["thoughts"]
    total = given_total if given_total is not None else fresh + output + n["cached"] + thinking
    missing = max(total - (fresh + output + n["cached"] + thinking), 0)
    if output == 0:
        output = missing
    else:
        thinking += missing
    if not (fresh or output or n["cached"] or thinking) or not model:
        if model == "" and (fresh or output or n["cached"] or thinking):
            log.skipped["no model"] += 1
        return None
    at = iso_seconds(record.get("timestamp")) or iso_seconds(record.get("created_at"))
    if at is None:
        log.skipped["no timestamp"] += 1
        return None
    calls = record.get("toolCalls")
    return AgentCall(at, model, PROVIDER, input_tokens=fresh + n["cached"], cached_tokens=n["cached"],
                     output_tokens=output, thinking_tokens=thinking,
                     tool_calls=len(calls) if isinstance(calls, list) else 0, prompt=prompt,
                     message_id=_text(record.get("id")) or None)


def _count(value: Any) -> int | None:
    """A token count as ccusage reads it: any finite JSON number, truncated, negatives as 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return max(int(value), 0)


def _prompt(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()[:200]
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return " ".join(t for t in texts if isinstance(t, str)).strip()[:200]
    return ""


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
