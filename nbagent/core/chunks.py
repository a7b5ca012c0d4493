"""What a user reads from a turn: stream chunks, and the turn's ChatResponse."""

from __future__ import annotations

from .ledger import TurnRecord
from .steps import (ChatResponse, FinishReason, Step, StepKind, StepTarget, Text, Thought, ToolCall,
                    UsageMetadata)

Chunk = Thought | Text | ToolCall


def chunks_of(step: Step, seen_call_ids: set[str]) -> list[Chunk]:
    """The chunks one step update yields; ``seen_call_ids`` dedups tool calls by id.

    Thought / Text only from MODEL -> USER steps with a non-empty delta; a
    ToolCall once per call id (empty ids are never deduplicated);
    ENVIRONMENT-targeted steps never become chunks.
    """
    if step.target == StepTarget.ENVIRONMENT:
        return []
    out: list[Chunk] = []
    if step.kind is StepKind.MODEL_CALL:
        if step.thinking_delta:
            out.append(Thought(step.step_index, step.thinking_delta))
        if step.content_delta:
            out.append(Text(step.step_index, step.content_delta))
    for call in step.tool_calls:
        if call.id:
            if call.id in seen_call_ids:
                continue
            seen_call_ids.add(call.id)
        out.append(call)
    return out


def response_of(steps: list[Step], record: TurnRecord | None) -> ChatResponse:
    """The ChatResponse of one turn from its steps and ledger record."""
    texts = [s.content for s in steps if s.kind is StepKind.MODEL_CALL and s.content]
    if not texts:  # no answer: say why (tool-call limit reached, prompt blocked, ...)
        texts = [s.content for s in steps if s.kind is StepKind.FINISH and s.content][-1:]
    # one paragraph per model call, like the answer's texts (glued, "…12 * 7"}.The tool…" ran together)
    thinking = "\n\n".join(s.thinking for s in steps if s.kind is StepKind.MODEL_CALL and s.thinking)
    structured = next((s.structured_output for s in reversed(steps) if s.structured_output is not None), None)
    reason = FinishReason.STOP
    if record is not None and record.finish_reason is not None:
        reason = record.finish_reason
    return ChatResponse(
        text="\n\n".join(texts),
        thinking=thinking,
        steps=steps,
        usage_metadata=record.usage if record else UsageMetadata(),
        finish_reason=reason,
        structured_output=structured,
    )
