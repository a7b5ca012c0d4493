"""A plain markdown rendering of a conversation, for where widgets don't render."""

from __future__ import annotations

import json

from ..core.steps import Step, StepSource, StepStatus, StepTarget, StepType


def transcript_markdown(steps: list[Step], limit: int = 200) -> str:
    """Markdown of the last ``limit`` steps: prompts, thoughts, answers, tool calls."""
    lines: list[str] = []
    for step in steps[-limit:]:
        if step.source == StepSource.USER and step.content:
            lines.append("**You:** " + step.content)
        elif step.source == StepSource.MODEL:
            if step.thinking:
                quoted = "\n".join("> " + ln for ln in step.thinking.strip().splitlines())
                lines.append("> *thinking*\n" + quoted)
            if step.content:
                lines.append(step.content)
            for call in step.tool_calls:
                lines.append(f"🔧 `{call.name}({json.dumps(call.args, ensure_ascii=False)})`")
        elif step.type == StepType.TOOL_CALL and step.target == StepTarget.ENVIRONMENT:
            name = step.tool_calls[0].name if step.tool_calls else "tool"
            if step.status == StepStatus.WAITING_FOR_USER:
                lines.append(f"⏸ `{name}` is waiting for approval or a result")
            else:
                result = step.error or step.content
                if len(result) > 500:
                    result = result[:500] + " …"
                lines.append(f"↳ `{name}` → {result}")
        elif step.type == StepType.COMPACTION:
            lines.append("*— " + (step.content or "history compacted") + " —*")
        elif step.type == StepType.FINISH and step.error:
            lines.append(f"**Error:** {step.error}")
        if step.status == StepStatus.CANCELED:
            lines.append("*(stopped)*")
    return "\n\n".join(lines) if lines else "*(empty conversation)*"
