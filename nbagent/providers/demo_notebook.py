"""The demo model's notebook moves: with ``list_variables`` / ``describe_variable`` /
``run_python`` among its tools it looks at the variable a prompt names and runs a small step;
with ``read_notebook`` / ``edit_cell`` / ``run_cell`` it fixes the error in a cell.

One turn goes: ``list_variables`` (skipped when the prompt has ``@name`` variables attached),
``describe_variable`` of the first listed variable the prompt names as a whole word, then
``run_python`` with code fitted to it (a group-by sum and a bar chart when the prompt asks for a
plot "by" a column, else ``head()`` or ``describe()``), then an answer. Deterministic: the same
history gives the same moves.

A "fix the error" turn (``fix_move``: the prompt asks to fix an error): ``read_notebook``, then, if
the answer names the last error's cell, ``edit_cell`` of that cell with a fixed source -- a
``NameError`` or ``KeyError`` whose name is a near miss of a name or a string the notebook's other
cells define (``revnue`` -> ``revenue``) -- then ``run_cell`` of it, then a report.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from collections.abc import Sequence

from ..core.messages import Message, ToolResultPart, ToolUsePart
from ..core.steps import ToolCall
from ..core.text import data_block
from .base import ToolSpec

LIST, DESCRIBE, RUN = "list_variables", "describe_variable", "run_python"
NOTEBOOK_TOOLS = frozenset({LIST, DESCRIBE, RUN})
ATTACHED = re.compile(r"^\[Attached notebook variables: (.+)\]$", re.M)
_LISTED = re.compile(r"^- ([A-Za-z_]\w*): ", re.M)
_COLUMN = re.compile(r"^- (.+?): (\S+), [\d,]+ of [\d,]+ non-null$", re.M)
_PLOT_WORDS = ("plot", "chart", "graph", "visuali", "draw")
_NUMERIC = ("int", "uint", "float", "Int", "UInt", "Float")
SCRIPTED = "\n\n*(nbagent demo model: this answer is scripted.)*"
READ_NB, EDIT, RUN_CELL = "read_notebook", "edit_cell", "run_cell"
FIX_TOOLS = frozenset({READ_NB, EDIT, RUN_CELL})
_FIX_WORDS = re.compile(r"\b(fix|repair|error|traceback|exception|fails?|failing|broken)\b", re.I)
# read_notebook's head: "Last error in the kernel, from cell [3] id=x, In [4]:" then the error fenced
_LAST_ERROR = re.compile(r"^Last error in the (?:kernel|saved outputs), from cell \[(\d+)\] id=([\w-]+)[^\n]*\n`{3,}\n(.+)",
                         re.M)
_DESCRIBED = re.compile(r"\A\[variable [^\]\n]*\]\n(`{3,})\n(.*)\n\1\Z", re.S)
_FENCED = re.compile(r"\A(`{3,})[^\n`]*\n(.*)\n\1\Z", re.S)
_CELL_HEAD = re.compile(r"^--- cell \[(\d+)\] id=([\w-]+) (\w+)[^\n]*---$", re.M)
_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(?!=)", re.M)
_STRINGS = re.compile(r"[\"']([A-Za-z_][\w ]{0,40})[\"']")


@dataclass
class DemoMove:
    """One answer of the demo model: its thought, its text and maybe a tool call."""

    thought: str
    answer: str
    call: ToolCall | None = None


def notebook_move(messages: Sequence[Message], tools: list[ToolSpec], prompt: str, n: int) -> DemoMove | None:
    """The next move of a notebook turn, or None when the notebook tools do not apply."""
    names = {t.name for t in tools}
    if DESCRIBE not in names or not prompt:
        return None
    calls, results = _turn_so_far(messages)
    if any(c.name not in NOTEBOOK_TOOLS for c in calls):
        return None  # another tool's turn
    attached = _attached(prompt)
    if not calls:
        if attached:
            return _run_or_describe(attached[0], _attached_description(prompt, attached[0]), prompt, names, n)
        if LIST in names:
            return DemoMove("The user mentions their data; first I list the notebook's variables.",
                            "Let me see which variables your notebook has.", ToolCall(f"call_demo_{n}", LIST, {}))
        return None
    last = calls[-1]
    result = results.get(last.id)
    if result is None:
        return None
    if result.is_error:
        return DemoMove(f"`{last.name}` failed; I will tell the user.",
                        f"The `{last.name}` call did not work:\n\n{data_block(_short(result.content, 600))}" + SCRIPTED)
    if last.name == LIST:
        return _describe_named(own_text(prompt), result.content, n)
    if last.name == DESCRIBE:
        return _run_or_describe(str(last.args.get("name", "")), result.content, prompt, names, n)
    return _report_run(str(last.args.get("code", "")), result.content)


def _turn_so_far(messages: Sequence[Message]) -> tuple[list[ToolUsePart], dict[str, ToolResultPart]]:
    """The tool calls since the last user prompt, and their results by call id."""
    start = 0
    for i, m in enumerate(messages):
        if m.role == "user" and m.text:
            start = i
    calls: list[ToolUsePart] = []
    results: dict[str, ToolResultPart] = {}
    for m in messages[start + 1:]:
        calls += m.tool_uses
        results.update({r.tool_use_id: r for r in m.tool_results})
    return calls, results


def own_text(prompt: str) -> str:
    """The prompt without the variable descriptions attached to it."""
    found = ATTACHED.search(prompt)
    return prompt[:found.start()].rstrip() if found else prompt


def _attached(prompt: str) -> list[str]:
    found = ATTACHED.search(prompt)
    return [n.strip().lstrip("@") for n in found.group(1).split(",")] if found else []


def _attached_description(prompt: str, name: str) -> str:
    marker = f"--- @{name} ---\n"
    start = prompt.find(marker)
    if start < 0:
        return ""
    rest = prompt[start + len(marker):]
    end = rest.find("\n--- @")
    return rest if end < 0 else rest[:end]


def _word_in(word: str, text: str) -> int:
    """Where ``word`` first occurs in ``text`` as a whole word (case-insensitive), or -1."""
    found = re.search(rf"(?<![\w-]){re.escape(word.lower())}(?![\w-])", text.lower())
    return found.start() if found else -1


def _describe_named(prompt: str, listing: str, n: int) -> DemoMove:
    variables = _LISTED.findall(listing)
    named = sorted((pos, v) for v in variables if (pos := _word_in(v, prompt)) >= 0)
    if not named:
        shown = ", ".join(f"`{v}`" for v in variables) or "none yet"
        return DemoMove("No variable the prompt names is in the notebook; I will list what there is.",
                        f"Your notebook's variables: {shown}. Name one in your prompt and I will look at it." + SCRIPTED)
    name = named[0][1]
    return DemoMove(f"The prompt names `{name}`, a notebook variable; I will look at what it holds.",
                    f"Let me describe `{name}`.", ToolCall(f"call_demo_{n}", DESCRIBE, {"name": name}))


def _run_or_describe(name: str, description: str, prompt: str, tools: set[str], n: int) -> DemoMove:
    described = _DESCRIBED.match(description.strip())  # describe_variable fences the description
    description = described.group(2) if described else description
    if RUN not in tools:
        first = description.strip().splitlines()[0] if description.strip() else name
        return DemoMove(f"I know what `{name}` holds; no tool can run code, so I will summarise it.",
                        f"`{name}` is {_short(first.partition(': ')[2] or first, 200)}." + SCRIPTED)
    code = fitted_code(name, description, own_text(prompt))
    return DemoMove(f"`{name}` fits the question; a small piece of code will answer it, and the user "
                    "approves it before it runs.",
                    f"I will run this in your kernel:\n\n```python\n{code}\n```",
                    ToolCall(f"call_demo_{n}", RUN, {"code": code}))


def fitted_code(name: str, description: str, prompt: str) -> str:
    """A small, safe piece of code about variable ``name`` that fits ``prompt``."""
    first = description.strip().splitlines()[0] if description.strip() else ""
    if ": DataFrame" not in first:
        return name
    columns = _COLUMN.findall(description)
    numeric = [c for c, t in columns if t.startswith(_NUMERIC)]
    other = [c for c, t in columns if not t.startswith(_NUMERIC)]
    wants_plot = any(w in prompt.lower() for w in _PLOT_WORDS)
    value = _first_named(numeric, prompt)
    group = _group_column(other, prompt)
    if value and group and (wants_plot or _word_in("by", prompt) >= 0):
        target = f"by_{group}" if group.isidentifier() else "grouped"
        lines = [f"{target} = {name}.groupby({group!r}, sort=False)[{value!r}].sum()"]
        if wants_plot:
            lines.append(f"{target}.plot(kind=\"bar\", title={f'{value} by {group}'!r})")
        return "\n".join(lines + [target])
    if any(w in prompt.lower() for w in ("describe", "summar", "statistic")):
        return f"{name}.describe()"
    return f"{name}.head()"


def _first_named(columns: list[str], prompt: str) -> str | None:
    named = sorted((pos, c) for c in columns if (pos := _word_in(c, prompt)) >= 0)
    return named[0][1] if named else (columns[0] if columns else None)


def _group_column(columns: list[str], prompt: str) -> str | None:
    after_by = re.search(r"\bby\s+(\w+)", prompt, re.I)
    if after_by:
        for c in columns:
            if c.lower() == after_by.group(1).lower():
                return c
    return _first_named(columns, prompt)


def _report_run(code: str, result: str) -> DemoMove:
    return DemoMove("The code ran; I will report what it gave.",
                    f"The code ran in your kernel ({len(code.splitlines())} line(s); `%chat_code` puts it in "
                    f"a new cell). It gave:\n\n{data_block(_short(result, 800))}"
                    + SCRIPTED)


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# --- "fix the error in the cell above" ------------------------------------------------------------


def fix_move(messages: Sequence[Message], tools: list[ToolSpec], prompt: str, n: int) -> DemoMove | None:
    """The next move of a "fix the error" turn, or None when it does not apply."""
    names = {t.name for t in tools}
    asked = re.split(r"^\[Attached notebook (?:variables|cells): ", prompt, maxsplit=1, flags=re.M)[0]
    if not {READ_NB, EDIT, RUN_CELL} <= names or not _FIX_WORDS.search(asked):
        return None
    calls, results = _turn_so_far(messages)
    if any(c.name not in FIX_TOOLS for c in calls):
        return None
    if not calls:
        return DemoMove("The user asks me to fix an error; first I read the notebook and its last error.",
                        "Let me read your notebook.", ToolCall(f"call_demo_{n}", READ_NB, {}))
    last = calls[-1]
    result = results.get(last.id)
    if result is None:
        return None
    if result.is_error:
        return DemoMove(f"`{last.name}` failed; I will tell the user why.",
                        f"The `{last.name}` call did not work:\n\n{data_block(_short(result.content, 600))}" + SCRIPTED)
    if last.name == READ_NB:
        return _propose_fix(result.content, n)
    if last.name == EDIT:
        cell_id = str(last.args.get("cell_id", ""))
        return DemoMove("The edit is in; running the cell shows whether the error is gone.",
                        "The cell is edited; now I run it.", ToolCall(f"call_demo_{n}", RUN_CELL, {"cell_id": cell_id}))
    return DemoMove("The fixed cell ran without an error; I will report what it gave.",
                    f"Fixed: the cell runs clean now. It gave:\n\n{data_block(_short(result.content, 600))}\n\n"
                    "Undo on the edit's card (or `conv.undo(call_id)`) puts the old source back." + SCRIPTED)


def _propose_fix(read: str, n: int) -> DemoMove:
    """The fix of the last error ``read`` (what ``read_notebook`` returned) shows."""
    found = _LAST_ERROR.search(read)
    if found is None:
        return DemoMove("The notebook shows no error, so there is nothing to fix.",
                        "I read your notebook: no cell shows an error, and the kernel has raised none." + SCRIPTED)
    position, cell_id, error = found.group(1), found.group(2), found.group(3)
    sources = _cell_sources(read)
    source = sources.get(cell_id)
    fixed = fixed_source(source, error, [s for c, s in sources.items() if c != cell_id]) if source else None
    if fixed is None:
        return DemoMove(f"Cell [{position}] raised `{error}`; I have no scripted fix for it.",
                        f"Cell [{position}] raised `{error}`. The demo model only fixes a misspelt name or key; "
                        "a real model can do more." + SCRIPTED)
    return DemoMove(f"Cell [{position}] raised `{error}`: a near miss of a name the notebook defines. "
                    "I will propose the corrected cell; the user sees the diff and approves it.",
                    f"Cell [{position}] raised `{error}`. Here is the fix:\n\n```python\n{fixed}\n```",
                    ToolCall(f"call_demo_{n}", EDIT, {"cell_id": cell_id, "source": fixed}))


def _cell_sources(read: str) -> dict[str, str]:
    """Each cell's source as ``read_notebook`` showed it (cells shown cut left out)."""
    heads = list(_CELL_HEAD.finditer(read))
    out = {}
    for head, following in zip(heads, heads[1:] + [None]):
        body = read[head.end() + 1: following.start() if following else len(read)]
        source = re.split(r"^out \d+: ", body, maxsplit=1, flags=re.M)[0].rstrip("\n")
        fenced = _FENCED.match(source)  # the source is fenced as data
        if fenced is not None and "[source cut to fit the budget" not in source:
            out[head.group(2)] = fenced.group(2)
    return out


def fixed_source(source: str, error: str, others: list[str]) -> str | None:
    """``source`` with the misspelt name or key of ``error`` replaced by its closest match among the
    names and strings ``others`` define (None: no such fix)."""
    missing = re.match(r"NameError: name '(\w+)' is not defined", error)
    key = re.match(r"KeyError: '([^']+)'", error)
    if missing:
        wrong = missing.group(1)
        known = sorted({m for s in others for m in _ASSIGNED.findall(s)} - {wrong})
        pattern = rf"(?<![\w.]){re.escape(wrong)}(?!\w)"
    elif key:
        wrong = key.group(1)
        known = sorted({m for s in others for m in _STRINGS.findall(s)} - {wrong})
        pattern = rf"(?<=[\"']){re.escape(wrong)}(?=[\"'])"
    else:
        return None
    close = difflib.get_close_matches(wrong, known, n=1, cutoff=0.6)
    if not close or not re.search(pattern, source):
        return None
    return re.sub(pattern, close[0], source)
