"""What a ``%%chat`` cell does: put notebook variables in the prompt, stream the turn into
the cell, and give back the answer as the cell's result (see ``magics.py``)."""

from __future__ import annotations

import re
import string
import sys
import threading
from typing import Any

from ..core.errors import ConfigError, NbagentError, ProtocolError
from ..core.steps import ApprovalDecision, Step, StepStatus, Text, Thought, ToolCall
from ..core.text import exception_text
from ..notebook.transcript import turn_markdown
from ..core.conversation_state import plumbing_of

__all__ = ["ChatAnswer", "ChatInterrupted", "interpolate", "run_turn", "typed_text", "value_text"]

VALUE_CHARS = 4_000  # a variable's text in a prompt, at most
FRAME_ROWS = 20  # a DataFrame's rows in a prompt (first and last ones when longer)
FRAME_COLUMNS = 12
NO_APPROVAL = ("a %%chat cell cannot ask for approval; "
               "use %%chat --widget for the Approve / Deny buttons")


class ChatAnswer(str):
    """A ``%%chat`` cell's result: the answer text (a ``str``), shown as the turn's markdown.

    ``.response`` is the turn's ``ChatResponse`` and ``.markdown`` what the cell shows.
    """

    response: Any
    markdown: str

    def __new__(cls, text: str, markdown: str, response: Any = None) -> ChatAnswer:
        answer = super().__new__(cls, text)
        answer.markdown, answer.response = markdown, response
        return answer

    def _repr_markdown_(self) -> str:
        return self.markdown

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(str.__str__(self))


class ChatInterrupted(KeyboardInterrupt):
    """The kernel was interrupted during a ``%%chat`` turn: one line, not a traceback."""

    def _render_traceback_(self) -> list[str]:
        return ["\x1b[0;31mKeyboardInterrupt\x1b[0m: the turn was stopped; "
                "its partial answer is shown above and kept in the conversation"]


# --- {variables} in the prompt ---------------------------------------------------------


def interpolate(template: str, namespace: dict) -> str:
    """``template`` with each ``{name}`` (also ``{name.attr}``, ``{name[0]}``, ``{x:.2f}``)
    replaced by that notebook variable; ``{{`` and ``}}`` stand for braces."""
    formatter = string.Formatter()
    try:
        parsed = list(formatter.parse(template))
    except ValueError as exc:
        raise ConfigError(f"%%chat: {exc} in the prompt (write {{{{ and }}}} for literal braces)") from None
    out: list[str] = []
    for literal, field, spec, conversion in parsed:
        out.append(literal)
        if field is None:
            continue
        if not field.strip():
            raise ConfigError("%%chat: empty {} in the prompt (write {{}} for literal braces)")
        try:
            value, _ = formatter.get_field(field, (), namespace)
        except Exception as exc:  # noqa: BLE001 - a variable's own __getattr__ / __getitem__ may raise anything
            why = "is not a notebook variable" if isinstance(exc, KeyError) else f"failed: {exception_text(exc)}"
            raise ConfigError(f"%%chat: {{{field}}} {why} (write {{{{{field}}}}} for literal braces)") from None
        out.append(_field_text(field, value, spec, conversion))
    return "".join(out)


def typed_text(template: str) -> str:
    """What the user typed of ``template``: its literal text, without the ``{fields}`` that
    ``interpolate`` fills from variables (only typed ``@name`` may attach a variable)."""
    try:
        return " ".join(literal for literal, *_ in string.Formatter().parse(template))
    except ValueError:
        return template


def _field_text(field: str, value: Any, spec: str | None, conversion: str | None) -> str:
    """One ``{field!conversion:spec}`` as capped text; any error in the value's own ``__str__``,
    ``__repr__`` or ``__format__`` is one ``config`` error naming the field."""
    if spec and any(int(n) > VALUE_CHARS for n in re.findall(r"\d+", spec)):
        raise ConfigError(f"%%chat: {{{field}:{spec}}} asks for more than {VALUE_CHARS:,} characters")
    try:
        if conversion:
            value = string.Formatter().convert_field(value, conversion)
        return value_text(format(value, spec) if spec else value)
    except Exception as exc:  # noqa: BLE001 - user code: any error is the variable's, shown as one line
        raise ConfigError(f"%%chat: {{{field}}} failed: {exception_text(exc)}") from None


def value_text(value: Any) -> str:
    """A variable as prompt text: a DataFrame / Series as a compact table, all capped."""
    module = type(value).__module__ or ""
    if module.startswith("pandas") and hasattr(value, "to_string"):
        text = _frame_text(value)
    else:
        text = str(value)
    if len(text) > VALUE_CHARS:
        text = text[:VALUE_CHARS] + f"\n… ({len(text) - VALUE_CHARS:,} more characters left out)"
    return text


def _frame_text(frame: Any) -> str:
    rows = len(frame)
    shape: tuple[int, ...] = getattr(frame, "shape", (rows,))
    table = frame.to_string(max_rows=FRAME_ROWS, min_rows=FRAME_ROWS // 2, max_cols=FRAME_COLUMNS,
                            max_colwidth=40, show_dimensions=False)
    what = f"{rows:,} rows" + (f" × {shape[1]} columns" if len(shape) > 1 else "")
    if rows > FRAME_ROWS or (len(shape) > 1 and shape[1] > FRAME_COLUMNS):
        what += ", only the first and last shown"
    return f"({what})\n{table}"


# --- running a turn into the cell ----------------------------------------------------------


class _Printer:
    """Writes a turn's chunks to stdout as they stream (appended, never re-sent)."""

    def __init__(self, conversation) -> None:
        self.conversation = conversation
        self.thinking = False
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, event: str, payload: Any) -> None:
        if event != "step" or not isinstance(payload, Step):
            return
        from ..core.chunks import chunks_of

        with self.lock:
            for chunk in chunks_of(payload, self.seen):
                self.write(chunk)
            if payload.status == StepStatus.WAITING_FOR_USER and payload.approval == ApprovalDecision.PENDING:
                for call in payload.tool_calls:  # nobody can press Approve while the cell runs
                    sys.stdout.write(f"\n⏸ {call.name}: denied ({NO_APPROVAL})\n")
                    self.conversation.deny(call.id, NO_APPROVAL, by="%%chat cell")
            sys.stdout.flush()

    def write(self, chunk: Any) -> None:
        if isinstance(chunk, Thought):
            if not self.thinking:
                sys.stdout.write("💭 ")
                self.thinking = True
            sys.stdout.write(chunk.text)
        elif isinstance(chunk, Text):
            if self.thinking:
                sys.stdout.write("\n\n")
                self.thinking = False
            sys.stdout.write(chunk.text)
        elif isinstance(chunk, ToolCall):
            sys.stdout.write(f"\n🔧 {chunk.name}({chunk.args})\n")


def run_turn(conv, prompt: str, in_kernel: bool) -> ChatAnswer:
    """Run one turn, streaming into the cell; the answer, or the error as an exception
    (the partial turn is shown first, as markdown)."""
    from IPython.display import Markdown, clear_output, display

    before = conv.turn_count
    printer = _Printer(conv)
    plumbing_of(conv).add_listener(printer)
    failure: BaseException | None = None
    try:
        response = conv.ask(prompt)
    except (NbagentError, KeyboardInterrupt) as exc:
        failure = exc
    finally:
        plumbing_of(conv).remove_listener(printer)
        sys.stdout.write("\n")
        sys.stdout.flush()
    if conv.turn_count == before:  # refused before a turn opened
        raise failure if failure is not None else ProtocolError("%%chat: no turn ran")
    starts = conv.turn_start_indices
    steps = conv.history[starts[-1]:] if starts else conv.history
    markdown = turn_markdown(steps, conv.turns[-1])
    if in_kernel:
        clear_output(wait=True)  # the streamed text gives way to the rendered turn
    if failure is not None:
        display(Markdown(markdown))
        raise failure
    return ChatAnswer(response.text, markdown, response)
