"""Running a piece of code like a notebook cell, on a thread of its own, in a namespace.

``await run_cell(code, namespace, timeout=...)`` compiles the code with ``ast``, executes its
statements, evaluates a last expression, and returns a :class:`CellResult`: the value, what the
code printed to stdout and stderr, the error (a traceback trimmed to the code's own frames) and
a matplotlib figure it made. Past ``timeout`` seconds, or when the awaiting task is cancelled
(the conversation's Stop), the code is interrupted: :class:`CodeInterrupted` is raised inside
its thread (``PyThreadState_SetAsyncExc``), so pure-Python loops end at once. Code blocked in
one long C call (``time.sleep(600)``, a socket read) ends only when that call returns; the
awaiting side does not wait for it.
"""

from __future__ import annotations

import ast
import asyncio
import ctypes
import io
import itertools
import linecache
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, TypeVar
from collections.abc import Callable

from .kernel_status import kernel_busy

INTERRUPT_RETRIES = 5  # an interrupt is raised again while the code still runs (it may catch one)
INTERRUPT_SPACING = 0.5  # seconds between those tries
WAIT_SLICE = 0.1  # seconds a time-limited call's waiter blocks at a time (an interrupt lands between)
GRACE_SECONDS = 1.0  # how long a timeout waits for the interrupted code to unwind
TRACEBACK_FRAMES = 6  # frames of the code's own traceback kept (the last ones)

_ids = itertools.count(1)
T = TypeVar("T")


class CodeInterrupted(KeyboardInterrupt):
    """Raised inside running code to stop it (timeout or Stop)."""


@dataclass
class CellResult:
    """What running one piece of code gave."""

    code: str
    value: Any = None
    has_value: bool = False  # the code ended with an expression (its value may be None)
    stdout: str = ""
    stderr: str = ""
    error: BaseException | None = None
    traceback: str = ""  # the trimmed traceback of ``error``
    timed_out: bool = False
    interrupted: bool = False
    figures: list = field(default_factory=list)  # matplotlib figures the code made (closed)
    value_text: str | None = None  # the value as text, made by ``render`` inside the time limit
    note: str = ""  # a line for the model and the card about where the code ran (run_cell's kernel path)


class _Run:
    """One execution's shared state between its thread and the awaiting side."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = False  # inside the user's code: an interrupt may be raised now
        self.done = threading.Event()
        self.thread_id: int | None = None
        self.result: CellResult | None = None

    def interrupt(self) -> None:
        """Raise CodeInterrupted in the code's thread, again while it goes on (daemon helper)."""

        def keep_trying() -> None:
            for _ in range(INTERRUPT_RETRIES):
                with self.lock:
                    if not self.running or self.thread_id is None:
                        return
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread_id),
                                                               ctypes.py_object(CodeInterrupted))
                if self.done.wait(INTERRUPT_SPACING):
                    return

        threading.Thread(target=keep_trying, name="nbagent-cell-interrupt", daemon=True).start()


async def run_cell(code: str, namespace: dict, *, timeout: float | None = None,
                   render: Callable[[Any], str] | None = None) -> CellResult:
    """Run ``code`` in ``namespace`` on a fresh daemon thread (see the module docstring).

    ``render`` turns a last expression's value into the result's ``value_text`` on the code's
    thread, inside its time limit (Stop and the timeout interrupt it as they do the code).
    A syntax error comes back as the result's ``error``; cancelling the await interrupts the
    code and re-raises ``CancelledError``.
    """
    try:
        body, last = _compile(code)
    except SyntaxError as exc:
        return CellResult(code, error=exc, traceback="".join(traceback.format_exception_only(exc)).rstrip())
    run = _Run()
    finished, notify = _loop_signal(asyncio.get_running_loop())

    def work() -> None:
        run.thread_id = threading.get_ident()
        try:
            run.result = _execute(code, body, last, namespace, run, render)
        except BaseException as exc:  # an interrupt that landed outside the code itself
            run.result = run.result or CellResult(code, error=exc, interrupted=True)
        finally:
            run.done.set()
            notify()

    async with kernel_busy():  # the kernel's indicator says busy while the code runs (kernel_status.py)
        threading.Thread(target=work, name=f"nbagent-cell-{next(_ids)}", daemon=True).start()
        try:
            await asyncio.wait_for(asyncio.shield(finished), timeout)
        except TimeoutError:
            run.interrupt()
            await asyncio.to_thread(run.done.wait, GRACE_SECONDS)
            result = run.result or CellResult(code, interrupted=True)
            result.timed_out = True
            return result
        except asyncio.CancelledError:
            run.interrupt()
            raise
    assert run.result is not None
    return run.result


def _loop_signal(loop: asyncio.AbstractEventLoop) -> tuple[asyncio.Future, Callable[[], None]]:
    """A future of ``loop`` and the function any thread calls to resolve it (once the loop is
    closed, nobody waits and the call does nothing)."""
    finished = loop.create_future()

    def deliver() -> None:
        if not finished.done():
            finished.set_result(None)

    def notify() -> None:
        try:
            loop.call_soon_threadsafe(deliver)
        except RuntimeError:  # the loop is closed
            pass

    return finished, notify


def _compile(code: str) -> tuple[Any, Any]:
    """The code's statements and its last expression (or None), compiled under a cell filename."""
    filename = f"<run_python-{next(_ids)}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # tracebacks show lines
    tree = ast.parse(code, filename=filename, mode="exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body[-1].value)
        tree.body.pop()
    body = compile(tree, filename, "exec")
    return body, (compile(last, filename, "eval") if last is not None else None)


def _execute(code: str, body: Any, last: Any, namespace: dict, run: _Run,
             render: Callable[[Any], str] | None = None) -> CellResult:
    result = CellResult(code)
    out, err = io.StringIO(), io.StringIO()
    figures_before = _figure_numbers()
    ROUTER.attach(out, err)
    try:
        try:
            with run.lock:
                run.running = True
            exec(body, namespace)
            if last is not None:
                result.value, result.has_value = eval(last, namespace), True
                if render is not None and result.value is not None:
                    result.value_text = render(result.value)
        finally:
            with run.lock:
                run.running = False
    except CodeInterrupted as exc:
        result.error, result.interrupted = exc, True
    except BaseException as exc:  # the code's own error, SystemExit included
        result.error = exc
        result.traceback = trimmed_traceback(exc)
    finally:
        ROUTER.detach()
        result.stdout, result.stderr = out.getvalue(), err.getvalue()
        result.figures = _new_figures(figures_before)
    return result


def trimmed_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` from the code's own first frame on (at most TRACEBACK_FRAMES)."""
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<run_python-"):
        tb = tb.tb_next
    frames = traceback.extract_tb(tb) if tb is not None else traceback.StackSummary()
    lines = ["Traceback (most recent call last):\n"]
    if len(frames) > TRACEBACK_FRAMES:
        lines.append(f"  … {len(frames) - TRACEBACK_FRAMES} frames left out …\n")
        frames = traceback.StackSummary.from_list(frames[-TRACEBACK_FRAMES:])
    lines += frames.format()
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


# --- matplotlib figures the code made ---------------------------------------------------------


def _figure_numbers() -> set[int]:
    pyplot = sys.modules.get("matplotlib.pyplot")  # never imported here: only if the code did
    return set(pyplot.get_fignums()) if pyplot is not None else set()


def _new_figures(before: set[int]) -> list:
    """The figures made since ``before``, closed (so a later cell does not show them again)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    figures = []
    for number in sorted(set(pyplot.get_fignums()) - before):
        figure = pyplot.figure(number)
        figures.append(figure)
        pyplot.close(figure)
    return figures


# --- stdout / stderr of the code's thread ------------------------------------------------------


class _ThreadStream:
    """A sys.stdout / sys.stderr stand-in: the code's threads write to their buffers, others
    through to the stream it replaced."""

    def __init__(self, fallback: Any, buffers: dict[int, io.StringIO]) -> None:
        self.fallback = fallback
        self.buffers = buffers

    def write(self, text: str) -> int:
        buffer = self.buffers.get(threading.get_ident())
        return buffer.write(text) if buffer is not None else self.fallback.write(text)

    def flush(self) -> None:
        if threading.get_ident() not in self.buffers:
            self.fallback.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fallback, name)


class ThreadOutputRouter:
    """Puts thread-routing streams on sys.stdout / sys.stderr while some code runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.out: dict[int, io.StringIO] = {}
        self.err: dict[int, io.StringIO] = {}
        self.streams: tuple[_ThreadStream, _ThreadStream] | None = None

    def attach(self, out: io.StringIO, err: io.StringIO) -> None:
        ident = threading.get_ident()
        with self.lock:
            self.out[ident], self.err[ident] = out, err
            if self.streams is None:
                self.streams = (_ThreadStream(sys.stdout, self.out), _ThreadStream(sys.stderr, self.err))
                sys.stdout, sys.stderr = self.streams

    def detach(self) -> None:
        ident = threading.get_ident()
        with self.lock:
            self.out.pop(ident, None)
            self.err.pop(ident, None)
            if self.out or self.streams is None:
                return
            stdout, stderr = self.streams
            if sys.stdout is stdout:  # someone else replaced it meanwhile: leave theirs
                sys.stdout = stdout.fallback
            if sys.stderr is stderr:
                sys.stderr = stderr.fallback
            self.streams = None


ROUTER = ThreadOutputRouter()


# --- any call, time-limited on a thread of its own -------------------------------------------


class TimeLimitExceeded(Exception):
    """A call given to :func:`call_with_time_limit` ran past its limit and was interrupted."""

    def __init__(self, seconds: float, ended: bool) -> None:
        self.seconds, self.ended = seconds, ended
        fate = "was interrupted" if ended else "was interrupted and left running (it is blocked in C code)"
        super().__init__(f"took longer than {seconds:g} s and {fate}")


def _start_call(fn: Callable[[], Any], on_done: Callable[[], None] | None = None) -> tuple[_Run, list]:
    """``fn()`` started on a fresh daemon thread an interrupt can reach; its outcome, ``(True, value)``
    or ``(False, exception)``, lands in the returned list before ``run.done`` is set (then ``on_done()``)."""
    run = _Run()
    outcome: list = []

    def work() -> None:
        run.thread_id = threading.get_ident()
        try:
            with run.lock:
                run.running = True
            try:
                value = fn()
            finally:
                with run.lock:
                    run.running = False
            outcome.append((True, value))
        except BaseException as exc:  # delivered to the caller (an interrupt that landed too)
            outcome.append((False, exc))
        finally:
            run.done.set()
            if on_done is not None:
                on_done()

    threading.Thread(target=work, name=f"nbagent-inspect-{next(_ids)}", daemon=True).start()
    return run, outcome


def _wait(run: _Run, seconds: float) -> bool:
    """``run.done.wait(seconds)`` in short slices: an interrupt raised in the waiting thread (it runs
    inside another time-limited call that was stopped) lands between them and is passed on."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return run.done.is_set()
        if run.done.wait(min(WAIT_SLICE, left)):
            return True


def _outcome(outcome: list, seconds: float, ended: bool) -> Any:
    if not ended or not outcome or (not outcome[0][0] and isinstance(outcome[0][1], CodeInterrupted)):
        raise TimeLimitExceeded(seconds, ended)  # interrupted at the limit (or just as it was reached)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def call_with_time_limit(fn: Callable[[], T], seconds: float) -> T:
    """``fn()`` on a fresh daemon thread, for at most ``seconds``: past them it is interrupted like
    code (``CodeInterrupted`` raised in its thread) and :class:`TimeLimitExceeded` is raised here.

    The caller only waits (an interrupt of the caller, Ctrl-C or Stop, gets through at once); a
    call stuck in one C call cannot be interrupted and is left to end on its own (a daemon)."""
    run, outcome = _start_call(fn)
    try:
        finished = _wait(run, seconds)
    except BaseException:  # the caller was interrupted (Ctrl-C): so is the call
        run.interrupt()
        raise
    if not finished:
        run.interrupt()
        return _outcome(outcome, seconds, run.done.wait(GRACE_SECONDS))
    return _outcome(outcome, seconds, True)


async def await_with_time_limit(fn: Callable[[], T], seconds: float) -> T:
    """:func:`call_with_time_limit` for the event loop: ``fn()`` runs on its own daemon thread while
    the loop goes on (a widget's Stop gets through); cancelling the await interrupts ``fn`` and
    re-raises ``CancelledError``; past ``seconds`` it is interrupted and :class:`TimeLimitExceeded`
    is raised."""
    finished, notify = _loop_signal(asyncio.get_running_loop())
    run, outcome = _start_call(fn, notify)
    try:  # asyncio.wait, not wait_for: 3.11's wait_for can swallow a cancel that lands as fn ends
        done, _ = await asyncio.wait([finished], timeout=seconds)
        if not done:
            run.interrupt()
            await asyncio.wait([finished], timeout=GRACE_SECONDS)
    except asyncio.CancelledError:
        run.interrupt()
        raise
    return _outcome(outcome, seconds, run.done.is_set())
