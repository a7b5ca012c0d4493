"""Running the tool calls of one model answer: policy and approvals, hooks, manual results.

Each call becomes a TOOL_CALL step (SYSTEM -> ENVIRONMENT) whose updates and
final ``ToolResultPart`` come out of :meth:`ToolRunner.run` in the order they
happen; calls run concurrently. ``approve`` / ``deny`` / ``add_tool_result``
may come from any thread.

Each execution step records who or what decided its fate (``decided_by``) and
when (``decided_at``): ``"user"`` (``approve`` / ``deny``, the widget's
buttons), ``"policy allow_all"`` / ``"policy deny_all"`` / ``"policy <function>"``,
``"hook <function>"`` (a ``pre_tool_use`` hook blocked it), ``"caller"`` (a
manual result; the conversation stamps its time), ``"interrupt"`` (the turn was
interrupted before a decision) and ``"loop"`` (the loop did not run it: token
limit, tool-call limit, a model error, the conversation's policy: ``tool_guard``) and ``"approval_wait"``
(nobody answered the approval request in time: the call is canceled with the reason given, not told that
the user interrupted).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from typing import Any
from collections.abc import AsyncGenerator, Callable

from ..core.connection import ToolGuard
from ..core.errors import ConfigError
from ..core.messages import Message, ToolResultPart, ToolUsePart
from ..core.text import clean_text, strip_terminal_codes
from ..core.steps import ApprovalDecision, Step, StepSource, StepStatus, StepTarget, StepType, ToolCall
from .hooks import Block, Hooks, Policy, call_hook, check_policy
from .tool_threads import DEFAULT_TOOL_TIMEOUT
from .tools import Tool, ToolCallContext, format_result, reset_current_call, set_current_call, to_tools

CANCELED_RESULT = "The user interrupted the turn before this tool call ran."
STOPPED_RESULT = "The user stopped this tool call while it ran (after {:.1f} s); it did not finish."
USER, CALLER, INTERRUPT, LOOP = "user", "caller", "interrupt", "loop"  # decided_by values
UNANSWERED = "approval_wait"  # decided_by of a call nobody approved in time (deny(..., by=UNANSWERED))
DENIED_RESULT = "The user denied this tool call."
POLICY_DENIED_RESULT = "This tool call was denied by {}."  # the policy: "policy deny_all", "policy <function>"
_END = object()


class ToolRunner:
    """Executes tool calls for a ModelConnection (see the module docstring)."""

    def __init__(self, tools: Any, *, auto_execute_tools: bool, policy: Policy, hooks: Hooks,
                 interrupted: threading.Event, active_tasks: set[asyncio.Task],
                 tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT, model: Callable[[], str] | None = None) -> None:
        self.model = model or (lambda: "")  # the model answering now (ToolCallContext.model)
        self.tools: dict[str, Tool] = to_tools(tools or ())
        self.auto_execute_tools = auto_execute_tools
        self.policy = check_policy(policy)
        self.hooks = hooks
        self.tool_timeout = tool_timeout  # seconds a tool may run (a tool's own timeout wins)
        self.interrupted = interrupted
        self.active_tasks = active_tasks  # the connection's: interrupt() cancels them
        self.decisions: dict[str, asyncio.Future] = {}
        self.pending_manual: dict[str, ToolCall] = {}
        self.manual_results: dict[str, ToolResultPart] = {}
        self.tool_guard: ToolGuard | None = None  # the conversation's policy: why a tool may not run, or ""

    def cancel_waits(self) -> None:
        """Release every call waiting for approval (as if interrupted)."""
        for fut in self.decisions.values():
            if not fut.done():
                fut.set_result(None)

    def approve(self, call_id: str, *, by: str = USER) -> None:
        """Let a waiting call run; ``by`` is who decided (the approval audit's ``decided_by``)."""
        self._decide(call_id, True, None, by)

    def deny(self, call_id: str, reason: str | None = None, *, by: str = USER) -> None:
        self._decide(call_id, False, reason, by)

    def _decide(self, call_id: str, allow: bool, reason: str | None, by: str) -> None:
        fut = self.decisions.get(call_id)
        if fut is None:
            raise ConfigError(f"no tool call {call_id!r} is waiting for approval")
        loop = fut.get_loop()

        def resolve() -> None:
            if not fut.done():
                fut.set_result((allow, reason, by or USER))

        try:
            same = asyncio.get_running_loop() is loop
        except RuntimeError:
            same = False
        if same:
            resolve()
        else:
            loop.call_soon_threadsafe(resolve)

    def add_tool_result(self, call_id: str, result: Any, *, is_error: bool = False) -> str:
        """Record the result of a call the turn stopped at; returns the text the model sees."""
        call = self.pending_manual.get(call_id)
        if call is None:
            raise ConfigError(f"no tool call {call_id!r} is waiting for a result")
        text = strip_terminal_codes(clean_text(format_result(result)))
        self.manual_results[call_id] = ToolResultPart(call_id, text, is_error, name=call.name)
        return text

    def close_manual_calls(self, continuing: bool) -> list[ToolResultPart]:
        """Before a new request, a result for every call the turn stopped at (to push to history)."""
        if not self.pending_manual:
            return []
        missing = [cid for cid in self.pending_manual if cid not in self.manual_results]
        if continuing and missing:
            names = ", ".join(f"{self.pending_manual[c].name} ({c})" for c in missing)
            raise ConfigError(f"still waiting for tool results: {names}; use add_tool_result()")
        parts = []
        for cid, call in self.pending_manual.items():
            parts.append(self.manual_results.get(cid) or ToolResultPart(cid, CANCELED_RESULT, True, name=call.name))
        self.pending_manual.clear()
        self.manual_results.clear()
        return parts

    async def run(self, calls: list[ToolUsePart], new_step: Callable[..., Step]) -> AsyncGenerator[Step | ToolResultPart, None]:
        queue: asyncio.Queue = asyncio.Queue()
        tasks = []
        for part in calls:
            call = ToolCall(part.id, part.name, dict(part.args))
            tool = self.tools.get(part.name)
            step = new_step(type=StepType.TOOL_CALL, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
                            tool_calls=[call], tool_server=tool.server if tool is not None else "")
            task = asyncio.ensure_future(self.run_one(call, step, queue))
            task.add_done_callback(functools.partial(_canceled_before_start, call, step, queue))
            tasks.append(task)
        self.active_tasks.update(tasks)
        pending = len(tasks)
        try:
            while pending:
                item = await queue.get()
                if item is _END:
                    pending -= 1
                else:
                    yield item
        finally:
            for t in tasks:
                self.active_tasks.discard(t)
                if not t.done():
                    t.cancel()

    async def run_one(self, call: ToolCall, step: Step, queue: asyncio.Queue) -> None:
        """One call's whole life; each exit puts exactly one result (or a manual wait) on the queue."""
        run = _CallRun(call, step, queue)
        try:
            await self._decide_and_run(run)
        except asyncio.CancelledError:
            if step.decided_at is None:
                run.decided(INTERRUPT)
            decision = step.approval  # None or PENDING: canceled while waiting
            text = STOPPED_RESULT.format(time.time() - run.started) if run.running else CANCELED_RESULT
            run.result(text, True, StepStatus.CANCELED,
                       decision if decision not in (None, ApprovalDecision.PENDING) else ApprovalDecision.CANCELED)
        finally:
            queue.put_nowait(_END)

    async def _decide_and_run(self, run: _CallRun) -> None:
        """Interrupt, manual mode, approval, an unknown tool, the pre-hook, then the run itself."""
        call = run.call
        if self.interrupted.is_set():
            run.decided(INTERRUPT)
            run.result(CANCELED_RESULT, True, StepStatus.CANCELED, ApprovalDecision.CANCELED)
            return
        tool = self.tools.get(call.name)
        refusal = self.tool_guard(tool) if tool is not None and self.tool_guard is not None else ""
        if refusal:  # the policy forbids it, even one added after the agent was made
            run.decided(LOOP)
            run.result(refusal, True, StepStatus.DONE, ApprovalDecision.POLICY_DENIED)
            return
        if not self.auto_execute_tools:
            self.pending_manual[call.id] = call
            run.emit(status=StepStatus.WAITING_FOR_USER, approval=ApprovalDecision.MANUAL, decided_by=CALLER)
            return
        if tool is not None:
            run.step.preview = await self._preview(run, tool)
        decision, approval, by = await self.approval(call, tool, run.step, run.emit)
        run.decided(by)
        if decision is None:
            run.result(CANCELED_RESULT, True, StepStatus.CANCELED, ApprovalDecision.CANCELED)
            return
        allow, reason = decision[:2]
        if not allow and by == UNANSWERED:  # nobody answered: canceled, the reason says why (no one denied it)
            run.result(str(reason or CANCELED_RESULT), True, StepStatus.CANCELED, ApprovalDecision.CANCELED)
            return
        if not allow:
            run.result(_denied_text(approval, by, reason), True, StepStatus.DONE, approval)
            return
        if tool is None:
            known = ", ".join(self.tools) or "none"
            run.result(f"Unknown tool {call.name!r}. Available tools: {known}.", True,
                       StepStatus.ERROR, approval, error=f"unknown tool {call.name!r}")
            return
        hook = self.hooks.pre_tool_use
        if hook is not None and not await self._pre_tool_use(run, hook, approval):
            return
        await self._execute(run, tool, approval)

    def _context(self, run: _CallRun) -> ToolCallContext:
        return ToolCallContext(run.call.id, run.step.turn, run.step.cascade_id, self.model(), run.step.decided_by)

    async def _preview(self, run: _CallRun, tool: Tool) -> Any:
        """The tool's preview of the call (None when it has none or its preview fails)."""
        token = set_current_call(self._context(run))
        try:
            return await tool.preview(dict(run.call.args))
        except Exception:
            return None
        finally:
            reset_current_call(token)

    async def _pre_tool_use(self, run: _CallRun, hook: Callable[..., Any], approval: ApprovalDecision) -> bool:
        """Apply the pre_tool_use hook (it may block the call or change its arguments); False if it ended the call."""
        try:
            change = await call_hook(hook, run.call)
        except Exception as exc:
            msg = f"pre_tool_use hook failed: {exc!r}"
            run.result(msg, True, StepStatus.ERROR, approval, error=msg)
            return False
        if isinstance(change, Block):
            run.decided(f"hook {callable_name(hook)}")
            run.result(f"Blocked: {change.reason}", True, StepStatus.DONE, ApprovalDecision.BLOCKED)
            return False
        if isinstance(change, ToolCall):
            run.call = change
        elif isinstance(change, dict):
            run.call = ToolCall(run.call.id, run.call.name, change)
        run.step.tool_calls = [run.call]
        return True

    async def _execute(self, run: _CallRun, tool: Tool, approval: ApprovalDecision) -> None:
        """Run the approved tool, pass its text through the post_tool_use hook, and put its result."""
        run.emit(status=StepStatus.ACTIVE, approval=approval)
        run.started, run.running = time.time(), True
        token = set_current_call(self._context(run))
        try:
            output = await tool.run(run.call.args, timeout=self.tool_timeout)
        finally:
            reset_current_call(token)
        text = output.text
        if self.hooks.post_tool_use is not None:
            try:
                new = await call_hook(self.hooks.post_tool_use, run.call, text)
            except Exception as exc:
                msg = f"post_tool_use hook failed: {exc!r}"
                run.result(msg, True, StepStatus.ERROR, approval, error=msg)
                return
            if isinstance(new, str):
                text = new
        if output.is_error:
            run.result(text, True, StepStatus.ERROR, approval, error=output.error or text, changes=output.changes)
        else:
            run.result(text, False, StepStatus.DONE, approval, display=output.display, changes=output.changes)

    async def approval(self, call: ToolCall, tool: Any, step: Step, emit) -> tuple[Any, ApprovalDecision, str]:
        """Return ((allow, reason) | None if interrupted, approval label, who or what decided)."""
        needs_ask = self.policy == "ask" or bool(getattr(tool, "requires_approval", False))
        if not needs_ask:
            if self.policy == "deny_all":
                return (False, "policy deny_all"), ApprovalDecision.POLICY_DENIED, "policy deny_all"
            if callable(self.policy):
                by = f"policy {callable_name(self.policy)}"
                try:
                    allowed = bool(self.policy(call))
                except Exception as exc:
                    return (False, f"policy raised {exc!r}"), ApprovalDecision.POLICY_DENIED, by
                label = ApprovalDecision.POLICY_ALLOWED if allowed else ApprovalDecision.POLICY_DENIED
                return (allowed, None), label, by
            return (True, None), ApprovalDecision.AUTO, "policy allow_all"
        fut = asyncio.get_running_loop().create_future()
        self.decisions[call.id] = fut
        if self.interrupted.is_set():
            fut.set_result(None)
        emit(status=StepStatus.WAITING_FOR_USER, approval=ApprovalDecision.PENDING)
        try:
            decision = await fut
        finally:
            self.decisions.pop(call.id, None)
        if decision is None:
            return None, ApprovalDecision.CANCELED, INTERRUPT
        return decision, ApprovalDecision.APPROVED if decision[0] else ApprovalDecision.DENIED, decision[2]


def callable_name(fn: Any) -> str:
    """A policy's or a hook's name as ``decided_by`` shows it (``<lambda>`` for a lambda)."""
    return getattr(fn, "__name__", None) or type(fn).__name__


def in_call_order(results: list[ToolResultPart], calls: list[ToolUsePart]) -> list[ToolResultPart]:
    """The results in the order the model asked for the calls (missing ones left out)."""
    by_id = {r.tool_use_id: r for r in results}
    return [by_id[c.id] for c in calls if c.id in by_id]


def unique_call_ids(ids: list[str]) -> list[str]:
    """Ids made unique in order: a repeated or empty id gets a suffix (``call_1_2``, ``call_3``).

    Some servers repeat ids within one answer; running both calls under one id would send the
    model one result twice and lose the other.
    """
    taken = set(ids)
    out: list[str] = []
    seen: set[str] = set()
    for i, cid in enumerate(ids):
        if cid and cid not in seen:
            new = cid
        else:
            base, n = (cid or "call"), 2 if cid else i + 1
            new = f"{base}_{n}"
            while new in taken or new in seen:
                n += 1
                new = f"{base}_{n}"
        seen.add(new)
        out.append(new)
    return out


def with_unique_call_ids(message: Message, calls: list[ToolCall]) -> None:
    """Rename repeated call ids in the answer and its step's calls alike (in place).

    A renamed part keeps the id the provider sent in ``provider_details["original_id"]``.
    """
    parts = message.tool_uses
    new_ids = unique_call_ids([p.id for p in parts])
    for part, new in zip(parts, new_ids):
        if new != part.id:
            part.provider_details = {**part.provider_details, "original_id": part.id}
            part.id = new
    for call, new in zip(calls, unique_call_ids([c.id for c in calls])):
        call.id = new


def unrun_call_steps(calls: list[ToolCall], new_step: Callable[..., Step], why: str = CANCELED_RESULT) -> list[Step]:
    """A closed TOOL_CALL step for each complete call the turn will not run (``why``: its result).

    The model had finished writing these calls when an interrupt, an error, the token limit or the
    tool-call limit stopped the turn; without a step of their own they would look pending forever.
    """
    now = time.time()
    return [new_step(type=StepType.TOOL_CALL, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
                     status=StepStatus.CANCELED, tool_calls=[call], content=why,
                     approval=ApprovalDecision.CANCELED, created_at=now, finished_at=now,
                     decided_at=now, decided_by=LOOP)
            for call in calls]


def _canceled_before_start(call: ToolCall, step: Step, queue: asyncio.Queue, task: asyncio.Task) -> None:
    """A call cancelled before ``run_one`` ever ran (an interrupt right as tools start) still reports."""
    if not task.cancelled():
        return  # run_one ran: it reported its result and its end itself
    now = time.time()
    step.status, step.content, step.approval, step.finished_at = (
        StepStatus.CANCELED, CANCELED_RESULT, ApprovalDecision.CANCELED, now)
    step.decided_at, step.decided_by = now, INTERRUPT
    queue.put_nowait(step.snapshot())
    queue.put_nowait(ToolResultPart(call.id, CANCELED_RESULT, True, name=call.name))
    queue.put_nowait(_END)


def _denied_text(approval: ApprovalDecision, by: str, reason: Any) -> str:
    """The result a denied call gets: who denied it, and the reason when it says more than who."""
    head = POLICY_DENIED_RESULT.format(by) if approval == ApprovalDecision.POLICY_DENIED else DENIED_RESULT
    return head + (f" Reason: {reason}" if reason and reason != by else "")


class _CallRun:
    """One tool call while it runs: its step's updates and its one result go on the runner's queue."""

    def __init__(self, call: ToolCall, step: Step, queue: asyncio.Queue) -> None:
        self.call = call  # a pre_tool_use hook may replace it
        self.step = step
        self.queue = queue
        self.started = time.time()  # reset when the tool itself starts
        self.running = False  # the tool itself has started

    def emit(self, **changes: Any) -> None:
        for k, v in changes.items():
            setattr(self.step, k, v)
        self.queue.put_nowait(self.step.snapshot())

    def decided(self, by: str) -> None:
        self.step.decided_by, self.step.decided_at = by, time.time()

    def result(self, text: str, is_error: bool, status: StepStatus, approval: ApprovalDecision,
               error: str = "", display: dict | None = None, changes: tuple = ()) -> None:
        now = time.time()
        text, error = strip_terminal_codes(clean_text(text)), strip_terminal_codes(error)  # what any tool printed
        self.emit(content=text, status=status, error=error, finished_at=now, approval=approval,
                  run_seconds=now - self.started, display=display, changes=list(changes))
        self.queue.put_nowait(ToolResultPart(self.call.id, text, is_error, name=self.call.name))
