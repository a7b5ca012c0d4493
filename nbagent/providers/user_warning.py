"""A warning for the person who wrote the call, not for nbagent's developers.

``warn_user(message, told)`` names the caller's own line (a cell, a script), never a file inside
nbagent (``…/nbagent/agent.py:177`` with nbagent's source line under it). Run from a cell of an
IPython shell or Jupyter kernel it waits for the cell's end and is left out when ``told()`` is true
then: a chat shown by that cell already says the same, so the cell does not say it twice.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType
from typing import Any
from collections.abc import Callable

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # …/nbagent/
_SHELL_FILE = os.sep + os.path.join("IPython", "core", "interactiveshell.py")


def warn_user(message: str, told: Callable[[], bool] = lambda: False) -> None:
    """Warn (``RuntimeWarning``) at the first line outside nbagent; in a cell, at its end unless ``told()``."""
    frame: FrameType | None = sys._getframe(0)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    shell = _running_shell(frame)
    if shell is None or frame is None:
        warnings.warn(message, RuntimeWarning, stacklevel=level)
        return
    filename, lineno, module_globals = frame.f_code.co_filename, frame.f_lineno, frame.f_globals

    def at_cell_end(*_: object) -> None:
        shell.events.unregister("post_run_cell", at_cell_end)
        if not told():
            warnings.warn_explicit(message, RuntimeWarning, filename, lineno, module_globals=module_globals)

    shell.events.register("post_run_cell", at_cell_end)


def _running_shell(frame: FrameType | None) -> Any:
    """The IPython shell whose cell is running this code, or None (a script, a test, a thread)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "events"):
        return None
    while frame is not None:
        if frame.f_code.co_filename.endswith(_SHELL_FILE):
            return shell
        frame = frame.f_back
    return None
