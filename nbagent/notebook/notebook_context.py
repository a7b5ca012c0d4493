"""``read_notebook``'s answer: a notebook's cells as text for a model, never over a token budget.

Each cell shows its id (what ``edit_cell`` takes), the position a user sees (``[3]``, 1-based),
its type, execution count and source, then one short line or block per output: text and
tracebacks trimmed (colour codes removed), an image, HTML or a widget as one line naming its type
and size. Every part's cost is estimated (about four characters a token); when the whole is over
``budget_tokens``, the biggest outputs are cut to one line first, then the biggest sources (those
cells are not "read": ``edit_cell`` asks for them whole), then the last cells are left out, each
cut saying how to see it. The last error the kernel raised (its exception, trimmed traceback and
the cell it came from) comes first.

What the notebook holds is data, never instructions: each source, output and error is fenced
(``core.text.data_block``: a fence its text cannot close) under a line of ours saying what it is,
and output text has its terminal codes removed and key-shaped text redacted
(``variables.output_for_model``, the rule ``describe_variable`` follows). Sources are shown as
written: ``edit_cell`` needs them whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..core.text import data_block
from .notebook_doc import NotebookCell, NotebookSnapshot
from .notebook_history import KernelError
from .variables import output_for_model

DEFAULT_BUDGET_TOKENS = 6_000
CHARS_PER_TOKEN = 4
TEXT_MAX_LINES = 40  # an output's text, at most (head and tail kept)
TEXT_MAX_CHARS = 2_000
TRACEBACK_MAX_LINES = 24
SOURCE_CUT_LINES = 3  # a source cut to fit keeps this many first lines
_IMAGE = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml")
_WIDGET = "application/vnd.jupyter.widget-view+json"
_MIME = re.compile(r"[\w.+-]{1,60}/[\w.+-]{1,100}")


def tokens(text: str) -> int:
    """About how many tokens ``text`` costs (four characters a token, at least one)."""
    return max(1, (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)


def as_text(value: Any) -> str:
    """An nbformat multiline string (a string or a list of lines) as one string."""
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else ("" if value is None else str(value))


def trim_lines(text: str, max_lines: int = TEXT_MAX_LINES, max_chars: int = TEXT_MAX_CHARS) -> str:
    """``text`` cut to its first and last lines (and characters), saying what was cut."""
    text = text.rstrip("\n")
    total_lines = text.count("\n") + 1
    if total_lines > max_lines:
        head, tail = max_lines * 2 // 3, max_lines // 3
        first = text.split("\n", head)[:head]
        last = text.rsplit("\n", tail)[-tail:] if tail else []
        text = "\n".join(first + [f"… [{total_lines - head - tail:,} lines cut] …"] + last)
    if len(text) > max_chars:
        head = max_chars * 2 // 3
        text = text[:head] + f" … [{len(text) - max_chars:,} characters cut] … " + text[-(max_chars - head):]
    return text


def size_text(n: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def output_summary(output: dict[str, Any]) -> tuple[str, str | None]:
    """One output as a model reads it: our label (its kind, a rich value's type and size) and its
    text (None: it has none), trimmed, without terminal codes, keys redacted."""
    kind = output.get("output_type", "")
    if kind == "stream":
        name = output.get("name")
        label = f"[{name}]" if name in ("stdout", "stderr") else "[stream]"
        return label, trim_lines(output_for_model(as_text(output.get("text"))))
    if kind == "error":
        lines = [output_for_model(as_text(line)) for line in output.get("traceback") or []]
        body = trim_lines("\n".join(lines), TRACEBACK_MAX_LINES, TEXT_MAX_CHARS) if lines else ""
        head = f"{as_text(output.get('ename', 'Error'))}: {as_text(output.get('evalue'))}"[:TEXT_MAX_CHARS]
        return "[error]", output_for_model(head) + ("\n" + body if body else "")
    raw = output.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    parts = []
    for mime, value in data.items():
        if mime == "text/plain":
            continue
        size = len(value) if isinstance(value, (str, list)) else len(str(value))
        if not isinstance(mime, str) or not _MIME.fullmatch(mime):
            parts.append(f"[an output of another type: {size_text(size)}]")
        elif mime in _IMAGE:
            raw = size * 3 // 4 if mime != "image/svg+xml" else size
            parts.append(f"[{mime}: an image, {size_text(raw)}]")
        elif mime == _WIDGET:
            parts.append("[a widget]")
        else:
            parts.append(f"[{mime}: {size_text(size)}]")
    label = "[result]" if kind == "execute_result" else "[display]"
    text = trim_lines(output_for_model(as_text(data["text/plain"]))) if "text/plain" in data else None
    if not parts and text is None:
        return label + " (empty)", None
    return " ".join([label] + parts), text


def last_output_error(cells: tuple[NotebookCell, ...]) -> tuple[NotebookCell, dict[str, Any]] | None:
    """The saved error output of the cell that ran last, when it has one."""
    found = [(c.execution_count or 0, c.index, c, o) for c in cells for o in c.outputs
             if o.get("output_type") == "error"]
    if not found:
        return None
    _, _, cell, output = max(found, key=lambda f: (f[0], f[1]))
    return cell, output


@dataclass
class _Part:
    label: str  # our words: a header, an output's kind
    kind: str = "head"  # "output" | "source" | "head"
    cell: NotebookCell | None = None
    data: str | None = None  # the notebook's own text, fenced as data
    info: str = ""  # the fence's label (the source's language)
    note: str = ""  # our words after the data (what was cut)
    cost: int = 0
    cut: bool = False

    @property
    def text(self) -> str:
        pieces = [self.label] if self.label else []
        if self.data is not None:
            pieces.append(data_block(self.data, self.info))
        return "\n".join(pieces + ([self.note] if self.note else []))


@dataclass
class NotebookView:
    """The text ``read_notebook`` returns, and the cells it showed whole (their sources)."""

    text: str
    whole: dict[str, str] = field(default_factory=dict)  # cell id -> the source shown in full
    shown: list[str] = field(default_factory=list)  # ids of the cells shown (whole or cut)
    tokens: int = 0


@dataclass(frozen=True)
class ViewOptions:
    """What to show: a range of positions (1-based, inclusive) or one cell, within a budget."""

    start: int | None = None
    end: int | None = None
    cell_id: str | None = None
    budget_tokens: int = DEFAULT_BUDGET_TOKENS


def notebook_view(snapshot: NotebookSnapshot, where: str, options: ViewOptions,
                  error: KernelError | None = None, notes: tuple[str, ...] = (), fixed_by: str = "") -> NotebookView:
    """The notebook as text (see the module docstring); ``where`` names the source it was read from;
    ``fixed_by``: the cell id that ran clean after the kernel's last error (that error is then old news)."""
    cells = _selected(snapshot, options)
    error_cell = _error_cell(snapshot, error) if not fixed_by else None
    head = [f"Notebook read from {where}; {len(snapshot.cells)} cell(s)."] + list(notes)
    if options.cell_id is not None and not cells:
        head.append(f"No cell has id {options.cell_id!r}.")
    elif len(cells) < len(snapshot.cells):
        head.append(f"Showing cells [{cells[0].index + 1}]–[{cells[-1].index + 1}]." if cells else "No cell in that range.")
    if fixed_by and error is not None:
        fixed = snapshot.cell(fixed_by)
        where_fixed = _where(fixed) if fixed is not None else f"cell {fixed_by}"
        head.append(f"The kernel's last error is older than the clean run of {where_fixed} by run_cell; no newer "
                    "error. That error was:\n" + data_block(output_for_model(error.exception)))
    else:
        head.append(_error_text(snapshot, error, error_cell))
    head.append("Cells are named by id (positions [n] move when cells are added; ids do not): pass the id to "
                "edit_cell, run_cell, or insert_cell(after=...).")
    parts = [_Part("\n".join(h for h in head if h))]
    keep = {snapshot.active_cell_id, error_cell.id if error_cell else None}
    for cell in cells:
        parts.append(_Part(_cell_header(cell, snapshot, error_cell), cell=cell))
        info = "python" if cell.cell_type == "code" else "markdown" if cell.cell_type == "markdown" else ""
        parts.append(_Part("", "source", cell, cell.source, info))
        for n, output in enumerate(cell.outputs, 1):
            label, text = output_summary(output)
            parts.append(_Part(f"out {n}: {label}", "output", cell, text))
    for p in parts:
        p.cost = tokens(p.text)
    _fit(parts, options.budget_tokens, keep)
    return _assemble(parts)


def _selected(snapshot: NotebookSnapshot, options: ViewOptions) -> list[NotebookCell]:
    if options.cell_id is not None:
        cell = snapshot.cell(options.cell_id)
        return [cell] if cell is not None else []
    first = max(1, options.start or 1)
    last = options.end if options.end is not None else len(snapshot.cells)
    return [c for c in snapshot.cells if first <= c.index + 1 <= last]


def _error_cell(snapshot: NotebookSnapshot, error: KernelError | None) -> NotebookCell | None:
    if error is None:
        return None
    if error.execution_count is not None:
        by_count = [c for c in snapshot.cells if c.execution_count == error.execution_count]
        if by_count:
            return by_count[-1]
    if error.source.strip():
        same = [c for c in snapshot.cells if c.source.rstrip() == error.source.rstrip()]
        if same:
            return same[-1]
    return None


def _where(cell: NotebookCell) -> str:
    return f"cell [{cell.index + 1}] id={cell.id}"


def _error_text(snapshot: NotebookSnapshot, error: KernelError | None, cell: NotebookCell | None) -> str:
    if error is not None:
        where = "a cell whose code is not in this notebook now (edited since, or another notebook's)"
        if cell is not None:
            where = f"cell [{cell.index + 1}] id={cell.id}"
            if error.source and cell.source.rstrip() != error.source.rstrip():
                where += " (the cell was edited since it raised)"
        count = f", In [{error.execution_count}]" if error.execution_count is not None else ""
        trace = trim_lines(error.traceback, TRACEBACK_MAX_LINES)
        return (f"Last error in the kernel, from {where}{count}:\n"
                + data_block(output_for_model(error.exception + ("\n" + trace if trace else ""))))
    saved = last_output_error(snapshot.cells)
    if saved is None:
        return "No error: the kernel has raised none, and no saved output is an error."
    cell, output = saved
    exception = f"{as_text(output.get('ename', 'Error'))}: {as_text(output.get('evalue'))}"[:TEXT_MAX_CHARS]
    return (f"Last error in the saved outputs, from cell [{cell.index + 1}] id={cell.id}:\n"
            + data_block(output_for_model(exception)))


def _cell_header(cell: NotebookCell, snapshot: NotebookSnapshot, error_cell: NotebookCell | None) -> str:
    bits = [f"--- cell [{cell.index + 1}] id={cell.id} {cell.cell_type}"]
    if cell.cell_type == "code":
        bits.append(f"In [{cell.execution_count}]" if cell.execution_count is not None else "not run")
    if cell.id == snapshot.active_cell_id:
        bits.append("ACTIVE (the user's selected cell)")
    if cell.id == snapshot.chat_cell_id:
        bits.append("the chat's cell")
    if error_cell is not None and cell.id == error_cell.id:
        bits.append("raised the last error")
    return ", ".join(bits) + " ---"


def _fit(parts: list[_Part], budget: int, keep: set[str | None]) -> None:
    """Cut the biggest outputs, then the biggest sources, then the last cells, until under ``budget``."""
    total = sum(p.cost for p in parts)
    for kind in ("output", "source"):
        for part in sorted((p for p in parts if p.kind == kind), key=lambda p: -p.cost):
            if total <= budget:
                return
            if kind == "source" and part.cell is not None and part.cell.id in keep and part.cost < budget // 2:
                continue
            before = part.cost
            _cut(part)
            part.cost = tokens(part.text)
            total -= before - part.cost
    if total <= budget:
        return
    # still over: leave out the last cells (at least one cell stays), then say where they start
    first_cell = next((i for i, p in enumerate(parts) if p.cell is not None), len(parts))
    cut_at = len(parts)
    while total + 40 > budget and cut_at > first_cell + 1:
        cell = parts[cut_at - 1].cell
        while cut_at > first_cell and parts[cut_at - 1].cell is cell:
            cut_at -= 1
            total -= parts[cut_at].cost
    if cut_at < len(parts):
        first_left_out = parts[cut_at].cell
        start = first_left_out.index + 1 if first_left_out is not None else 0
        del parts[cut_at:]
        note = _Part(f"… cells from [{start}] on left out to stay within {budget:,} tokens: "
                     f"read_notebook(start={start}) shows them.")
        note.cost = tokens(note.text)
        parts.append(note)


def _cut(part: _Part) -> None:
    """``part`` cut to its first line (an output) or lines (a source), with a note saying so."""
    part.cut = True
    if part.kind == "output":
        part.data = part.data.split("\n", 1)[0][:160] if part.data is not None else None
        part.note = f"… [output cut to fit the budget: about {part.cost:,} tokens]"
        return
    cell = part.cell
    assert cell is not None
    part.data = "\n".join((part.data or "").splitlines()[:SOURCE_CUT_LINES])[:400]
    part.note = (f"… [source cut to fit the budget: about {part.cost:,} tokens; "
                 f"read_notebook(cell_id={cell.id!r}) shows it whole, as edit_cell needs]")


def _assemble(parts: list[_Part]) -> NotebookView:
    view = NotebookView("\n".join(p.text for p in parts))
    for p in parts:
        if p.kind == "source" and p.cell is not None:
            view.shown.append(p.cell.id)
            if not p.cut:
                view.whole[p.cell.id] = p.cell.source
    view.tokens = sum(p.cost for p in parts)
    return view
