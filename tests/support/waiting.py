"""Waiting in a test for something another task, thread or process does: the condition is polled until
it holds, under one generous deadline that only guards against a hang. A slow or loaded machine then
waits longer instead of failing (or, worse, going on as if the thing had happened)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEADLINE = 60.0  # seconds: a hang guard, never a speed check


async def until(condition: Callable[[], object], what: str, timeout: float = DEADLINE, every: float = 0.005) -> None:
    """Let the event loop run until ``condition()`` is true; an ``AssertionError`` naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {timeout:g} s: {what}")
        await asyncio.sleep(every)


def wait_for(condition: Callable[[], object], what: str, timeout: float = DEADLINE, every: float = 0.01) -> None:
    """Block this thread until ``condition()`` is true; an ``AssertionError`` naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {timeout:g} s: {what}")
        time.sleep(every)
