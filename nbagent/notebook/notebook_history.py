"""The kernel's own record of what ran: its input history as a read-only ``NotebookBackend``, its
notebook file's path, and the last error a cell raised.

- ``HistoryBackend`` shows ``In[1]``, ``In[2]``, ... as cells (ids ``in-1``, ``in-2``; the value of
  ``Out[n]`` as the cell's output, its repr made within ``OUT_SECONDS`` on a thread of its own). It
  cannot change anything: every write is a ``config`` error.
- ``kernel_notebook_path(namespace)`` is the ``.ipynb`` the kernel belongs to, when the front end
  said: VS Code sets ``__vsc_ipynb_file__`` in the namespace, Jupyter Server sets ``JPY_SESSION_NAME``
  in the kernel's environment (ipykernel copies it to ``__session__``).
- ``cell_running()``: whether a cell is running now (a live notebook cannot answer until it ends).
- ``last_kernel_error()`` is the exception the last failing cell raised (IPython keeps it in
  ``sys.last_value``), with a trimmed traceback and the execution count of its cell: exact when
  ``watch_kernel_errors()`` was listening when it happened (``post_run_cell``), else found by
  matching the traceback's code to the input history.
"""

from __future__ import annotations

import linecache
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.text import strip_terminal_codes
from .cell_runner import TimeLimitExceeded, call_with_time_limit
from .notebook_doc import NotebookCell, NotebookSnapshot, NotebookSource, ReadOnlyBackend
from .variables import capped_repr

TRACEBACK_FRAMES = 6  # frames of a cell's traceback kept (the last ones)
TRACEBACK_MAX_CHARS = 3_000
OUT_MAX_CHARS = 2_000  # Out[n]'s repr, at most
OUT_SECONDS = 1.0  # one Out[n]'s repr is made in at most this (a hanging __repr__ is interrupted)
OUT_TOTAL_SECONDS = 5.0  # ... and all of them
READ_ONLY = ("this notebook is read from the kernel's input history, which cannot be edited: there is "
             "no live notebook (JupyterLab / Notebook 7 with the chat widget shown) and no notebook file "
             "for this kernel. Pass one: notebook_tools(notebook='analysis.ipynb')")


def ipython_shell() -> Any:
    """The running IPython shell, or None (IPython is never imported here)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def strip_ansi(text: str) -> str:
    """``text`` without terminal codes (``core.text.strip_terminal_codes``)."""
    return strip_terminal_codes(text)


class HistoryBackend(ReadOnlyBackend):
    """The kernel's input history as cells (see the module docstring); read only."""

    source = NotebookSource.HISTORY
    label = "history: the kernel's input history In[1], In[2], … (read only)"

    def __init__(self, shell: Any = None) -> None:
        super().__init__(lambda: ConfigError(READ_ONLY))
        self._shell = shell

    async def read(self) -> NotebookSnapshot:
        shell = self._shell or ipython_shell()
        if shell is None:
            return NotebookSnapshot(NotebookSource.HISTORY)
        raw = list(getattr(shell.history_manager, "input_hist_raw", []) or [])
        out = dict(shell.user_ns.get("Out") or {})
        cells = []
        deadline = time.monotonic() + OUT_TOTAL_SECONDS
        for n in range(1, len(raw)):
            outputs: tuple[dict[str, Any], ...] = ()
            if n in out:
                text = _repr(out[n], min(OUT_SECONDS, deadline - time.monotonic()))
                outputs = ({"output_type": "execute_result", "execution_count": n,
                            "data": {"text/plain": text}, "metadata": {}},)
            cells.append(NotebookCell(id=f"in-{n}", index=n - 1, source=str(raw[n]), execution_count=n,
                                      outputs=outputs))
        return NotebookSnapshot(NotebookSource.HISTORY, tuple(cells))


def _repr(value: Any, seconds: float) -> str:
    """``Out[n]``'s repr, capped while it is made, within ``seconds`` (on a thread of its own)."""
    kind = type(value).__name__
    if seconds <= 0:
        return f"<{kind}: not shown (the {OUT_TOTAL_SECONDS:g} s for the history's values were used up)>"
    try:
        text = call_with_time_limit(lambda: capped_repr(value, OUT_MAX_CHARS), seconds)
    except TimeLimitExceeded as exc:
        return f"<{kind}: not shown: its repr {exc}>"
    except Exception as exc:
        return f"<{kind}: repr failed: {type(exc).__name__}>"
    return text if len(text) <= OUT_MAX_CHARS else text[:OUT_MAX_CHARS] + " …"


def kernel_notebook_path(namespace: dict | None = None) -> Path | None:
    """The ``.ipynb`` this kernel runs, when VS Code or Jupyter Server said (and it exists)."""
    candidates = [(namespace or {}).get("__vsc_ipynb_file__"), os.environ.get("JPY_SESSION_NAME"),
                  (namespace or {}).get("__session__")]
    for value in candidates:
        if isinstance(value, str) and value.endswith(".ipynb"):
            path = Path(value).expanduser()
            if path.is_file():
                return path.resolve()
    return None


# --- the last error a cell raised ---------------------------------------------------------------


@dataclass(frozen=True)
class KernelError:
    """The exception the kernel's last failing cell raised."""

    exception: str  # "KeyError: 'revnue'"
    traceback: str  # trimmed, without colour codes
    execution_count: int | None = None  # the failing cell's In[n] (None: not known)
    source: str = ""  # that cell's code as it ran ("" when not known)
    key: int = 0  # id() of the exception object: the same error read twice has the same key


@dataclass
class _Seen:
    value: BaseException | None = None
    count: int | None = None
    source: str = ""


_seen = _Seen()
_watched: set[int] = set()  # id() of the shells listening
_running: set[int] = set()  # id() of the shells running a cell now


def watch_kernel_errors(shell: Any = None) -> None:
    """Remember, from now on, which execution each cell error comes from, and whether a cell is
    running now (``cell_running``); once per shell."""
    shell = shell or ipython_shell()
    if shell is None or id(shell) in _watched or not hasattr(shell, "events"):
        return

    def before_cell(info: Any) -> None:
        _running.add(id(shell))

    def after_cell(result: Any) -> None:
        _running.discard(id(shell))
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        if error is not None:
            info = getattr(result, "info", None)
            _seen.value, _seen.count = error, getattr(result, "execution_count", None)
            _seen.source = str(getattr(info, "raw_cell", "") or "")

    shell.events.register("pre_run_cell", before_cell)
    shell.events.register("post_run_cell", after_cell)
    _watched.add(id(shell))


def cell_running(shell: Any = None) -> bool:
    """Whether the kernel is busy running a cell now (known once ``watch_kernel_errors`` listens):
    a live notebook's front end cannot answer the kernel until the cell ends."""
    shell = shell or ipython_shell()
    return shell is not None and id(shell) in _running


def last_kernel_error(shell: Any = None) -> KernelError | None:
    """The last error a cell raised in this kernel (None: none, or not in IPython)."""
    shell = shell or ipython_shell()
    value = getattr(sys, "last_value", None)
    if shell is None or not isinstance(value, BaseException):
        return None
    text = _trimmed(value)
    head = "".join(traceback.format_exception_only(type(value), value)).strip()
    head = strip_ansi(head.splitlines()[-1] if head else type(value).__name__)
    if _seen.value is value:
        return KernelError(head, text, _seen.count, _seen.source, id(value))
    count = _count_of(value, shell)
    raw = list(getattr(shell.history_manager, "input_hist_raw", []) or [])
    source = str(raw[count]) if count is not None and 0 < count < len(raw) else ""
    return KernelError(head, text, count, source, id(value))


def _trimmed(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    while len(frames) > 1 and f"{os.sep}IPython{os.sep}" in frames[0].filename:  # IPython's own run_code
        frames = traceback.StackSummary.from_list(list(frames)[1:])
    lines = ["Traceback (most recent call last):\n"]
    if len(frames) > TRACEBACK_FRAMES:
        lines.append(f"  … {len(frames) - TRACEBACK_FRAMES} frames left out …\n")
        frames = traceback.StackSummary.from_list(frames[-TRACEBACK_FRAMES:])
    lines += frames.format() + traceback.format_exception_only(type(exc), exc)
    text = strip_ansi("".join(lines).rstrip())
    return text if len(text) <= TRACEBACK_MAX_CHARS else "…\n" + text[-TRACEBACK_MAX_CHARS:]


def _count_of(exc: BaseException, shell: Any) -> int | None:
    """The In[n] whose code is the traceback's first frame (the cell's), latest first."""
    tb = exc.__traceback__
    parsed = list(shell.user_ns.get("In") or getattr(shell.history_manager, "input_hist_parsed", []) or [])
    while tb is not None:
        lines = linecache.getlines(tb.tb_frame.f_code.co_filename)
        if lines:
            code = "".join(lines).rstrip()
            for n in range(len(parsed) - 1, 0, -1):
                if str(parsed[n]).rstrip() == code:
                    return n
        tb = tb.tb_next
    return None
