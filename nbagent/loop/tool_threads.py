"""Sync tool handlers run on daemon threads, with a time limit.

``asyncio.to_thread`` shares one bounded pool: a few hung calls starve every
later one, and its non-daemon threads keep a script from exiting. Here each
sync call gets its own daemon thread, so a hung handler only costs its own
thread: the turn gets a timeout result, later calls run, and the interpreter
can exit.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
from typing import Any, Callable

DEFAULT_TOOL_TIMEOUT = 300.0  # seconds a tool may run before the model is told it timed out

_names = itertools.count(1)


async def run_in_daemon_thread(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on a fresh daemon thread; cancelling the await abandons the thread."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    context = contextvars.copy_context()

    def deliver(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        try:
            value, error = context.run(fn, *args, **kwargs), None
        except BaseException as exc:  # delivered to the awaiting task
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(deliver, value, error)
        except RuntimeError:  # the loop is closed: nobody waits for this result any more
            pass

    threading.Thread(target=work, name=f"nbagent-tool-{next(_names)}", daemon=True).start()
    return await future


class ToolTimeout(Exception):
    """A tool ran longer than its time limit."""

    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(f"tool {name!r} did not finish within {seconds:g} s and was abandoned")
