"""Transcripts of a conversation for where the widget does not render: markdown (the
widget's saved output, ``%%chat``'s answer, ``Conversation.to_markdown()``) and one
self-contained HTML file (``Conversation.to_html()``).

Everything that comes from the model, a tool or an error is untrusted: the markdown goes
through :mod:`.safe_markdown` (raw HTML shown as text, checked links, images as links,
code that cannot be broken out of) and the HTML through :func:`html.escape`, with a
Content-Security-Policy that allows no scripts and no fetches at all.
"""

from __future__ import annotations

import html
import json
import time
from typing import Any
from collections.abc import Iterable

from ..core.ledger import TurnRecord
from ..core.steps import ApprovalDecision, CellPreview, Step, StepKind, StepStatus, changes_line
from ..core.safe_markdown import code_block, code_span, plain, prose, quote
from .transcript_html import html_page, render_items_html
from .transcript_items import (Answer, Call, Diff, Failure, Note, Prompt, Result, Thinking, TranscriptItem,
                               Waiting)

__all__ = ["conversation_html", "conversation_markdown", "step_items", "transcript_markdown",
           "seconds_text", "transcript_text", "turn_markdown", "usage_line"]

RESULT_CHARS = 500  # a tool result in the short transcript
EXPORT_RESULT_CHARS = 20_000  # a tool result in an export
_WAITING_FOR: dict[ApprovalDecision | None, str] = {ApprovalDecision.PENDING: "approval",
                                                     ApprovalDecision.MANUAL: "a result"}
_DENIED = {ApprovalDecision.DENIED: "denied by the user", ApprovalDecision.POLICY_DENIED: "denied by the policy",
           ApprovalDecision.BLOCKED: "blocked by a hook", ApprovalDecision.CANCELED: "canceled"}


# --- what a step shows ---------------------------------------------------------------


def step_items(step: Step, result_chars: int = RESULT_CHARS) -> list[TranscriptItem]:
    """What one step shows, as items every renderer understands (``transcript_items.py``).

    It shows every Step field declared ``transcript=True`` (core/steps.py; a contract test holds it)."""
    items: list[TranscriptItem] = []
    kind = step.kind
    if kind is StepKind.PROMPT and step.content:
        items.append(Prompt(step.content))
    elif kind is StepKind.MODEL_CALL:
        if step.thinking:
            items.append(Thinking(step.thinking))
        if step.content:
            items.append(Answer(step.content))
        if step.refusal:
            items.append(Note("The model declined: " + step.refusal))
        items += [Call(c.name, _args(c.args)) for c in step.tool_calls]
        items += [Call(c.name, c.arguments, cut=True) for c in step.cut_tool_calls]
        if step.error:
            items.append(Failure(step.error))
    elif kind is StepKind.TOOL_RUN:
        if step.preview is not None:
            items.append(_diff_item(step.preview))
        items.append(_result_item(step, result_chars))
        if step.changes:
            items.append(Note("changed: " + changes_line(step.changes)))
    elif kind is StepKind.COMPACTION:
        items.append(Note(step.content or "history compacted"))
    elif kind is StepKind.FINISH:
        if step.error:
            items.append(Failure(step.error))
        elif step.content or step.refusal:
            items.append(Note(step.content or step.refusal))
    if step.status == StepStatus.CANCELED and kind is StepKind.MODEL_CALL:
        items.append(Note("stopped"))
    return items


def _args(args: Any) -> str:
    try:
        return json.dumps(args, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(args)


def _result_item(step: Step, limit: int) -> Waiting | Result:
    name = step.tool_calls[0].name if step.tool_calls else "tool"
    if step.tool_server:
        name += f" (MCP {step.tool_server})"
    if step.status == StepStatus.WAITING_FOR_USER:
        return Waiting(name, _WAITING_FOR.get(step.approval, "approval or a result"))
    text = step.error or step.content
    if len(text) > limit:
        text = text[:limit] + f" … ({len(text) - limit:,} more characters)"
    why = _DENIED.get(step.approval, "") if step.approval is not None else ""
    return Result(name, text, bool(step.error) or step.status == StepStatus.ERROR, why)


def _diff_item(preview: CellPreview) -> Diff:
    where = f"cell {preview.position}" + (f" ({preview.cell_id})" if preview.cell_id else "")
    title = f"{preview.action} {where}: +{preview.added} −{preview.removed}"
    if preview.problem:
        title += f" — {preview.problem}"
    return Diff(title, "\n".join(f"{op} {line}" for op, line in preview.diff))


def _dedup_errors(items: Iterable[TranscriptItem]) -> list[TranscriptItem]:
    """A failed model call and the turn's end carry the same error: show it once."""
    out: list[TranscriptItem] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, Failure):
            if item.text in seen:
                continue
            seen.add(item.text)
        out.append(item)
    return out


# --- markdown ------------------------------------------------------------------------


def item_markdown(item: TranscriptItem) -> str:
    match item:
        case Prompt(text):
            shown = prose(text.strip())
            return "**You:**" + ("\n\n" if "\n" in shown or shown.startswith(("<pre>", "```")) else " ") + shown
        case Thinking(text):
            return quote("💭 *thinking*\n\n" + prose(text.strip()))
        case Answer(text):
            return prose(text)
        case Call(name, args, cut=False):
            return f"🔧 **{plain(name)}** {code_span(args)}"
        case Call(name, args):
            return f"✂️ **{plain(name)}** (cut at the token limit, not run) {code_span(args)}"
        case Waiting(name, for_what):
            return f"⏸ **{plain(name)}** is waiting for {for_what}"
        case Result(name, text, failed, why):
            head = f"↳ **{plain(name)}** " + (f"({why}) " if why else "") + ("failed:" if failed else "returned:")
            if "\n" not in text and len(text) <= 120:
                return f"{head} {code_span(text)}"
            return f"{head}\n\n{code_block(text)}"
        case Diff(title, lines):
            return f"📝 {plain(title)}" + (f"\n\n{code_block(lines, 'diff')}" if lines else "")
        case Failure(text):
            return "**Error:** " + (code_span(text) if "\n" not in text else "\n\n" + code_block(text))
        case Note(text):
            return f"*— {plain(text)} —*"


def transcript_markdown(steps: list[Step], limit: int = 200) -> str:
    """Markdown of the last ``limit`` steps: prompts, thoughts, answers, tool calls, errors."""
    items = _dedup_errors(i for step in steps[-limit:] for i in step_items(step))
    return "\n\n".join(item_markdown(i) for i in items) if items else "*(empty conversation)*"


def item_text(item: TranscriptItem) -> str:
    """One item as plain text (for a view that escapes it whole, e.g. inside ``<pre>``)."""
    match item:
        case Prompt(text):
            return "You: " + text
        case Thinking(text):
            return "\n".join("> " + ln for ln in ("💭 thinking\n" + text.strip()).split("\n"))
        case Answer(text):
            return text
        case Note(text):
            return f"— {text} —"
        case Call(name, args, cut):
            return f"🔧 {name}({args})" + (" [cut at the token limit, not run]" if cut else "")
        case Waiting(name, for_what):
            return f"⏸ {name} is waiting for {for_what}"
        case Result(name, text, failed, why):
            return f"↳ {name}" + (f" ({why})" if why else "") + (" failed: " if failed else " returned: ") + text
        case Diff(title, lines):
            return f"📝 {title}" + (f"\n{lines}" if lines else "")
        case Failure(text):
            return "Error: " + text


def transcript_text(steps: list[Step], limit: int = 200) -> str:
    """The same transcript as plain text: nothing escaped, for a view that escapes it whole."""
    items = _dedup_errors(i for step in steps[-limit:] for i in step_items(step))
    return "\n\n".join(item_text(i) for i in items) if items else "(empty conversation)"


def usage_line(record: TurnRecord | None) -> str:
    """A turn's model, tokens and timing on one line of plain text (escape before use)."""
    if record is None:
        return ""
    u = record.usage
    bits = [record.model or "model", f"in {u.prompt_token_count:,}"]
    if u.cached_content_token_count:
        bits.append(f"cached {u.cached_content_token_count:,}")
    if u.thoughts_token_count:
        bits.append(f"thinking {u.thoughts_token_count:,}")
    bits.append(f"out {u.candidates_token_count:,}")
    if record.duration is not None:
        bits.append(seconds_text(record.duration))
    if record.time_to_first_token is not None:
        bits.append("TTFT " + seconds_text(record.time_to_first_token))
    tps = record.output_tokens_per_s
    if tps:
        bits.append(f"{tps:.1f} tok/s" if tps < 10 else f"{tps:,.0f} tok/s")
    return " · ".join(bits)


def seconds_text(s: float) -> str:
    """A duration as the widget's footer writes it (js/src/render/dom.js fmtSeconds)."""
    if s < 1:
        return f"{round(s * 1000)} ms"
    if s < 60:
        return f"{s:.2f} s" if s < 10 else f"{s:.1f} s"
    return f"{int(s // 60)} min {round(s % 60)} s"


def turn_markdown(steps: list[Step], record: TurnRecord | None) -> str:
    """One turn's answer side (thoughts, tool calls, answer, errors) and its usage line."""
    body = transcript_markdown([s for s in steps if s.kind is not StepKind.PROMPT])
    line = usage_line(record)
    return body + ("\n\n<sub>" + plain(line) + "</sub>" if line else "")


def group_turns(history: list[Step], turns: list[TurnRecord]) -> list[tuple[TurnRecord | None, list[Step]]]:
    """The steps of each turn with its ledger record (records of trimmed turns left out)."""
    by_turn: dict[int, list[Step]] = {}
    for step in history:
        by_turn.setdefault(step.turn, []).append(step)
    records = {r.turn: r for r in turns}
    return [(records.get(n), steps) for n, steps in sorted(by_turn.items())]


def conversation_markdown(history: list[Step], turns: list[TurnRecord], conversation_id: str = "") -> str:
    """The whole conversation as one markdown document (``Conversation.to_markdown()``)."""
    out = ["# nbagent conversation", "*" + plain(_summary(turns, conversation_id)) + "*"]
    for record, steps in group_turns(history, turns):
        number = (record.turn if record else steps[0].turn) + 1
        out.append(f"## Turn {number}")
        items = _dedup_errors(i for s in steps for i in step_items(s, EXPORT_RESULT_CHARS))
        out += [item_markdown(i) for i in items]
        if record is not None:
            out.append("<sub>" + plain(usage_line(record)) + "</sub>")
    if len(out) == 2:
        out.append("*(empty conversation)*")
    return "\n\n".join(out) + "\n"


def _summary(turns: list[TurnRecord], conversation_id: str) -> str:
    models = sorted({r.model for r in turns if r.model})
    tokens_in = sum(r.usage.prompt_token_count for r in turns)
    tokens_out = sum(r.usage.generated_token_count for r in turns)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(turns[0].started_at)) if turns else ""
    bits = [f"{len(turns)} turn{'s' if len(turns) != 1 else ''}"]
    bits += [", ".join(models)] if models else []
    bits += [f"{tokens_in:,} tokens in, {tokens_out:,} out", when]
    bits += [f"conversation {conversation_id[:8]}"] if conversation_id else []
    return " · ".join(b for b in bits if b)


# --- HTML ------------------------------------------------------------------------------


def conversation_html(history: list[Step], turns: list[TurnRecord], conversation_id: str = "") -> str:
    """The whole conversation as one self-contained HTML page (``Conversation.to_html()``)."""
    sections = []
    for record, steps in group_turns(history, turns):
        number = (record.turn if record else steps[0].turn) + 1
        items = _dedup_errors(i for s in steps for i in step_items(s, EXPORT_RESULT_CHARS))
        usage = usage_line(record)
        sections.append(f'<section class="turn"><h2>Turn {number}</h2>\n{render_items_html(items)}'
                        + (f'\n<p class="usage">{html.escape(usage)}</p>' if usage else "") + "</section>")
    body = "\n".join(sections) or '<p class="note">(empty conversation)</p>'
    return html_page("nbagent conversation", _summary(turns, conversation_id), body)
