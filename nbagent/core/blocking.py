"""Run a coroutine to completion from synchronous code, even inside a running loop.

Jupyter runs cells inside an event loop, where ``asyncio.run`` fails with
"event loop already running". nbagent runs the coroutine on one private loop
in a daemon thread instead and blocks the caller until it is done. The same
loop is reused by every call, so pooled HTTP connections stay warm.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from collections.abc import Callable, Coroutine

_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="nbagent-sync", daemon=True
            )
            thread.start()
            _loop = loop
        return _loop


def run_sync(coro: Coroutine[Any, Any, Any], on_cancel: Callable[[], None] | None = None) -> Any:
    """Block until ``coro`` finishes on nbagent's loop thread; return its result.

    Ctrl-C (KeyboardInterrupt) calls ``on_cancel`` (e.g. ``interrupt``) and
    waits for the coroutine to wind down before re-raising.
    """
    loop = _background_loop()
    if threading.current_thread().name == "nbagent-sync":
        raise RuntimeError("run_sync called from nbagent's own loop thread; use await")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except KeyboardInterrupt:
        if on_cancel is not None:
            on_cancel()
        try:
            return future.result(timeout=10)
        except Exception:
            future.cancel()
        raise
