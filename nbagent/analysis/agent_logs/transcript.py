"""A Claude Code session log as a conversation's steps and turns (a read-only ``Conversation``).

A prompt starts a turn; the records of one streamed message (one per content block) make one model
step with its text, thinking, tool calls and usage; each tool result is a tool run paired with its
call by id; a ``compact_boundary`` is a compaction. The turn records sum their model steps' usage.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...core.conversation_state import ConversationState
from ...core.ledger import TurnRecord
from ...core.session_file import fast_loads
from ...core.steps import (Step, StepSource, StepStatus, StepTarget, StepType, ToolCall, TurnStatus,
                           UsageMetadata)
from . import claude_code
from .log import iso_seconds
from .readers import read_log


def claude_code_state(path: str | Path) -> ConversationState:
    """The steps and turns of one Claude Code log (``StorageError`` when it cannot be read)."""
    path = Path(path)
    log = read_log(path)  # checks the file as every reader does
    if log is None or log.source != claude_code.SOURCE:
        from ...core.errors import StorageError

        raise StorageError(f"{path} is not a Claude Code session log")
    loads = fast_loads() or json.loads
    builder = _Builder()
    for line in path.read_bytes().splitlines():
        try:
            record = loads(line)
        except (ValueError, RecursionError):
            continue
        message = record.get("message") if isinstance(record, dict) else None
        if isinstance(message, dict) and "usage" in message and isinstance(
                claude_code.call_of(line, record, message), str):
            continue  # a record the usage frames skip (and count) is not in the transcript either
        if isinstance(record, dict):
            builder.add(record)
    return ConversationState(conversation_id=log.session_id, steps=builder.steps, turn_starts=builder.starts,
                             compactions=builder.compactions, turns=builder.turns(),
                             last_response=builder.last_text)


class _Builder:
    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.starts: list[int] = []
        self.compactions: list[int] = []
        self.turn = -1
        self.prompts: list[str] = []
        self.message: tuple[str, Step] | None = None  # the model step of the message being read
        self.names: dict[str, str] = {}  # tool call id -> tool name
        self.last_text = ""

    def add(self, record: dict) -> None:
        kind, message = record.get("type"), record.get("message")
        at = iso_seconds(record.get("timestamp")) or 0.0
        if kind == "system" and record.get("subtype") == "compact_boundary":
            self.compactions.append(len(self.steps))
            self._push(Step(type=StepType.COMPACTION, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
                            status=StepStatus.DONE, content=str(record.get("content") or ""), created_at=at,
                            finished_at=at))
        elif not isinstance(message, dict) or record.get("isMeta"):
            return
        elif kind == "user":
            self._user(message.get("content"), at)
        elif kind == "assistant":
            self._assistant(message, at)

    def _user(self, content: Any, at: float) -> None:
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(content, list) else []
        for block in results:
            call_id = str(block.get("tool_use_id") or "")
            self._push(Step(type=StepType.TOOL_CALL, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
                            status=StepStatus.ERROR if block.get("is_error") else StepStatus.DONE,
                            tool_calls=[ToolCall(call_id, self.names.get(call_id, ""))],
                            content=_text(block.get("content")), created_at=at, finished_at=at))
        if results:
            return
        prompt = _text(content)
        if not prompt:
            return
        self.turn += 1
        self.prompts.append(prompt)
        self.starts.append(len(self.steps))
        self.message = None
        self._push(Step(type=StepType.TEXT_RESPONSE, source=StepSource.USER, target=StepTarget.UNSPECIFIED,
                        status=StepStatus.DONE, content=prompt, created_at=at, finished_at=at))

    def _assistant(self, message: dict, at: float) -> None:
        mid = str(message.get("id") or "")
        if self.message is None or self.message[0] != mid or not mid:
            step = Step(type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER,
                        status=StepStatus.DONE, created_at=at, model=str(message.get("model") or ""))
            self.message = (mid, step)
            self._push(step)
        step = self.message[1]
        step.finished_at = at
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                step.content += str(block.get("text") or "")
                self.last_text = step.content
            elif block.get("type") == "thinking":
                step.thinking += str(block.get("thinking") or "")
            elif block.get("type") == "tool_use":
                args = block.get("input")
                call = ToolCall(str(block.get("id") or ""), str(block.get("name") or ""),
                                args if isinstance(args, dict) else {})
                self.names[call.id] = call.name
                step.tool_calls.append(call)
        step.usage_metadata = _usage(message.get("usage")) or step.usage_metadata

    def _push(self, step: Step) -> None:
        step.turn = max(self.turn, 0)
        step.step_index = len(self.steps)
        self.steps.append(step)

    def turns(self) -> list[TurnRecord]:
        out = []
        for n, prompt in enumerate(self.prompts):
            steps = [s for s in self.steps if s.turn == n]
            calls = [s for s in steps if s.source == StepSource.MODEL]
            usage = sum((s.usage_metadata for s in calls if s.usage_metadata is not None), UsageMetadata())
            out.append(TurnRecord(
                turn=n, prompt=prompt, model=calls[-1].model if calls else "", provider=claude_code.PROVIDER,
                started_at=steps[0].created_at, finished_at=steps[-1].finished_at, usage=usage,
                model_calls=len(calls), tool_calls=sum(1 for s in steps if s.is_tool_run), status=TurnStatus.DONE))
        return out


def _usage(raw: Any) -> UsageMetadata | None:
    if not isinstance(raw, dict):
        return None
    counts: dict[str, int] = {k: v if type(v := raw.get(k)) is int else 0 for k in (
        "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")}
    read, write = counts["cache_read_input_tokens"], counts["cache_creation_input_tokens"]
    prompt = counts["input_tokens"] + read + write
    return UsageMetadata(prompt_token_count=prompt, candidates_token_count=counts["output_tokens"],
                         total_token_count=prompt + counts["output_tokens"], cached_content_token_count=read,
                         cache_write_token_count=write)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable) and not isinstance(content, (bytes, dict)):
        return "\n".join(str(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""
