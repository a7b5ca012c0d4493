"""Sync tool handlers run on daemon threads, with a time limit.

``asyncio.to_thread`` shares one bounded pool: a few hung calls starve every
later one, and its non-daemon threads keep a script from exiting. Here each
sync call gets its own daemon thread, so a hung handler only costs its own
thread: the turn gets a timeout result, later calls run, and the interpreter
can exit.

A timed-out thread cannot be killed: it lives until its handler returns. At most
:data:`MAX_ABANDONED_THREADS` of them may be alive at once; past that, sync tools
are refused with :class:`TooManyHungTools` (an error result the model and the user
see) instead of piling up threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
from typing import Any
from collections.abc import Callable

DEFAULT_TOOL_TIMEOUT = 300.0  # seconds a tool may run before the model is told it timed out

MAX_ABANDONED_THREADS = 32  # timed-out sync tool threads still running; past it new sync calls are refused

_names = itertools.count(1)
_abandoned: set[threading.Thread] = set()
_abandoned_lock = threading.Lock()


class TooManyHungTools(Exception):
    """Too many earlier sync tool calls timed out and still run: no new thread is started."""


def abandoned_threads() -> int:
    """How many timed-out (abandoned) sync tool threads are still running."""
    with _abandoned_lock:
        _abandoned.difference_update([t for t in _abandoned if not t.is_alive()])
        return len(_abandoned)


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

    hung = abandoned_threads()
    if hung >= MAX_ABANDONED_THREADS:
        raise TooManyHungTools(
            f"{hung} earlier tool calls timed out and their threads still run (at most {MAX_ABANDONED_THREADS}); "
            "no new tool thread is started until some finish. Fix or time out the hanging tool, or restart "
            "the kernel (nbagent.loop.tool_threads.MAX_ABANDONED_THREADS sets the bound)")
    thread = threading.Thread(target=work, name=f"nbagent-tool-{next(_names)}", daemon=True)
    thread.start()
    try:
        return await future
    except asyncio.CancelledError:  # a timeout or Stop: the thread runs on, counted until it ends
        if thread.is_alive():
            with _abandoned_lock:
                _abandoned.add(thread)
        raise


class ToolTimeout(Exception):
    """A tool ran longer than its time limit."""

    def __init__(self, name: str, seconds: float, killed: bool = False) -> None:
        fate = "its process was killed" if killed else "was abandoned"
        super().__init__(f"tool {name!r} did not finish within {seconds:g} s and {fate}")
