"""Isolated tools (``@tool(isolate=True)``): each call runs in a fresh subprocess.

A thread cannot be killed; a process can. The call starts a ``spawn`` process that imports the
tool's function by module and name, calls it and sends back its result or exception, pickled.
A timeout or Stop cancels the await: the process is terminated, then killed if it lingers, and
reaped, so a CPU-bound or hung tool really stops.

The function must be importable: defined at the top level of a module (a ``.py`` file), not a
lambda, a nested function or a notebook cell. Its arguments and result must pickle.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from ..core.errors import ConfigError

POLL_SECONDS = 0.02  # how often the waiting call looks for the child's answer
KILL_GRACE_SECONDS = 1.0  # after terminate(), how long a child may take to exit before kill()


@dataclass(frozen=True)
class FunctionRef:
    """Where a subprocess finds a tool's function: its module and qualified name."""

    module: str
    qualname: str


def function_ref(fn: Callable[..., Any], tool_name: str) -> FunctionRef:
    """The import path of ``fn``; a ``config`` error when a fresh process could not import it."""
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    why = ""
    if not (inspect.isfunction(fn) or inspect.isbuiltin(fn)) or not module or not qualname:
        why = f"it is a {type(fn).__name__}, not a function"
    elif "<lambda>" in qualname:
        why = "it is a lambda"
    elif "<locals>" in qualname:
        why = "it is defined inside another function"
    elif module == "__main__" and not getattr(sys.modules.get("__main__"), "__file__", None):
        why = "it is defined in a notebook cell or an interactive session"
    if why:
        raise ConfigError(f"tool {tool_name!r} cannot be isolated: {why}. isolate=True runs the tool in a "
                          "new process, which imports its function: define it at the top level of a module "
                          "(a .py file) and import it from there")
    return FunctionRef(str(module), str(qualname))


def _same(obj: Any) -> Any:
    return obj


def resolve(ref: FunctionRef, unwrap: Callable[[Any], Any] = _same) -> Callable[..., Any]:
    """The function ``ref`` names, passed through ``unwrap`` (tools.py's ``handler_of`` gives a decorated
    Tool's handler: this module imports nothing of the tools)."""
    obj: Any = importlib.import_module(ref.module)
    for part in ref.qualname.split("."):
        obj = getattr(obj, part)
    return unwrap(obj)


async def run_in_process(ref: FunctionRef, kwargs: dict, unwrap: Callable[[Any], Any] = _same) -> Any:
    """Call the function ``ref`` names (through ``unwrap``, a module-level function the new process
    imports) with ``kwargs`` in a new process; its result or exception.

    Cancelling the await (a timeout, Stop) terminates the process, then kills it.
    """
    import multiprocessing  # only isolated tools need it: ``import nbagent`` stays light

    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(ref, kwargs, sender, unwrap), name=f"nbagent-tool-{ref.qualname}",
                          daemon=True)
    try:
        process.start()
        sender.close()  # the child holds the only writer: its exit ends the pipe
        while not receiver.poll():
            await asyncio.sleep(POLL_SECONDS)
        try:
            ok, payload = receiver.recv()
        except EOFError:
            process.join(KILL_GRACE_SECONDS)
            raise RuntimeError(f"the isolated tool's process ended (exit code {process.exitcode}) "
                               "without a result") from None
    finally:
        receiver.close()
        stop_process(process)
    if ok:
        return payload
    raise payload


def stop_process(process: Any) -> None:
    """Terminate ``process``, kill it if it lingers, and reap it."""
    if process.pid is None:  # never started
        return
    if process.is_alive():
        process.terminate()
        process.join(KILL_GRACE_SECONDS)
    if process.is_alive():
        process.kill()
    process.join(KILL_GRACE_SECONDS)
    process.close()


def _child(ref: FunctionRef, kwargs: dict, sender: Any, unwrap: Callable[[Any], Any]) -> None:
    """The subprocess: call the function and send ``(True, result)`` or ``(False, exception)``."""
    try:
        fn = resolve(ref, unwrap)
        value = fn(**kwargs)
        if inspect.isawaitable(value):
            value = asyncio.run(_awaited(value))
        answer: tuple[bool, Any] = (True, value)
    except BaseException as exc:  # sent back to the caller
        answer = (False, exc)
    try:
        sender.send(answer)
    except Exception as exc:  # the result or exception does not pickle
        what = "result" if answer[0] else f"exception {type(answer[1]).__name__}: {answer[1]}"
        sender.send((False, TypeError(f"the isolated tool's {what} cannot be sent back: {exc}")))
    finally:
        sender.close()


async def _awaited(value: Any) -> Any:
    return await value
