"""A Claude Code or Codex session log as a conversation's steps and turns (a read-only ``Conversation``).

A prompt starts a turn; one model call makes one model step with its text, thinking, tool calls and
usage (Claude Code: the records of one streamed message; Codex: the items before a token count, with
the count the usage frames take from it); each tool result is a tool run paired with its call by id;
a ``compact_boundary`` (``compacted``) is a compaction, holding the summary Claude Code writes after it
(``isCompactSummary``; not a prompt). A subagent's step (a Claude Code sidechain record, any step of
a Codex subagent's log) is marked ``subagent``. The turn records sum their model steps' usage.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...core.conversation_state import ConversationState
from ...core.ledger import TurnRecord
from ...core.steps import (Step, StepSource, StepStatus, StepTarget, StepType, ToolCall, TurnStatus,
                           UsageMetadata)
from . import claude_code, codex
from .log import AgentLog, iso_seconds
from .readers import log_records, read_log


def agent_log_state(path: str | Path) -> ConversationState:
    """The steps and turns of one Claude Code or Codex log (``StorageError`` when it is neither)."""
    path = Path(path)
    log = read_log(path)  # checks the file as every reader does
    if log is None or log.source not in (claude_code.SOURCE, codex.SOURCE):
        from ...core.errors import StorageError

        raise StorageError(f"{path} is not a Claude Code or Codex session log")
    builder: _Builder = _Builder() if log.source == claude_code.SOURCE else _CodexBuilder(log)
    builder.provider = claude_code.PROVIDER if log.source == claude_code.SOURCE else codex.PROVIDER
    builder.subagent = log.source == codex.SOURCE and log.subagent
    for line, record in log_records(path):
        message = record.get("message") if isinstance(record, dict) else None
        if log.source == claude_code.SOURCE and isinstance(message, dict) and "usage" in message and isinstance(
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
        self.provider = ""
        self.subagent = False  # the record being read is a subagent's

    def add(self, record: dict) -> None:
        kind, message = record.get("type"), record.get("message")
        at = iso_seconds(record.get("timestamp")) or 0.0
        self.subagent = record.get("isSidechain") is True
        if kind == "system" and record.get("subtype") == "compact_boundary":
            self._compaction(str(record.get("content") or ""), at)
        elif record.get("isCompactSummary") and isinstance(message, dict):
            self._summary(_text(message.get("content")), at)
        elif not isinstance(message, dict) or record.get("isMeta"):
            return
        elif kind == "user":
            self._user(message.get("content"), at)
        elif kind == "assistant":
            self._assistant(message, at)

    def _compaction(self, content: str, at: float) -> None:
        self.compactions.append(len(self.steps))
        self._push(Step(type=StepType.COMPACTION, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
                        status=StepStatus.DONE, content=content, created_at=at, finished_at=at))

    def _summary(self, summary: str, at: float) -> None:
        """The summary a compaction left: the open compaction's content (a compaction of its own without one)."""
        last = self.steps[-1] if self.steps else None
        if last is None or last.type != StepType.COMPACTION:
            self._compaction("", at)
            last = self.steps[-1]
        last.content = summary

    def _prompt(self, prompt: str, at: float) -> None:
        self.turn += 1
        self.prompts.append(prompt)
        self.starts.append(len(self.steps))
        self.message = None
        self._push(Step(type=StepType.TEXT_RESPONSE, source=StepSource.USER, target=StepTarget.UNSPECIFIED,
                        status=StepStatus.DONE, content=prompt, created_at=at, finished_at=at))

    def _tool_run(self, call_id: str, content: str, at: float, error: bool = False) -> None:
        self._push(Step(type=StepType.TOOL_CALL, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
                        status=StepStatus.ERROR if error else StepStatus.DONE,
                        tool_calls=[ToolCall(call_id, self.names.get(call_id, ""))], content=content,
                        created_at=at, finished_at=at))

    def _model_step(self, key: str, at: float, model: str) -> Step:
        """The model step of the call ``key`` names: the open one, or a new one."""
        if self.message is None or self.message[0] != key or not key:
            step = Step(type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER,
                        status=StepStatus.DONE, created_at=at, model=model)
            self.message = (key, step)
            self._push(step)
        step = self.message[1]
        step.finished_at = at
        return step

    def _user(self, content: Any, at: float) -> None:
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(content, list) else []
        for block in results:
            self._tool_run(str(block.get("tool_use_id") or ""), _text(block.get("content")), at,
                           bool(block.get("is_error")))
        prompt = "" if results else _text(content)
        if prompt:
            self._prompt(prompt, at)

    def _assistant(self, message: dict, at: float) -> None:
        step = self._model_step(str(message.get("id") or ""), at, str(message.get("model") or ""))
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
        step.subagent = self.subagent
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
                turn=n, prompt=prompt, model=calls[-1].model if calls else "", provider=self.provider,
                started_at=steps[0].created_at, finished_at=steps[-1].finished_at, usage=usage,
                model_calls=len(calls), tool_calls=sum(1 for s in steps if s.is_tool_run), status=TurnStatus.DONE))
        return out


class _CodexBuilder(_Builder):
    """A Codex rollout's records: output items until a token count make one model step."""

    def __init__(self, log: AgentLog) -> None:
        super().__init__()
        self.calls = {c.at: c for c in log.calls}  # the counts the usage frames took, by time
        self.model = ""
        self.open = 0  # the number of the model call being read

    def add(self, record: dict) -> None:
        kind, payload = record.get("type"), record.get("payload")
        at = iso_seconds(record.get("timestamp")) or 0.0
        if not isinstance(payload, dict):
            return
        item = payload.get("type")
        if kind == "turn_context":
            self.model = str(payload.get("model") or self.model)
        elif kind == "compacted":
            self._compaction(str(payload.get("message") or ""), at)
        elif kind == "event_msg" and item == "token_count":
            call = self.calls.get(at)
            if call is not None:  # a counted call: its model step (one without items when none came)
                step = self._model_step(f"call-{self.open}", at, call.model)
                step.usage_metadata = UsageMetadata(
                    call.input_tokens, call.output_tokens, call.raw_total, call.cached_tokens, call.thinking_tokens,
                    call.cache_write_tokens)
                step.model = call.model
            self.open += 1
            self.message = None
        elif kind == "response_item" and item == "message" and payload.get("role") == "user":
            self._codex_prompt(codex.user_text(payload.get("content")), at)
        elif kind == "event_msg" and item == "user_message":  # older Codex: the prompt as an event (too)
            self._codex_prompt(str(payload.get("message") or "").strip(), at)
        elif kind == "response_item":
            self._item(payload, item, at)

    def _codex_prompt(self, prompt: str, at: float) -> None:
        last = self.steps[-1] if self.steps else None
        if prompt and not (last is not None and last.source == StepSource.USER and last.content == prompt):
            self._prompt(prompt, at)

    def _item(self, payload: dict, item: Any, at: float) -> None:
        if item in ("function_call_output", "custom_tool_call_output"):
            self._tool_run(str(payload.get("call_id") or ""), _text(payload.get("output")), at)
            return
        if item not in ("message", "reasoning", "function_call", "custom_tool_call") or payload.get("role") in (
                "developer", "system"):
            return
        step = self._model_step(f"call-{self.open}", at, self.model)
        if item == "message":
            step.content += "".join(str(b.get("text") or "") for b in payload.get("content") or []
                                    if isinstance(b, dict) and b.get("type") == "output_text")
            self.last_text = step.content or self.last_text
        elif item == "reasoning":
            step.thinking += "\n".join(str(b.get("text") or "") for b in payload.get("summary") or []
                                       if isinstance(b, dict))
        else:
            call = ToolCall(str(payload.get("call_id") or ""), str(payload.get("name") or ""),
                            _arguments(payload.get("arguments", payload.get("input"))))
            self.names[call.id] = call.name
            step.tool_calls.append(call)


def _arguments(raw: Any) -> dict:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {"input": raw}
    return raw if isinstance(raw, dict) else {}


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
