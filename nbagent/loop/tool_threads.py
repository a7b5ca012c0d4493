"""Sync tool handlers run on daemon threads, with a time limit.

``asyncio.to_thread`` shares one bounded pool: a few hung calls starve every
later one, and its non-daemon threads keep a script from exiting. Here each
sync call gets its own daemon thread, so a hung handler only costs its own
thread: the turn gets a timeout result, later calls run, and the interpreter
can exit.

A timed-out thread cannot be killed: it lives until its handler returns. Once
:data:`MAX_ABANDONED_THREADS` of them are alive, a tool that has such stuck calls is
refused with :class:`TooManyHungTools` (an error result the model and the user see,
naming the stuck tools) instead of piling up threads; a tool with no stuck call still
runs, so a quick tool keeps working beside a hung one (at most one stuck call more per
tool can be added that way).
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
_abandoned: dict[threading.Thread, str] = {}  # each stuck thread -> the tool (function) it runs
_abandoned_lock = threading.Lock()


class TooManyHungTools(Exception):
    """Too many earlier sync tool calls timed out and still run: no new thread is started."""


def stuck_tools() -> dict[str, int]:
    """The tools whose timed-out threads still run, with how many each (most first)."""
    with _abandoned_lock:
        for thread in [t for t in _abandoned if not t.is_alive()]:
            del _abandoned[thread]
        counts: dict[str, int] = {}
        for label in _abandoned.values():
            counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _refusal(label: str, stuck: dict[str, int]) -> str:
    hung = sum(stuck.values())
    named = ", ".join(f"{name!r} ({n})" for name, n in list(stuck.items())[:5])
    return (f"{hung} earlier tool calls timed out and their threads still run (at most {MAX_ABANDONED_THREADS}); "
            f"stuck: {named}. {label!r} is one of them, so this call starts no new thread until some finish; "
            "tools that are not stuck still run. Fix or time out the hanging tool, or restart the kernel "
            "(nbagent.loop.tool_threads.MAX_ABANDONED_THREADS sets the bound)")


async def run_in_daemon_thread(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on a fresh daemon thread; cancelling the await abandons the thread
    (counted under ``fn``'s name: a function with too many stuck calls is refused)."""
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

    label = getattr(fn, "__name__", None) or type(fn).__name__
    stuck = stuck_tools()
    if sum(stuck.values()) >= MAX_ABANDONED_THREADS and label in stuck:
        raise TooManyHungTools(_refusal(label, stuck))
    thread = threading.Thread(target=work, name=f"nbagent-tool-{next(_names)}", daemon=True)
    thread.start()
    try:
        return await future
    except asyncio.CancelledError:  # a timeout or Stop: the thread runs on, counted until it ends
        if thread.is_alive():
            with _abandoned_lock:
                _abandoned[thread] = label
        raise


class ToolTimeout(Exception):
    """A tool ran longer than its time limit."""

    def __init__(self, name: str, seconds: float, killed: bool = False) -> None:
        fate = "its process was killed" if killed else "was abandoned"
        super().__init__(f"tool {name!r} did not finish within {seconds:g} s and {fate}")
