"""Tools for the isolated-tool tests: module-level, so a spawned process can import them."""

from __future__ import annotations

import os
from pathlib import Path

from nbagent import tool


@tool(isolate=True)
def whose_pid(a: int, b: int) -> dict:
    """Add two numbers and say which process did it."""
    return {"sum": a + b, "pid": os.getpid()}


@tool(isolate=True)
def fails(reason: str) -> str:
    """Raise a ValueError."""
    raise ValueError(reason)


@tool(isolate=True, timeout=1)
def spin(pid_file: str) -> str:
    """Write this process's pid, then burn CPU for ever."""
    Path(pid_file).write_text(str(os.getpid()))
    while True:
        pass
