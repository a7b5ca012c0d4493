"""nbagent's MCP thread: one daemon thread with its own event loop, holding every MCP session.

An MCP session is a set of anyio tasks bound to the event loop that opened it. Callers come from
many loops (each ``asyncio.run``, Jupyter's kernel loop, ``ask()``'s helper loop), so sessions
live here and calls are bridged with ``run_coroutine_threadsafe``. The thread starts on first use;
at interpreter exit (a kernel's shutdown too) every tracked server is stopped.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import importlib
import sys
import threading
import weakref
from typing import Any, Protocol, TypeVar
from collections.abc import Awaitable

from ..core.errors import NbagentError, RequestTimeout

T = TypeVar("T")
EXIT_TIMEOUT = 10.0  # seconds interpreter exit (or close()) waits for servers to stop


class Stoppable(Protocol):
    """What the thread stops at exit: an MCP server."""

    @property
    def serving(self) -> bool: ...

    async def stop_here(self) -> None: ...


class _McpThread:
    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.lock = threading.Lock()
        self.servers: weakref.WeakSet[Any] = weakref.WeakSet()

    def get(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None:
                import logging

                logging.getLogger("mcp").addHandler(logging.NullHandler())  # errors reach users typed
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="nbagent-mcp", daemon=True).start()
                atexit.register(_stop_all_at_exit)
                self.loop = loop
            return self.loop


_THREAD = _McpThread()


def mcp_thread_started() -> bool:
    return _THREAD.loop is not None


def track(server: Stoppable) -> None:
    """Stop ``server`` at interpreter exit (held weakly)."""
    _THREAD.servers.add(server)


async def run_on_mcp_thread(coro: Awaitable[T]) -> T:
    """Await ``coro`` run on the MCP thread (cancelling the await cancels it there)."""
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, _THREAD.get()))  # type: ignore[arg-type]


def wait_on_mcp_thread(coro: Awaitable[T], timeout: float | None) -> T:
    """Block until ``coro`` has run on the MCP thread (``timeout`` seconds at most)."""
    loop = _THREAD.get()
    future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)  # type: ignore[arg-type]
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise RequestTimeout(f"MCP servers did not stop within {timeout:g} s") from None


def warm_up_sdk() -> None:
    """Import jsonschema on a side thread while a server starts: the SDK imports it at the first
    tool call, and that import takes seconds (it compiles URI grammars)."""
    if "jsonschema" not in sys.modules:
        threading.Thread(target=importlib.import_module, args=("jsonschema",), daemon=True,
                         name="nbagent-mcp-warmup").start()


def stop_all() -> None:
    """Stop every running MCP server (interpreter exit calls this)."""
    if _THREAD.loop is None:
        return
    servers = [s for s in list(_THREAD.servers) if s.serving]

    async def stop_them() -> None:
        await asyncio.gather(*(s.stop_here() for s in servers), return_exceptions=True)

    if servers:
        try:
            wait_on_mcp_thread(stop_them(), EXIT_TIMEOUT)
        except NbagentError:
            pass


def _stop_all_at_exit() -> None:
    stop_all()
    loop = _THREAD.loop
    if loop is not None and not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)
