"""Tools that let the agent work in the notebook: ``notebook_tools()`` and ``code_cells()``.

``notebook_tools(namespace=None, *, run_code=True, approve_code=True, notebook=None)`` gives these
tools over a namespace (by default the running IPython kernel's user namespace):

- ``list_variables()`` — the user's variables: type, shape or length, dtypes, memory size;
- ``describe_variable(name)`` — a DataFrame's columns, ``head()`` and ``describe()``, or what a
  user would print; an unknown name is an error suggesting close names;
- ``run_python(code)`` — runs the code like a cell in that namespace (``cell_runner.py``) and
  returns the last expression's value, stdout and stderr; an exception is a tool error with a
  trimmed traceback. A figure it makes, or a DataFrame it returns, shows in the tool card, with
  the variables it created, changed or deleted (``var_changes.py``, ``Step.changes``). It
  asks for approval whatever the policy unless ``approve_code=False``; the connection's
  ``tool_timeout`` (or ``timeout=``) and Stop interrupt it; the model's text is capped;
- ``read_notebook``, ``edit_cell``, ``insert_cell`` and ``run_cell`` (cell_tools.py) over the notebook
  ``notebook`` names: a path to an ``.ipynb``, or None for the live notebook, else the kernel's own
  file, else its input history (notebook_select.py).

``code_cells(history)`` lists the code ``run_python`` ran in a conversation, in order.
"""

from __future__ import annotations

import contextvars
import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

from ..core.errors import NbagentError
from ..core.steps import ApprovalDecision, Step, StepStatus, changes_line
from ..loop.tools import Tool, ToolOutput, format_result, rich_display
from .cell_runner import CellResult, run_cell
from .var_changes import changes, snapshot_or_none
from .variables import cap, capped_repr, describe_variable_text, list_variables_text, shell_namespace

RUN_PYTHON = "run_python"
OUTPUT_MAX_CHARS = 4_000  # run_python's text for the model, at most (plus the notes of cuts)
SMALL_ITEMS = 10_000  # a value with more items in all is shown by its first items
NOT_IN_KERNEL = ("notebook_tools(): no IPython kernel is running here, so there is no notebook "
                 "namespace; pass one: notebook_tools(namespace=globals())")
RUN_PYTHON_DOC = (
    "Run Python code in the user's notebook kernel, like a notebook cell: variables it defines "
    "stay in the notebook. Returns the value of the last expression, what the code printed "
    "(stdout, stderr) or the error's traceback. Matplotlib figures the code makes and a DataFrame "
    "it ends with are shown to the user; do not call plt.show().")
APPROVAL_NOTE = " The user approves the code before it runs."
_timeout_of_call: contextvars.ContextVar[float | None] = contextvars.ContextVar("nbagent_cell_timeout",
                                                                                 default=None)


def kernel_namespace() -> dict:
    """The running IPython shell's user namespace, or a ``config`` error saying to pass one."""
    namespace = shell_namespace()
    if namespace is None:
        raise NbagentError(NOT_IN_KERNEL, kind="config")
    return namespace


def call_timeout() -> float | None:
    """The time limit of the code-running call in progress (``run_python``, ``run_cell``)."""
    return _timeout_of_call.get()


def notebook_tools(namespace: dict | None = None, *, run_code: bool = True, approve_code: bool = True,
                   timeout: float | None = None, max_output_chars: int = OUTPUT_MAX_CHARS,
                   notebook: Any = None, budget_tokens: int | None = None) -> list[Tool]:
    """``list_variables``, ``describe_variable``, ``read_notebook`` and (with ``run_code``)
    ``run_python``, ``edit_cell``, ``insert_cell`` and ``run_cell`` over ``namespace`` (default: the
    running kernel's). ``timeout`` (seconds) overrides the agent's ``tool_timeout`` for the code;
    ``notebook``: an ``.ipynb`` path or a ``NotebookBackend`` (None: the live notebook, else the
    kernel's file, else its history); ``budget_tokens`` caps ``read_notebook``'s answer."""
    from .cell_tools import cell_tools
    from .notebook_context import DEFAULT_BUDGET_TOKENS
    from .notebook_select import NotebookChoice

    if namespace is None:
        namespace = kernel_namespace()
    if not isinstance(namespace, dict):
        raise NbagentError(f"notebook_tools(): namespace must be a dict (e.g. globals()), not "
                           f"{type(namespace).__name__}", kind="config")

    def list_variables() -> str:
        """List the notebook's variables: name, type, shape or length, column dtypes and memory size."""
        return list_variables_text(namespace)

    def describe_variable(name: str) -> str:
        """Describe one notebook variable: a DataFrame's columns with dtypes, non-null counts,
        head() and describe(); for other values what printing them shows.

        Args:
            name: the variable's name, as list_variables shows it.
        """
        return describe_variable_text(namespace, name)

    choice = NotebookChoice(notebook, namespace)
    tools = [Tool.from_function(list_variables), Tool.from_function(describe_variable)]
    if run_code:
        tools.append(RunPythonTool(namespace, requires_approval=approve_code, timeout=timeout,
                                   max_output_chars=max_output_chars))
    return tools + cell_tools(choice, namespace, run_code=run_code, approve_code=approve_code, timeout=timeout,
                              max_output_chars=max_output_chars,
                              budget_tokens=budget_tokens or DEFAULT_BUDGET_TOKENS)


class RunPythonTool(Tool):
    """The ``run_python`` tool: its result carries the code's figure or table for the card."""

    def __init__(self, namespace: dict, *, requires_approval: bool = True, timeout: float | None = None,
                 max_output_chars: int = OUTPUT_MAX_CHARS) -> None:
        schema = {"type": "object", "properties": {"code": {
            "type": "string", "description": "Python source; a last expression is returned as the result."}},
            "required": ["code"]}
        description = RUN_PYTHON_DOC + (APPROVAL_NOTE if requires_approval else "")
        super().__init__(RUN_PYTHON, description, schema, self.execute, requires_approval,
                         max_result_chars=None)
        self.namespace = namespace
        self.cell_timeout = timeout
        self.max_output_chars = max_output_chars

    async def execute(self, code: str) -> CellResult:
        """Run ``code`` in the namespace (the time limit comes from ``run``)."""
        max_chars = self.max_output_chars
        return await run_cell(code, self.namespace, timeout=_timeout_of_call.get(),
                              render=lambda value: value_for_model(value, max_chars))

    async def run(self, args: dict | None = None, *, timeout: float | None = None) -> ToolOutput:
        """Validate and run the code; ``timeout`` is the connection's (``timeout=`` given to
        ``notebook_tools`` wins). The code, not the await, is stopped when time is up."""
        limit = self.cell_timeout if self.cell_timeout is not None else timeout
        args = {} if args is None else args
        problems = self.validate(args)
        if problems:
            msg = f"Invalid arguments for tool {self.name!r}: " + "; ".join(problems)
            return ToolOutput(text=msg, is_error=True, error=msg)
        token = _timeout_of_call.set(limit)
        before = snapshot_or_none(self.namespace)
        try:  # not through Tool.run: the result is never made into text outside the code's time limit
            result = await self.handler(**args)  # execute (run_cell keeps the time and interrupts)
        except Exception as exc:  # the handler refused (e.g. run_cell's unknown cell)
            msg = f"{type(exc).__name__}: {exc}"
            return ToolOutput(text=msg, is_error=True, error=msg)
        finally:
            _timeout_of_call.reset(token)
        if not isinstance(result, CellResult):
            return ToolOutput(text=format_result(result, self.max_output_chars), value=result)
        output = cell_output(result, self.max_output_chars, limit)
        after = snapshot_or_none(self.namespace)
        found = changes(before, after) if before is not None and after is not None else ()
        if not found:
            return output
        return dataclasses.replace(output, text=f"{output.text}\n[variables] {changes_line(found)}", changes=found)


def cell_output(result: CellResult, max_chars: int = OUTPUT_MAX_CHARS, timeout: float | None = None) -> ToolOutput:
    """The tool result of running code: the model's capped text, and a display for the card."""
    sections: list[tuple[str, str]] = []
    if result.stdout:
        sections.append(("stdout", result.stdout))
    if result.stderr:
        sections.append(("stderr", result.stderr))
    if result.timed_out:
        limit = f"{timeout:g} s" if timeout is not None else "its time limit"
        sections.append(("error", f"TimeoutError: the code ran longer than {limit} and was interrupted; "
                                  "what it assigned before that stays in the namespace"))
    elif result.interrupted:
        sections.append(("error", "The code was interrupted (Stop)."))
    elif result.error is not None:
        sections.append(("error", result.traceback or f"{type(result.error).__name__}: {result.error}"))
    elif result.has_value and result.value is not None:
        text = result.value_text if result.value_text is not None else value_for_model(result.value, max_chars)
        sections.append(("value", text))
    share = max(max_chars // max(len(sections), 1), 200)
    parts = [f"[{label}]\n{cap(text.rstrip(), share, 'of ' + label)}" for label, text in sections]
    parts += [_figure_note(f) for f in result.figures]
    text = "\n".join(parts) or "(the code ran; no output and no value)"
    if result.error is not None or result.timed_out:
        first = sections[-1][1].strip().splitlines()[-1] if sections else "error"
        return ToolOutput(text=text, is_error=True, value=result, error=first)
    return ToolOutput(text=text, value=result, display=_display(result))


def value_for_model(value: Any, max_chars: int = OUTPUT_MAX_CHARS) -> str:
    """A code's last value as the model's text, capped while it is made: a string as a cell's Out
    shows it (quoted); a small value as a tool result; a big container (past ``SMALL_ITEMS``
    items in all) as its first items, ``reprlib``-style, with its size."""
    if isinstance(value, (str, bytes, bytearray)):
        return capped_repr(value, max_chars)
    if isinstance(value, (list, tuple, dict, set, frozenset)) and not _small(value):
        return f"{capped_repr(value, max_chars)}\n[a {type(value).__name__} of {len(value):,} items; the first shown]"
    return format_result(value, max_chars)


def _small(value: Any) -> bool:
    """Whether a container holds at most SMALL_ITEMS items and strings, nested ones counted."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > SMALL_ITEMS:
            return False
        if isinstance(item, (list, tuple, set, frozenset)):
            if len(item) > SMALL_ITEMS:
                return False
            stack.extend(item)
        elif isinstance(item, dict):
            if len(item) > SMALL_ITEMS:
                return False
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (str, bytes)) and len(item) > SMALL_ITEMS * 10:
            return False
    return True


def _figure_note(figure: Any) -> str:
    return "[figure] " + format_result(figure, None)


def _display(result: CellResult) -> dict | None:
    """The card's rich part: the code's last figure, else a table (or image) it returned."""
    for figure in reversed(result.figures):
        shown = rich_display(figure)
        if shown:
            return shown
    if result.has_value:
        value = result.value
        from_matplotlib = (type(value).__module__ or "").startswith("matplotlib")
        figure = getattr(value, "figure", None) if from_matplotlib else None  # an Axes shows its figure
        shown = rich_display(figure) if figure is not None and not result.figures else None
        return shown or rich_display(value)
    return None


# --- the code the agent ran -----------------------------------------------------------------


class CodeStatus(str, enum.Enum):
    """How a ``run_python`` call ended."""

    OK = "ok"
    ERROR = "error"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class CodeCell:
    """One piece of code the agent ran with ``run_python``."""

    code: str
    call_id: str
    turn: int
    status: CodeStatus


_RAN = {ApprovalDecision.APPROVED, ApprovalDecision.AUTO, ApprovalDecision.POLICY_ALLOWED}


def code_cells(history: list[Step]) -> list[CodeCell]:
    """The code ``run_python`` ran in ``history``, in order (denied or never-run calls left out)."""
    cells = []
    for step in history:
        if not step.is_tool_run or not step.tool_calls:
            continue
        call = step.tool_calls[0]
        code = call.args.get("code") if isinstance(call.args, dict) else None
        if call.name != RUN_PYTHON or not isinstance(code, str) or step.approval not in _RAN:
            continue
        if step.status == StepStatus.DONE:
            status = CodeStatus.OK
        elif step.status == StepStatus.ERROR:
            status = CodeStatus.ERROR
        elif step.status == StepStatus.CANCELED:
            status = CodeStatus.INTERRUPTED
        else:
            continue  # still running
        cells.append(CodeCell(code, call.id, step.turn, status))
    return cells
