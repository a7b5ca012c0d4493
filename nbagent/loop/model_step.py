"""Provider events folded into the model step of a turn.

A batch is what one network read carried: its text and thinking deltas become one update of the
step (one chunk per kind), structural events (tool calls, usage, the finish) change the step in
place; the finished answer goes into the ChatSession.
"""

from __future__ import annotations

import time
from typing import Any

from ..core.chat_session import ChatSession
from ..core.steps import Step, StepStatus, StepType, ToolCall
from ..core.text import clean_text
from ..providers.base import (NOTICES, Finish, RefusalDelta, Retrying, TextDelta, ThinkingDelta, ToolCallEnd,
                              ToolCallStart, Usage, Waiting)
from .tool_runner import with_unique_call_ids


def fold_batch(step: Step, events: list, calls: list[ToolCall], session: ChatSession,
               include_reasoning: bool = True) -> tuple[Step | None, Finish | None]:
    """Fold one network read's events into the model step: one update (and the Finish, if any)."""
    text, thinking, changed, finish = [], [], False, None
    for event in events:
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ThinkingDelta):
            thinking.append(event.text if include_reasoning else "")
        else:
            changed = fold_event(step, event, calls, session) or changed
            finish = event if isinstance(event, Finish) else finish
    if step.notice.startswith(Waiting.PREFIX) and any(not isinstance(e, NOTICES) for e in events):
        step.notice, changed = "", True  # the reply started: the wait is over
    content, thought = clean_text("".join(text)), clean_text("".join(thinking))
    step.content += content
    step.thinking += thought
    return (step.snapshot(content, thought) if content or thought or changed else None), finish

def fold_event(step: Step, event: Any, calls: list[ToolCall], session: ChatSession) -> bool:
    """Fold one provider event other than a text delta into the model step; True if it changed."""
    if isinstance(event, RefusalDelta):
        step.refusal += event.text
        return True
    elif isinstance(event, (Retrying, Waiting)):
        step.notice = event.notice
        return True
    elif isinstance(event, ToolCallStart):
        step.preparing_tool = event.name
    elif isinstance(event, ToolCallEnd):
        calls.append(event.call)
        step.tool_calls = list(calls)
        step.type = StepType.TOOL_CALL
        return True
    elif isinstance(event, Usage):
        step.usage_metadata = event.usage
        step.raw_usage = event.raw
    elif isinstance(event, Finish):
        with_unique_call_ids(event.message, calls)
        step.tool_calls = list(calls)
        for message in event.history:  # none when the provider refused the prompt itself
            session.push_assistant(message)
        step.cut_tool_calls = list(event.cut_tool_calls)
        step.status = StepStatus.DONE
        step.finished_at = time.time()
        step.structured_output = event.structured_output
        step.finish_reason = event.reason
        step.preparing_tool = ""
        if event.model:
            step.model = event.model
        return True
    return False
