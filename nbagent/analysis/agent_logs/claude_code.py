"""Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``): one JSON record a line.

A model call is a record whose ``message`` holds ``usage``; Claude Code writes one such record per
content block of a streamed message, each with the whole message's usage, and a subagent's log
may replay its parent's messages. They are counted once as ccusage 20 counts them
(``adapter/claude``): by ``message.id`` + ``requestId``, a sidechain copy of a message yielding
to the main one, else the copy with more tokens. A line ccusage would not count (its ``version``
not ``x.y.z``, an empty id or model, a ``null`` id, model or token field) is skipped and counted.
A log's session is ccusage's: by its path under ``projects/`` (``<project>/<session>.jsonl``, a
subagent's ``<project>/<session>/subagents/*.jsonl``), else the ``sessionId`` its records name.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .log import AgentCall, AgentLog, count_of, iso_seconds, unreadable

SOURCE = "claude-code"
PROVIDER = "anthropic"
KNOWN_TYPES = frozenset(("user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation",
                         "progress", "custom-title", "tag", "attachment", "last-prompt"))
_NULL_FIELD = re.compile(rb'"(?:id|cwd|model|speed|costUSD|version|sessionId|requestId|isApiErrorMessage|'
                         rb'cache_read_input_tokens|cache_creation_input_tokens)":null')
_SEMVER = re.compile(r"\d+\.\d+\.\d")
PROMPT_CHARS = 200


def recognises(record: dict) -> bool:
    """Whether a log's first record is Claude Code's."""
    kind = record.get("type")
    if kind in ("summary", "file-history-snapshot", "queue-operation"):
        return True
    return "sessionId" in record and ("message" in record or kind in KNOWN_TYPES)


def read(path: Path, records: Iterable[tuple[bytes, Any]]) -> AgentLog:
    """The calls of one log; ``records`` gives each line with its parsed value (None: not JSON)."""
    log = AgentLog(SOURCE, path, "", _project_of(path))
    tools: dict[str, int] = defaultdict(int)
    last_usage: dict[tuple, Any] = {}
    prompt = ""
    for line, record in records:
        if not isinstance(record, dict):
            log.skipped[unreadable(record)] += 1
            continue
        log.session_id = log.session_id or _text(record.get("sessionId"))
        if not log.project.startswith("/") and isinstance(record.get("cwd"), str) and record["cwd"]:
            log.project = record["cwd"]
        message = record.get("message")
        if record.get("type") == "user" and isinstance(message, dict):
            prompt = _prompt_of(message.get("content")) or prompt
        if record.get("type") == "progress" and isinstance(record.get("data"), dict):
            record = record["data"].get("message") or {}  # a subagent's call relayed to its parent
            message = record.get("message") if isinstance(record, dict) else None
        if not isinstance(message, dict) or "usage" not in message:
            if record.get("type") not in KNOWN_TYPES:
                log.skipped["unknown record type"] += 1
            continue
        tools[message.get("id") or ""] += _tool_uses(message.get("content"))
        key = (message.get("id"), record.get("requestId"), record.get("isSidechain"))
        if key[0] is not None and last_usage.get(key) == message["usage"]:
            continue  # another record of one streamed message: ccusage keeps the first of equal ones
        last_usage[key] = message["usage"]
        call = call_of(line, record, message, prompt)
        if isinstance(call, str):
            log.skipped[call] += 1
            continue
        log.calls.append(call)
    for call in log.calls:
        call.tool_calls = tools[call.message_id or ""] if call.message_id else call.tool_calls
    if "projects" in path.parts[:-1] or not log.session_id:
        log.session_id = _session_of(path)  # ccusage's session: the file's, whatever its records name
    return log


def call_of(line: bytes, record: dict, message: dict, prompt: str = "") -> AgentCall | str:
    """The call a record holds, or why it is skipped."""
    if _NULL_FIELD.search(line):
        return "null field"
    usage = message["usage"]
    at = iso_seconds(record.get("timestamp"))
    if not isinstance(usage, dict) or at is None:
        return "no usage or timestamp"
    version, model = record.get("version"), message.get("model")
    if isinstance(version, str) and not _SEMVER.match(version):
        return "unknown version"
    if "" in (record.get("sessionId"), record.get("requestId"), message.get("id"), model):
        return "empty id or model"
    counts = [count_of(usage.get(k, 0)) for k in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                                                  "cache_creation_input_tokens")]
    if None in counts or "input_tokens" not in usage or "output_tokens" not in usage:
        return "bad token count"
    fresh, output, read_, write = (c or 0 for c in counts)
    split = usage.get("cache_creation")
    if isinstance(split, dict):  # ccusage counts the 5-minute and 1-hour writes when given
        write = (count_of(split.get("ephemeral_5m_input_tokens", 0)) or 0) + \
            (count_of(split.get("ephemeral_1h_input_tokens", 0)) or 0)
    return AgentCall(
        at, model if isinstance(model, str) else "", PROVIDER, input_tokens=fresh + read_ + write,
        cached_tokens=read_, cache_write_tokens=write, output_tokens=output, prompt=prompt,
        message_id=_text(message.get("id")) or None, request_id=_text(record.get("requestId")) or None,
        sidechain=record.get("isSidechain") is True, fast=usage.get("speed") == "fast")


def dedupe(logs: Sequence[AgentLog]) -> set[int]:
    """The ``id()`` of each call of ``logs`` (in order) that ccusage counts once with another
    (see the module docstring): the calls to drop."""
    seen = Counter(c.message_id for log in logs for c in log.calls)  # a message id held once has no copy
    kept = _Kept()
    for log in logs:
        for call in log.calls:
            if call.message_id is not None and seen[call.message_id] > 1:
                kept.add(call)
    return kept.dropped


class _Kept:
    """ccusage's deduplication: slots of kept calls, found by (message id, request id) or, when
    either is a sidechain's, by message id alone."""

    def __init__(self) -> None:
        self.slots: list[AgentCall] = []
        self.exact: dict[tuple[str, str | None], list[int]] = defaultdict(list)
        self.by_message: dict[str, list[int]] = defaultdict(list)
        self.dropped: set[int] = set()

    def add(self, call: AgentCall) -> None:
        message = call.message_id or ""
        key = (message, call.request_id)
        slot = self._find(call, key)
        if slot is None:
            slot = len(self.slots)
            self.slots.append(call)
        elif _replaces(call, self.slots[slot]):
            self.dropped.add(id(self.slots[slot]))
            self.slots[slot] = call
        else:
            self.dropped.add(id(call))
            return
        for index, at in ((self.exact, key), (self.by_message, message)):
            if slot not in index[at]:  # type: ignore[index]
                index[at].append(slot)  # type: ignore[index]

    def _find(self, call: AgentCall, key: tuple[str, str | None]) -> int | None:
        for slot in self.exact.get(key, ()):
            if (self.slots[slot].message_id, self.slots[slot].request_id) == key:
                return slot
        for slot in self.by_message.get(key[0], ()):
            if call.sidechain or self.slots[slot].sidechain:
                return slot
        return None


def _replaces(candidate: AgentCall, existing: AgentCall) -> bool:
    if candidate.sidechain != existing.sidechain:
        return existing.sidechain
    if candidate.raw_total != existing.raw_total:
        return candidate.raw_total > existing.raw_total
    return candidate.fast and not existing.fast


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _prompt_of(content: Any) -> str:
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    else:
        return ""
    return text.strip()[:PROMPT_CHARS]


def _tool_uses(content: Any) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_use")


def _parts(path: Path) -> list[str]:
    parts = list(path.parts)
    return parts[len(parts) - parts[::-1].index("projects"):] if "projects" in parts else parts


def _project_of(path: Path) -> str:
    """The folder under ``projects/`` (ccusage's project), "unknown" outside one."""
    parts = list(path.parts)
    if "projects" in parts[:-1]:
        name = parts[parts.index("projects") + 1]
        return name if name.strip() and name != path.name else "unknown"
    return "unknown"


def _session_of(path: Path) -> str:
    """ccusage's session of a file: under ``projects/``, the session folder (a subagent's log is its
    parent's) or the file's stem, which Claude Code names by the session's id."""
    relative = _parts(path)
    if len(relative) >= 4 and relative[-2] == "subagents":
        return relative[-3]
    if len(relative) <= 2:
        return path.stem
    return relative[-2]
