"""Codex session logs (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``): ``{"timestamp", "type", "payload"}`` a line.

Usage is in ``event_msg`` records of payload type ``token_count``, counted as ccusage 20 counts
them (``adapter/codex``): ``info.last_token_usage`` when given, else the difference of the
cumulative ``info.total_token_usage`` from the previous one; an all-zero count is no call. The
model is the payload's or the latest ``turn_context``'s, ``gpt-5`` before any names one. A
subagent's log (``thread_spawn`` in its first 16 KiB) whose first two counts fall in the same
second starts with a replay of its parent's counts: those are skipped, as ccusage skips them.
Codex's ``input_tokens`` already include the cached ones; its ``output_tokens`` the reasoning ones.
A log whose ``session_meta`` has a ``source.subagent`` (``thread_spawn``, ``review``...) is a subagent's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .log import AgentCall, AgentLog, count_of, iso_seconds, unreadable

SOURCE = "codex"
PROVIDER = "openai"
FALLBACK_MODEL = "gpt-5"
KNOWN_TYPES = frozenset(("session_meta", "turn_context", "event_msg", "response_item", "compacted", "world_state",
                         "token_usage_record"))
TOOL_ITEMS = frozenset(("function_call", "custom_tool_call", "local_shell_call", "web_search_call"))
_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens",
           "cache_write_input_tokens")
PROMPT_CHARS = 200


def recognises(record: dict) -> bool:
    """Whether a log's first record is Codex's."""
    return record.get("type") in KNOWN_TYPES and isinstance(record.get("payload"), dict)


def read(path: Path, records: Iterable[tuple[bytes, Any]]) -> AgentLog:
    """The calls of one rollout log; ``records`` gives each line with its parsed value (None: not JSON)."""
    log = AgentLog(SOURCE, path, "", "")
    counts: list[tuple[str, dict, str, str, int]] = []  # timestamp, payload, model, prompt, tool calls
    model, prompt, tools, subagent = "", "", 0, False
    for line, record in records:
        if not isinstance(record, dict) or not isinstance(record.get("payload"), dict):
            log.skipped[unreadable(record) if not isinstance(record, dict) else "no payload"] += 1
            continue
        kind, payload = record.get("type"), record["payload"]
        subagent = subagent or b"thread_spawn" in line
        if kind not in KNOWN_TYPES:
            log.skipped["unknown record type"] += 1
        elif kind == "session_meta":
            if not log.session_id:  # the log's own (a subagent's log names its parent's after)
                source = payload.get("source")
                log.subagent = isinstance(source, dict) and "subagent" in source
            log.session_id = log.session_id or _text(payload.get("id"))
            log.project = log.project or _text(payload.get("cwd"))
        elif kind == "turn_context":
            model = _model_of(payload) or model
            log.project = log.project or _text(payload.get("cwd"))
        elif kind == "response_item" and payload.get("type") in TOOL_ITEMS:
            tools += 1
        elif kind == "event_msg" and payload.get("type") == "user_message":
            prompt = _text(payload.get("message")).strip()[:PROMPT_CHARS] or prompt
        elif kind == "response_item" and payload.get("type") == "message" and payload.get("role") == "user":
            prompt = user_text(payload.get("content")) or prompt
        elif kind == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            model = _model_of(payload) or _model_of(info) or model
            counts.append((_text(record.get("timestamp")), payload, model, prompt, tools))
            tools = 0
    log.calls = _calls(counts, subagent, log)
    log.session_id = log.session_id or path.stem
    log.project = log.project or path.parent.name
    return log


def _calls(counts: list[tuple[str, dict, str, str, int]], subagent: bool, log: AgentLog) -> list[AgentCall]:
    replay = _replay_second(counts) if subagent else None
    previous: dict[str, int] | None = None
    calls = []
    for timestamp, payload, model, prompt, tools in counts:
        info = payload.get("info")
        info = info if isinstance(info, dict) else {}
        total, last = _usage(info.get("total_token_usage")), _usage(info.get("last_token_usage"))
        if replay is not None:
            if timestamp[:19] == replay and (total or last):
                previous = total or previous
                continue
            replay = None
        raw = last or (_minus(total, previous) if total else None)
        previous = total or previous
        at = iso_seconds(timestamp)
        if raw is None or not any(raw[f] for f in _FIELDS[:4]):
            continue
        if at is None:
            log.skipped["no timestamp"] += 1
            continue
        cached = min(raw["cached_input_tokens"], raw["input_tokens"])
        thinking = min(raw["reasoning_output_tokens"], raw["output_tokens"])
        written = min(raw["cache_write_input_tokens"], raw["input_tokens"] - cached)  # new in Codex 0.171
        calls.append(AgentCall(at, model or FALLBACK_MODEL, PROVIDER, input_tokens=raw["input_tokens"],
                               cached_tokens=cached, cache_write_tokens=written,
                               output_tokens=raw["output_tokens"] - thinking, thinking_tokens=thinking,
                               tool_calls=tools, prompt=prompt, sidechain=log.subagent))
    return calls


def _replay_second(counts: list[tuple[str, dict, str, str, int]]) -> str | None:
    """The second of a subagent log's leading replay: its first two counts' shared second, if any."""
    seconds = []
    for timestamp, payload, *_ in counts:
        info = payload.get("info")
        if isinstance(info, dict) and (info.get("total_token_usage") or info.get("last_token_usage")):
            seconds.append(timestamp[:19])
            if len(seconds) == 2:
                break
    return seconds[0] if len(seconds) == 2 and seconds[0] == seconds[1] and len(seconds[0]) == 19 else None


def _usage(value: Any) -> dict[str, int] | None:
    if not isinstance(value, dict):
        return None
    out = {f: count_of(value.get(f, 0)) or 0 for f in _FIELDS}
    return out


def _minus(total: dict[str, int], previous: dict[str, int] | None) -> dict[str, int]:
    return {f: max(total[f] - (previous[f] if previous else 0), 0) for f in _FIELDS}


def _model_of(payload: Any) -> str:
    if not isinstance(payload, dict):
        return ""
    metadata = payload.get("metadata")
    for value in (payload.get("model"), payload.get("model_name"),
                  metadata.get("model") if isinstance(metadata, dict) else None):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def user_text(content: Any) -> str:
    """A user message's own text (not the ``<environment_context>`` and other blocks Codex adds)."""
    if not isinstance(content, list):
        return ""
    texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "input_text"]
    return " ".join(t for t in texts if isinstance(t, str) and not t.lstrip().startswith("<")).strip()[:PROMPT_CHARS]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
