"""ModelConnection: runs turns against a provider (the agent loop).

One turn: push the prompt, call the model, stream its thinking / text / tool
calls as Step updates, run the tools it asked for (automatically, after an
approval, or by waiting for the caller), and loop until the model stops or
``max_tool_iterations`` is reached. The history sent to the model lives in a
ChatSession and stays valid for every provider whatever happens: an
interrupt or an error closes dangling tool calls with a result.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import threading
import time
import uuid
from typing import Any, AsyncIterator

from ..core.compression import ApproxTokenizer
from ..core.errors import NbagentError
from .hooks import Block, Hooks, call_hook, check_policy
from ..core.messages import Message, TextPart, ToolResultPart, ToolUsePart
from ..providers.base import (
    Finish,
    ModelRequest,
    Provider,
    TextDelta,
    ThinkingDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)
from ..core.chat_session import ChatSession
from ..core.steps import FinishReason, Step, StepSource, StepStatus, StepTarget, StepType, ToolCall

_END = object()
_CANCELED = object()
INTERRUPTED_NOTE = "[interrupted by the user]"
CANCELED_RESULT = "The user interrupted the turn before this tool call ran."
DENIED_RESULT = "The user denied this tool call."


class ModelConnection:
    """Runs turns for a Conversation. See the module docstring."""

    def __init__(
        self,
        provider: Provider,
        *,
        system: str | None = None,
        tools: Any = (),
        auto_execute_tools: bool = True,
        policy: Any = "allow_all",
        max_tool_iterations: int = 10,
        hooks: Hooks | dict | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        cache_strategy: str = "auto",
        include_reasoning: bool = True,
        response_format: dict | None = None,
        compaction_budget: int | None = None,
        compaction_fraction: float = 0.75,
        tokenizer: Any = None,
        session: ChatSession | None = None,
        conversation_id: str | None = None,
    ) -> None:
        from .tools import to_tools

        self.provider = provider
        self.tools = to_tools(tools or ())
        self.auto_execute_tools = auto_execute_tools
        self.policy = check_policy(policy)
        self.max_tool_iterations = max_tool_iterations
        self.hooks = Hooks.coerce(hooks)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.include_reasoning = include_reasoning
        self.response_format = response_format
        self.compaction_budget = compaction_budget
        self.compaction_fraction = compaction_fraction
        self.tokenizer = tokenizer or ApproxTokenizer()
        self.session = session or ChatSession()
        if system is not None:
            self.session.with_system(system)
        self.session.with_cache_strategy(cache_strategy)
        self.conversation_id = conversation_id or self.session.session_id
        self.next_step_index = 0
        self._prompt: str | None = None
        self._idle = True
        self._interrupted = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._active_tasks: set[asyncio.Task] = set()
        self._decisions: dict[str, asyncio.Future] = {}
        self._pending_manual: dict[str, ToolCall] = {}
        self._manual_results: dict[str, ToolResultPart] = {}

    # --- identity -------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        return self.provider.model

    @property
    def provider_name(self) -> str:
        return self.provider.name

    def restore_session(self, session: ChatSession) -> None:
        """Continue from a saved ChatSession (``Agent(resume=path)``)."""
        self.session = session
        self.conversation_id = session.session_id

    # --- Connection protocol ------------------------------------------------------------

    async def send(self, prompt: str) -> None:
        if not self._idle:
            raise NbagentError("a turn is already running; interrupt() it first", kind="config")
        self._interrupted.clear()
        self._prompt = prompt
        self._idle = False

    def is_idle(self) -> bool:
        return self._idle

    def interrupt(self) -> None:
        """Stop the running turn; safe to call from any thread."""
        self._interrupted.set()
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._cancel_active()
        else:
            loop.call_soon_threadsafe(self._cancel_active)

    def _cancel_active(self) -> None:
        for task in list(self._active_tasks):
            task.cancel()
        for fut in self._decisions.values():
            if not fut.done():
                fut.set_result(None)

    def approve(self, call_id: str) -> None:
        self._decide(call_id, True, None)

    def deny(self, call_id: str, reason: str | None = None) -> None:
        self._decide(call_id, False, reason)

    def _decide(self, call_id: str, allow: bool, reason: str | None) -> None:
        fut = self._decisions.get(call_id)
        if fut is None:
            raise NbagentError(f"no tool call {call_id!r} is waiting for approval", kind="config")
        loop = fut.get_loop()

        def resolve() -> None:
            if not fut.done():
                fut.set_result((allow, reason))

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
        call = self._pending_manual.get(call_id)
        if call is None:
            raise NbagentError(f"no tool call {call_id!r} is waiting for a result", kind="config")
        from .tools import format_result

        text = format_result(result)
        self._manual_results[call_id] = ToolResultPart(call_id, text, is_error, name=call.name)
        return text

    async def disconnect(self) -> None:
        self.interrupt()
        await self.provider.aclose()

    # --- the turn ---------------------------------------------------------------------

    def _new_step(self, **kw: Any) -> Step:
        step = Step(id=str(uuid.uuid4()), step_index=self.next_step_index, cascade_id=self.conversation_id, **kw)
        self.next_step_index += 1
        return step

    async def receive_steps(self) -> AsyncIterator[Step]:
        self._loop = asyncio.get_running_loop()
        prompt, self._prompt = self._prompt, None
        try:
            if prompt is None:
                return
            async with contextlib.aclosing(self._run_turn(prompt)) as steps:
                async for step in steps:
                    yield step
        finally:
            self._idle = True
            self._decisions.clear()

    async def _run_turn(self, prompt: str) -> AsyncIterator[Step]:
        blocked: Block | None = None
        if self.hooks.on_user_prompt is not None and prompt:
            try:
                new = await call_hook(self.hooks.on_user_prompt, prompt)
            except Exception as exc:
                raise NbagentError(f"on_user_prompt hook failed: {exc!r}", kind="tool") from exc
            if isinstance(new, Block):
                blocked = new
            elif isinstance(new, str):
                prompt = new
        if prompt:
            yield self._new_step(type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                                 target=StepTarget.UNSPECIFIED, status=StepStatus.DONE,
                                 content=prompt, finished_at=time.time())
        if blocked is not None:
            yield self._finish(FinishReason.OTHER, content=f"Prompt blocked: {blocked.reason}")
            return
        self._close_manual_calls(continuing=not prompt)
        if prompt:
            self.session.push_user(prompt)
        elif not self.session.messages or self.session.messages[-1].role != "user":
            raise NbagentError("nothing to send: the prompt is empty and no tool results are pending",
                               kind="config")

        rounds = 0
        while True:
            compaction = self._maybe_compact()
            if compaction is not None:
                yield compaction
            model_step = self._new_step(type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                                        target=StepTarget.USER, metadata={"model": self.provider.model})
            finish: Finish | None = None
            async with contextlib.aclosing(self._model_call(model_step)) as updates:
                async for update in updates:
                    if isinstance(update, Finish):
                        finish = update
                    else:
                        yield update
            if finish is None:  # interrupted
                yield self._finish(FinishReason.INTERRUPTED)
                return
            calls = [p for p in finish.message.parts if isinstance(p, ToolUsePart)]
            if not calls:
                yield self._finish(finish.reason)
                return
            if self._interrupted.is_set():
                self.session.push_tool_results(
                    ToolResultPart(c.id, CANCELED_RESULT, True, name=c.name) for c in calls
                )
                yield self._finish(FinishReason.INTERRUPTED)
                return
            if rounds >= self.max_tool_iterations:
                self.session.push_tool_results(
                    ToolResultPart(c.id, "Tool call limit reached; not run.", True, name=c.name) for c in calls
                )
                yield self._finish(
                    FinishReason.OTHER,
                    content=f"Stopped after {rounds} tool iterations (max_tool_iterations={self.max_tool_iterations}).",
                )
                return
            rounds += 1
            results: list[ToolResultPart] = []
            async with contextlib.aclosing(self._run_tools(calls)) as items:
                async for item in items:
                    if isinstance(item, ToolResultPart):
                        results.append(item)
                    else:
                        yield item
            if self._interrupted.is_set():
                done = {r.tool_use_id for r in results}
                results += [ToolResultPart(c.id, CANCELED_RESULT, True, name=c.name) for c in calls if c.id not in done]
                self.session.push_tool_results(_in_order(results, calls))
                yield self._finish(FinishReason.INTERRUPTED)
                return
            if self._pending_manual:
                self._manual_results.update({r.tool_use_id: r for r in results})
                yield self._finish(FinishReason.TOOL_CALLS, status=StepStatus.WAITING_FOR_USER)
                return
            self.session.push_tool_results(_in_order(results, calls))

    def _close_manual_calls(self, continuing: bool) -> None:
        """Before a new request, give every call the turn stopped at a result."""
        if not self._pending_manual:
            return
        missing = [cid for cid in self._pending_manual if cid not in self._manual_results]
        if continuing and missing:
            names = ", ".join(f"{self._pending_manual[c].name} ({c})" for c in missing)
            raise NbagentError(f"still waiting for tool results: {names}; use add_tool_result()",
                               kind="config")
        parts = []
        for cid, call in self._pending_manual.items():
            parts.append(self._manual_results.get(cid) or ToolResultPart(cid, CANCELED_RESULT, True, name=call.name))
        self.session.push_tool_results(parts)
        self._pending_manual.clear()
        self._manual_results.clear()

    def _finish(self, reason: FinishReason, *, content: str = "",
                status: StepStatus = StepStatus.DONE) -> Step:
        now = time.time()
        return self._new_step(type=StepType.FINISH, source=StepSource.SYSTEM, target=StepTarget.USER,
                              status=status, content=content, created_at=now, finished_at=now,
                              metadata={"finish_reason": reason.value})

    # --- one model call ------------------------------------------------------------------

    def _request(self) -> ModelRequest:
        return ModelRequest(
            model=self.provider.model,
            messages=list(self.session.messages),
            system=self.session.system,
            tools=[t.spec for t in self.tools.values()],
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            cache_strategy=self.session.cache_strategy,
            response_format=self.response_format,
            session_id=self.session.session_id,
            include_reasoning=self.include_reasoning,
        )

    async def _model_call(self, step: Step) -> AsyncIterator[Step | Finish]:
        queue: asyncio.Queue = asyncio.Queue()
        request = self._request()

        async def pump() -> None:
            try:
                async for event in self.provider.stream(request):
                    queue.put_nowait(event)
                queue.put_nowait(_END)
            except asyncio.CancelledError:
                queue.put_nowait(_CANCELED)
            except BaseException as exc:  # delivered to the consumer
                queue.put_nowait(exc)

        task = asyncio.ensure_future(pump())
        self._active_tasks.add(task)
        if self._interrupted.is_set():
            task.cancel()
        yield _snapshot(step)
        calls: list[ToolCall] = []
        try:
            while True:
                event = await queue.get()
                if isinstance(event, TextDelta):
                    if event.text:
                        step.content += event.text
                        yield _snapshot(step, content_delta=event.text)
                elif isinstance(event, ThinkingDelta):
                    if event.text and self.include_reasoning:
                        step.thinking += event.text
                        yield _snapshot(step, thinking_delta=event.text)
                elif isinstance(event, ToolCallStart):
                    step.metadata = {**step.metadata, "preparing_tool": event.name}
                elif isinstance(event, ToolCallEnd):
                    calls.append(event.call)
                    step.tool_calls = list(calls)
                    step.type = StepType.TOOL_CALL
                    yield _snapshot(step)
                elif isinstance(event, Usage):
                    step.usage_metadata = event.usage
                    step.metadata = {**step.metadata, "raw_usage": event.raw,
                                     "cache_write_tokens": event.cache_write_tokens}
                elif isinstance(event, Finish):
                    self.session.push_assistant(_replayable(event.message))
                    step.status = StepStatus.DONE
                    step.finished_at = time.time()
                    step.is_complete_response = not event.message.tool_uses
                    step.structured_output = event.structured_output
                    meta = {**step.metadata, "finish_reason": event.reason.value}
                    meta.pop("preparing_tool", None)
                    if event.model:
                        meta["model"] = event.model
                    step.metadata = meta
                    yield _snapshot(step)
                    yield event
                elif event is _END:
                    if step.status != StepStatus.ACTIVE:
                        return
                    event = NbagentError(f"{self.provider.name}: the stream ended before the model finished",
                                         kind="protocol", provider=self.provider.name)
                elif event is _CANCELED:
                    self._close_partial(step, calls)
                    step.status = StepStatus.CANCELED
                    step.finished_at = time.time()
                    yield _snapshot(step)
                    return
                if isinstance(event, BaseException):
                    self._close_partial(step, calls)
                    step.status = StepStatus.ERROR
                    step.finished_at = time.time()
                    step.error = str(event)
                    step.http_code = getattr(event, "http_code", None) or 0
                    yield _snapshot(step)
                    err = self._finish(FinishReason.ERROR, status=StepStatus.ERROR)
                    err.error, err.http_code = step.error, step.http_code
                    yield err
                    if isinstance(event, NbagentError):
                        raise event
                    raise NbagentError(f"model call failed: {event!r}", kind="protocol") from event
        except GeneratorExit:  # the consumer went away mid-call
            if step.status == StepStatus.ACTIVE:
                self._close_partial(step, calls)
                step.status = StepStatus.CANCELED
                step.finished_at = time.time()
            raise
        finally:
            self._active_tasks.discard(task)
            if not task.done():
                task.cancel()

    def _close_partial(self, step: Step, calls: list[ToolCall]) -> None:
        """Keep what the model said so far and close its complete calls with a result."""
        parts: list = []
        if step.content:
            parts.append(TextPart(step.content))
        parts += [ToolUsePart(c.id, c.name, c.args) for c in calls]
        if not parts:
            parts.append(TextPart(INTERRUPTED_NOTE))
        self.session.push_assistant(Message("assistant", parts))
        if calls:
            self.session.push_tool_results(ToolResultPart(c.id, CANCELED_RESULT, True, name=c.name) for c in calls)

    # --- tools ----------------------------------------------------------------------

    async def _run_tools(self, calls: list[ToolUsePart]) -> AsyncIterator[Step | ToolResultPart]:
        queue: asyncio.Queue = asyncio.Queue()
        tasks = []
        for part in calls:
            call = ToolCall(part.id, part.name, dict(part.args))
            step = self._new_step(type=StepType.TOOL_CALL, source=StepSource.SYSTEM,
                                  target=StepTarget.ENVIRONMENT, tool_calls=[call])
            tasks.append(asyncio.ensure_future(self._run_one(call, step, queue)))
        self._active_tasks.update(tasks)
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
                self._active_tasks.discard(t)
                if not t.done():
                    t.cancel()

    async def _run_one(self, call: ToolCall, step: Step, queue: asyncio.Queue) -> None:
        def emit(**changes: Any) -> None:
            for k, v in changes.items():
                setattr(step, k, v)
            queue.put_nowait(_snapshot(step))

        def result(text: str, is_error: bool, status: StepStatus, approval: str, error: str = "") -> None:
            emit(content=text, status=status, error=error, finished_at=time.time(),
                 metadata={**step.metadata, "approval": approval,
                           "duration": time.time() - started})
            queue.put_nowait(ToolResultPart(call.id, text, is_error, name=call.name))

        started = time.time()
        try:
            if self._interrupted.is_set():
                result(CANCELED_RESULT, True, StepStatus.CANCELED, "canceled")
                return
            tool = self.tools.get(call.name)
            if not self.auto_execute_tools:
                self._pending_manual[call.id] = call
                emit(status=StepStatus.WAITING_FOR_USER, metadata={"approval": "manual"})
                return
            decision, approval = await self._approval(call, tool, step, emit)
            if decision is None:
                result(CANCELED_RESULT, True, StepStatus.CANCELED, "canceled")
                return
            allow, reason = decision
            if not allow:
                text = DENIED_RESULT + (f" Reason: {reason}" if reason else "")
                result(text, True, StepStatus.DONE, approval)
                return
            if tool is None:
                known = ", ".join(self.tools) or "none"
                result(f"Unknown tool {call.name!r}. Available tools: {known}.", True,
                       StepStatus.ERROR, approval, error=f"unknown tool {call.name!r}")
                return
            if self.hooks.pre_tool_use is not None:
                try:
                    change = await call_hook(self.hooks.pre_tool_use, call)
                except Exception as exc:
                    msg = f"pre_tool_use hook failed: {exc!r}"
                    result(msg, True, StepStatus.ERROR, approval, error=msg)
                    return
                if isinstance(change, Block):
                    result(f"Blocked: {change.reason}", True, StepStatus.DONE, "blocked")
                    return
                if isinstance(change, ToolCall):
                    call = change
                elif isinstance(change, dict):
                    call = ToolCall(call.id, call.name, change)
                step.tool_calls = [call]
            emit(status=StepStatus.ACTIVE, metadata={**step.metadata, "approval": approval})
            started = time.time()
            output = await tool.run(call.args)
            text = output.text
            if self.hooks.post_tool_use is not None:
                try:
                    new = await call_hook(self.hooks.post_tool_use, call, text)
                except Exception as exc:
                    msg = f"post_tool_use hook failed: {exc!r}"
                    result(msg, True, StepStatus.ERROR, approval, error=msg)
                    return
                if isinstance(new, str):
                    text = new
            if output.is_error:
                result(text, True, StepStatus.ERROR, approval, error=output.error or text)
            else:
                result(text, False, StepStatus.DONE, approval)
        except asyncio.CancelledError:
            result(CANCELED_RESULT, True, StepStatus.CANCELED, step.metadata.get("approval", "canceled"))
        finally:
            queue.put_nowait(_END)

    async def _approval(self, call: ToolCall, tool: Any, step: Step, emit) -> tuple[Any, str]:
        """Return ((allow, reason) | None if interrupted, approval label)."""
        needs_ask = self.policy == "ask" or bool(getattr(tool, "requires_approval", False))
        if not needs_ask:
            if self.policy == "deny_all":
                return (False, "policy deny_all"), "policy_denied"
            if callable(self.policy):
                try:
                    allowed = bool(self.policy(call))
                except Exception as exc:
                    return (False, f"policy raised {exc!r}"), "policy_denied"
                return (allowed, None), "policy_allowed" if allowed else "policy_denied"
            return (True, None), "auto"
        fut = asyncio.get_running_loop().create_future()
        self._decisions[call.id] = fut
        if self._interrupted.is_set():
            fut.set_result(None)
        emit(status=StepStatus.WAITING_FOR_USER, metadata={"approval": "pending"})
        try:
            decision = await fut
        finally:
            self._decisions.pop(call.id, None)
        if decision is None:
            return None, "canceled"
        return decision, "approved" if decision[0] else "denied"

    # --- compaction --------------------------------------------------------------------

    def _budget(self) -> int:
        if self.compaction_budget:
            return self.compaction_budget
        window = getattr(self.provider, "context_window", 0) or 128_000
        reserve = self.max_tokens or min(4096, window // 4)
        return max(256, int((window - reserve) * self.compaction_fraction))

    def _maybe_compact(self) -> Step | None:
        budget = self._budget()
        tools_tokens = sum(self.tokenizer.count(json.dumps(t.spec.input_schema)) for t in self.tools.values())
        before = self.tokenizer.count_session(self.session) + tools_tokens
        if before <= budget:
            return None
        after = self.session.compress(int(budget * 0.6) - tools_tokens, tokenizer=self.tokenizer) + tools_tokens
        now = time.time()
        return self._new_step(
            type=StepType.COMPACTION, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
            status=StepStatus.DONE, created_at=now, finished_at=now,
            content=f"History compacted: {before:,} → {after:,} tokens (budget {budget:,})",
            metadata={"tokens_before": before, "tokens_after": after, "budget": budget},
        )

    def __repr__(self) -> str:
        return f"ModelConnection({self.provider!r}, tools={list(self.tools)})"


def _snapshot(step: Step, content_delta: str = "", thinking_delta: str = "") -> Step:
    snap = copy.copy(step)
    snap.content_delta = content_delta
    snap.thinking_delta = thinking_delta
    return snap


def _replayable(message: Message) -> Message:
    """The message as pushed to history; an empty answer gets a visible placeholder."""
    if any(not isinstance(p, TextPart) or p.text for p in message.parts):
        return Message("assistant", list(message.parts))
    return Message("assistant", [TextPart("[empty response]")])


def _in_order(results: list[ToolResultPart], calls: list[ToolUsePart]) -> list[ToolResultPart]:
    by_id = {r.tool_use_id: r for r in results}
    return [by_id[c.id] for c in calls if c.id in by_id]
