"""The kernel's busy indicator while the agent's code runs in it (``run_python``, ``run_cell``).

A turn sent from the chat box runs beside the kernel's cells: ipykernel said ``idle`` when the box's
message was handled, so the front end shows an idle kernel while the agent's code runs. Around that
code :func:`kernel_busy` publishes ``status: busy`` on IOPub, as ipykernel does around a cell, and
``idle`` when the code ends. The rules keep real cells from ever being misreported:

- Nothing is published while a shell request (a cell) is being handled: the kernel already says
  busy, and that cell's own ``idle`` ends it. So a turn asked from a cell (``await
  chat_to_completion``, ``%%chat``, ``ask()``) publishes nothing.
- ``idle`` is published only if ``busy`` was, and only when no cell is running then: a cell the user
  started meanwhile keeps its busy until it ends.
- Each status names a parent of its own (``msg_type`` ``nbagent_agent_code``, a fresh ``msg_id``), never
  a cell's request: nbclient and other clients wait for the idle of *their* request and ignore it;
  JupyterLab and Notebook 7 show the latest status whatever its parent.
- ``busy`` is said again every ``BUSY_EVERY`` seconds while the code runs, since ipykernel says
  ``idle`` after each widget message it handles meanwhile (Stop, the live notebook's answers).

Only with ipykernel's main-shell lock (ipykernel 7); elsewhere nothing is published.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

BUSY_EVERY = 0.25  # seconds between repeats of ``busy`` while the agent's code runs


def _kernel() -> Any:
    """The running ipykernel kernel, if it has what the rules above need (else None)."""
    if "ipykernel" not in sys.modules:
        return None
    from ipykernel.kernelbase import Kernel

    if not Kernel.initialized():
        return None
    kernel = Kernel.instance()
    needed = ("_main_asyncio_lock", "session", "iopub_socket")
    if any(getattr(kernel, name, None) is None for name in needed):
        return None
    return kernel


def _cell_running(kernel: Any) -> bool:
    """Whether a shell request (a cell) is being handled now."""
    return bool(kernel._main_asyncio_lock.locked())


def _publish(kernel: Any, state: str, parent: dict) -> None:
    topic = getattr(kernel, "_topic", None)
    kernel.session.send(kernel.iopub_socket, "status", {"execution_state": state}, parent=parent,
                        ident=topic("status") if callable(topic) else None)


@contextlib.asynccontextmanager
async def kernel_busy() -> AsyncIterator[None]:
    """While the body runs, the kernel's indicator says busy (see the module docstring)."""
    kernel = _kernel()
    if kernel is None:
        yield
        return
    parent = kernel.session.msg_header("nbagent_agent_code")  # a parent of its own, never a cell's
    said = [False]

    async def keep_busy() -> None:
        while True:
            if not _cell_running(kernel):
                _publish(kernel, "busy", parent)
                said[0] = True
            await asyncio.sleep(BUSY_EVERY)

    task = asyncio.ensure_future(keep_busy())
    try:
        yield
    finally:
        task.cancel()
        if said[0] and not _cell_running(kernel):
            _publish(kernel, "idle", parent)
