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
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, cast
from collections.abc import AsyncGenerator

from ..core.chat_session import CacheStrategy, ChatSession
from ..core.compression import ApproxTokenizer, Tokenizer
from ..core.errors import ConfigError, NbagentError, ProtocolError, ToolError
from ..core.messages import Message, TextPart, ToolResultPart, ToolUsePart
from ..core.connection import RequestGuard, ToolGuard
from ..core.growing_list import snapshot
from ..core.session_settings import AgentSettings
from ..providers.base import REFUSAL, Finish, ModelRequest, Provider, ToolSpec
from ..core.text import clean_text
from ..core.steps import FinishReason, Step, StepKind, StepSource, StepStatus, StepTarget, StepType, ToolCall, cut_note
from .compaction import compact_if_needed, compaction_budget, prompt_overflow
from .model_step import fold_batch
from .request_prefix import PrefixTracker
from .hooks import Block, Hooks, Policy, call_hook
from .tool_runner import CANCELED_RESULT, ToolRunner, in_call_order, unrun_call_steps, with_unique_call_ids
from .tool_sources import ToolSource, list_new_tools

_END = object()
_CANCELED = object()
INTERRUPTED_NOTE = "[interrupted by the user]"
CUT_RESULT = "Not run: the reply was cut at the token limit."


@dataclass(frozen=True)
class ToolWiring:
    """What a connection calls, which settings never hold: the tools, the approval policy (a name or a
    function), the hooks and the tool sources (MCP servers, started at the first turn that needs them)."""

    tools: Any = ()
    policy: Policy = "allow_all"
    hooks: Hooks | dict | None = None
    tool_sources: tuple = ()


class ModelConnection:
    """Runs turns for a Conversation (see the module docstring): what defines it comes from an agent's
    settings (``AgentSettings``: the system prompt, sampling, the tool loop, compaction), what it calls
    from a ``ToolWiring``."""

    def __init__(self, provider: Provider, settings: AgentSettings | None = None,
                 wiring: ToolWiring | None = None) -> None:
        s = settings or AgentSettings()
        wiring = wiring or ToolWiring()
        self.provider = provider
        self.max_tool_iterations = s.max_tool_iterations
        self.hooks = Hooks.coerce(wiring.hooks)
        self.temperature = s.temperature
        self.max_tokens = s.max_tokens
        self.include_reasoning = s.include_reasoning
        self.response_format = s.response_format
        self.compaction_budget = s.compaction_budget
        self.tokenizer: Tokenizer = ApproxTokenizer()
        self.session = ChatSession()
        if s.system is not None:
            self.session.with_system(s.system)
        self.session.with_cache_strategy(cast(CacheStrategy, s.cache_strategy))
        self.conversation_id = self.session.session_id
        self.next_step_index = 0
        self.turn = -1  # the running turn's number as the conversation counts it (Conversation.send sets it)
        self.request_guard: RequestGuard | None = None
        self._prompt: str | None = None
        self._idle = True
        self._interrupted = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._active_tasks: set[asyncio.Task] = set()
        self.prefix_tracker = PrefixTracker()
        self.tool_runner = ToolRunner(wiring.tools, auto_execute_tools=s.auto_execute_tools, policy=wiring.policy,
                                      hooks=self.hooks, interrupted=self._interrupted,
                                      active_tasks=self._active_tasks, tool_timeout=s.tool_timeout,
                                      model=lambda: str(self.provider.model or ""))
        self.tool_sources: list[ToolSource] = list(wiring.tool_sources)  # MCP servers: listed at a turn
        self._listed_sources: set[int] = set()  # id() of the sources whose tools are in self.tools

    @property
    def tools(self) -> dict:
        """The tools the model may call, by name."""
        return self.tool_runner.tools

    def tool_descriptions(self) -> list[ToolSpec]:
        """The tool definitions the next request carries."""
        return [t.spec for t in self.tools.values()]

    @property
    def policy(self) -> Any:
        """The approval policy of tool calls: ``"allow_all"``, ``"ask"``, ``"deny_all"`` or a function."""
        return self.tool_runner.policy

    @property
    def tool_guard(self) -> ToolGuard | None:
        """The conversation's policy, asked before each tool runs (``Connection.tool_guard``)."""
        return self.tool_runner.tool_guard

    @tool_guard.setter
    def tool_guard(self, guard: ToolGuard | None) -> None:
        self.tool_runner.tool_guard = guard

    @property
    def auto_execute_tools(self) -> bool:
        """Whether tool calls run by themselves (False: the turn stops for ``add_tool_result``)."""
        return self.tool_runner.auto_execute_tools

    # --- identity -------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The model that answers, as its provider names it."""
        return self.provider.model

    @property
    def provider_name(self) -> str:
        """The provider's name (``"openai"``, ``"anthropic"``, ``"gemini"``, ``"local"``, ``"demo"``...)."""
        return self.provider.name

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens as the provider reports it (None: unknown)."""
        return getattr(self.provider, "context_window", None)

    @property
    def chat_session(self) -> ChatSession:
        """The model history: the messages sent to the model."""
        return self.session

    def resume(self, session: ChatSession | None, next_step_index: int) -> None:
        """Continue a saved conversation (``Agent(resume=path)``)."""
        if session is not None:
            self.session = session
            self.conversation_id = session.session_id
        self.next_step_index = max(self.next_step_index, next_step_index)

    # --- Connection protocol ------------------------------------------------------------

    async def send(self, prompt: str) -> None:
        """Start a turn (``""`` continues one that stopped for tool results); a ``ConfigError`` while one runs."""
        if not self._idle:
            raise ConfigError("a turn is already running; interrupt() it first")
        self._interrupted.clear()
        self._prompt = prompt
        self._idle = False

    def is_idle(self) -> bool:
        """Whether no turn is running."""
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
        self.tool_runner.cancel_waits()

    def approve(self, call_id: str, *, by: str = "user") -> None:
        """Let a tool call that waits for approval run; ``by`` (who decided) goes to ``approvals_df()``."""
        self.tool_runner.approve(call_id, by=by)

    def deny(self, call_id: str, reason: str | None = None, *, by: str = "user") -> None:
        """Refuse a tool call that waits for approval; the model is told ``reason``."""
        self.tool_runner.deny(call_id, reason, by=by)

    def add_tool_result(self, call_id: str, result: Any, *, is_error: bool = False) -> str:
        """Record the result of a call the turn stopped at; returns the text the model sees."""
        return self.tool_runner.add_tool_result(call_id, result, is_error=is_error)

    async def disconnect(self) -> None:
        """Stop the running turn, close the provider's client and stop the tool sources (MCP servers)."""
        self.interrupt()
        await self.provider.aclose()
        for source in self.tool_sources:
            await source.aclose()

    # --- the turn ---------------------------------------------------------------------

    def _new_step(self, **kw: Any) -> Step:
        kw.setdefault("turn", self.turn)
        step = Step(id=str(uuid.uuid4()), step_index=self.next_step_index, cascade_id=self.conversation_id, **kw)
        self.next_step_index += 1
        return step

    async def receive_steps(self) -> AsyncGenerator[Step, None]:
        """Yield the turn's step updates, the user's prompt step first, until the turn ends."""
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
            self.tool_runner.decisions.clear()

    async def _run_turn(self, prompt: str) -> AsyncGenerator[Step, None]:
        prompt, blocked = await self._apply_prompt_hook(clean_text(prompt))
        if prompt:
            now = time.time()  # one clock reading: a prompt takes no time (never a negative duration)
            yield self._new_step(type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                                 target=StepTarget.UNSPECIFIED, status=StepStatus.DONE,
                                 content=prompt, created_at=now, finished_at=now)
        if blocked is not None:
            yield self._finish(FinishReason.OTHER, content=f"Prompt blocked: {blocked.reason}")
            return
        self._push_prompt(prompt)
        async for step in self._list_tool_sources():
            yield step
            if step.kind is StepKind.FINISH:  # interrupted
                return
        rounds = 0
        while True:
            stop_reason = self.request_guard() if rounds and self.request_guard is not None else ""
            if stop_reason:  # e.g. the budget, crossed by the round of tools that just ran
                yield self._finish(FinishReason.INTERRUPTED, content=stop_reason, error=stop_reason)
                return
            compaction = self._maybe_compact()
            if compaction is not None:
                self.prefix_tracker.compacted()
                yield compaction
            model_step = self._new_step(type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                                        target=StepTarget.USER, model=self.provider.model)
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
            self.prefix_tracker.replied(self.session.messages)
            calls = [p for p in finish.message.parts if isinstance(p, ToolUsePart)]
            stop = self._stop_before_tools(finish, calls, rounds)
            if stop:
                for step in stop:
                    yield step
                return
            rounds += 1
            async with contextlib.aclosing(self._tool_round(calls)) as steps:
                async for step in steps:
                    yield step
                    if step.kind is StepKind.FINISH:
                        return

    async def _tool_round(self, calls: list[ToolUsePart]) -> AsyncGenerator[Step, None]:
        """Run one round of tool calls; a FINISH step last when the turn stops here."""
        results: list[ToolResultPart] = []
        async with contextlib.aclosing(self.tool_runner.run(calls, self._new_step)) as items:
            async for item in items:
                if isinstance(item, ToolResultPart):
                    results.append(item)
                else:
                    yield item
        if self._interrupted.is_set():
            done = {r.tool_use_id for r in results}
            results += [ToolResultPart(c.id, CANCELED_RESULT, True, name=c.name) for c in calls if c.id not in done]
            self.session.push_tool_results(in_call_order(results, calls))
            yield self._finish(FinishReason.INTERRUPTED)
            return
        if self.tool_runner.pending_manual:
            self.tool_runner.manual_results.update({r.tool_use_id: r for r in results})
            yield self._finish(FinishReason.TOOL_CALLS, status=StepStatus.WAITING_FOR_USER)
            return
        self.session.push_tool_results(in_call_order(results, calls))

    async def _apply_prompt_hook(self, prompt: str) -> tuple[str, Block | None]:
        """The prompt after ``on_user_prompt`` (which may rewrite or block it)."""
        if self.hooks.on_user_prompt is None or not prompt:
            return prompt, None
        try:
            new = await call_hook(self.hooks.on_user_prompt, prompt)
        except Exception as exc:
            raise ToolError(f"on_user_prompt hook failed: {exc!r}") from exc
        if isinstance(new, Block):
            return prompt, new
        return (new if isinstance(new, str) else prompt), None

    def _push_prompt(self, prompt: str) -> None:
        """Close calls a previous turn stopped at, then add the prompt (``""``: continue).

        A prompt that cannot fit the model's known window is refused here, before anything changes."""
        overflow = prompt_overflow(prompt, self.session.system, self.tokenizer, self.tool_descriptions(),
                                   self.context_window, self.max_tokens)
        if overflow is not None:
            raise overflow
        closed = self.tool_runner.close_manual_calls(continuing=not prompt)
        if closed:
            self.session.push_tool_results(closed)
        if prompt:
            self.session.push_user(prompt)
        elif not self.session.messages or self.session.messages[-1].role != "user":
            raise ConfigError("nothing to send: the prompt is empty and no tool results are pending")

    async def _list_tool_sources(self) -> AsyncGenerator[Step, None]:
        """Add the tools of sources not listed yet (MCP servers start here); a failed source gets an
        error SYSTEM_MESSAGE step and the turn goes on without it (the next turn tries again)."""
        try:
            failures = await list_new_tools(self.tool_sources, self._listed_sources, self.tool_runner.tools,
                                            self._active_tasks, self._interrupted)
        except asyncio.CancelledError:
            if not self._interrupted.is_set():
                raise
            self.session.push_assistant(Message("assistant", [TextPart(INTERRUPTED_NOTE)]))
            yield self._finish(FinishReason.INTERRUPTED)
            return
        for source, error in failures:
            yield self._new_step(type=StepType.SYSTEM_MESSAGE, source=StepSource.SYSTEM, target=StepTarget.USER,
                                 status=StepStatus.ERROR, error=str(error), finished_at=time.time(),
                                 content=f"The tools of {source.name!r} are not available in this turn.")

    def _stop_before_tools(self, finish: Finish, calls: list[ToolUsePart], rounds: int) -> list[Step]:
        """The steps that end the turn here instead of running ``calls`` ([]: run them)."""
        if finish.cut_tool_calls:  # the reply is incomplete: run nothing, say why
            return self._not_run(calls, CUT_RESULT, FinishReason.LENGTH, cut_note(finish.cut_tool_calls))
        if not calls:  # a blocked prompt: a notice in the typed refusal field, no made-up text
            end = self._finish(finish.reason)
            end.refusal = finish.prompt_blocked
            return [end]
        if self._interrupted.is_set():
            return self._not_run(calls, CANCELED_RESULT, FinishReason.INTERRUPTED)
        if rounds >= self.max_tool_iterations:
            return self._not_run(calls, "Tool call limit reached; not run.", FinishReason.OTHER,
                                 f"Stopped after {rounds} tool iterations "
                                 f"(max_tool_iterations={self.max_tool_iterations}).")
        return []

    def _not_run(self, calls: list[ToolUsePart], why: str, reason: FinishReason, note: str = "") -> list[Step]:
        """Close calls the turn will not run (a result each, a CANCELED step each), then FINISH."""
        self.session.push_tool_results(ToolResultPart(c.id, why, True, name=c.name) for c in calls)
        unrun = unrun_call_steps([ToolCall(c.id, c.name, dict(c.args)) for c in calls], self._new_step, why)
        return unrun + [self._finish(reason, content=note)]

    def _finish(self, reason: FinishReason, *, content: str = "", error: str = "",
                status: StepStatus = StepStatus.DONE) -> Step:
        now = time.time()
        return self._new_step(type=StepType.FINISH, source=StepSource.SYSTEM, target=StepTarget.USER,
                              status=status, content=content, error=error, created_at=now, finished_at=now,
                              finish_reason=reason)

    # --- one model call ------------------------------------------------------------------

    def _request(self) -> ModelRequest:
        return ModelRequest(
            model=self.provider.model,
            messages=snapshot(self.session.messages),  # O(1): the history as it is now, read-only
            system=self.session.system,
            tools=self.tool_descriptions(),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            cache_strategy=self.session.cache_strategy,
            response_format=self.response_format,
            session_id=self.session.session_id,
            include_reasoning=self.include_reasoning,
        )

    async def _model_call(self, step: Step) -> AsyncGenerator[Step | Finish, None]:
        queue: asyncio.Queue = asyncio.Queue()
        request = self._request()
        step.prefix_change = self.prefix_tracker.observe(request.model, request.system, request.tools,
                                                         request.messages)
        task = self._start_stream(request, queue)
        yield step.snapshot()
        calls: list[ToolCall] = []
        try:
            while True:
                event = await queue.get()
                if event is _END:
                    if step.status != StepStatus.ACTIVE:
                        return
                    event = ProtocolError(f"{self.provider.name}: the stream ended before the model finished",
                                          provider=self.provider.name)
                elif event is _CANCELED:
                    for update in self._cancel(step, calls):
                        yield update
                    return
                if isinstance(event, BaseException):
                    for update in self._fail(step, calls, event):
                        yield update
                    raise _as_nbagent_error(event)
                folded, finish = fold_batch(step, event, calls, self.session, self.include_reasoning)
                if folded is not None:
                    yield folded
                if finish is not None:
                    yield finish
        except GeneratorExit:  # the consumer went away mid-call
            if step.status == StepStatus.ACTIVE:
                self._close_canceled(step, calls)
            raise
        finally:
            self._active_tasks.discard(task)
            if not task.done():
                task.cancel()

    def _start_stream(self, request: ModelRequest, queue: asyncio.Queue) -> asyncio.Future:
        """Start the task that puts the provider's batches on ``queue``, then _END, _CANCELED or the error."""

        async def pump() -> None:
            try:
                async for batch in self.provider.stream_batches(request):  # one list a network read
                    queue.put_nowait(batch)
                queue.put_nowait(_END)
            except asyncio.CancelledError:
                queue.put_nowait(_CANCELED)
            except BaseException as exc:  # delivered to the consumer
                queue.put_nowait(exc)

        task = asyncio.ensure_future(pump())
        # a pump cancelled before its first step never runs its except clause: say so here
        task.add_done_callback(lambda t: queue.put_nowait(_CANCELED) if t.cancelled() else None)
        self._active_tasks.add(task)
        if self._interrupted.is_set():
            task.cancel()
        return task

    def _close_canceled(self, step: Step, calls: list[ToolCall]) -> None:
        """The model step ends canceled, what it said so far kept."""
        self._close_partial(step, calls)
        step.status = StepStatus.CANCELED
        step.finished_at = time.time()

    def _cancel(self, step: Step, calls: list[ToolCall]) -> list[Step]:
        """The stream was canceled: the step closes canceled and its calls as not run."""
        self._close_canceled(step, calls)
        return [step.snapshot(), *unrun_call_steps(calls, self._new_step)]

    def _fail(self, step: Step, calls: list[ToolCall], exc: BaseException) -> list[Step]:
        """The model step ends in error (partial content kept) and the turn's FINISH says so."""
        self._close_partial(step, calls)
        step.status = StepStatus.ERROR
        step.finished_at = time.time()
        step.error = str(exc)
        step.http_code = getattr(exc, "http_code", None) or 0
        unrun = unrun_call_steps(calls, self._new_step)
        err = self._finish(FinishReason.ERROR, status=StepStatus.ERROR)
        err.error, err.http_code = step.error, step.http_code
        return [step.snapshot(), *unrun, err]

    def _close_partial(self, step: Step, calls: list[ToolCall]) -> None:
        """Keep what the model said so far and close its complete calls with a result."""
        with_unique_call_ids(Message("assistant", []), calls)
        parts: list = [TextPart(step.content)] if step.content else []
        if step.refusal:
            parts.append(TextPart(step.refusal, {REFUSAL: True}))
        parts += [ToolUsePart(c.id, c.name, c.args) for c in calls]
        if not parts:
            parts.append(TextPart(INTERRUPTED_NOTE))
        self.session.push_assistant(Message("assistant", parts))
        if calls:
            self.session.push_tool_results(ToolResultPart(c.id, CANCELED_RESULT, True, name=c.name) for c in calls)

    # --- compaction --------------------------------------------------------------------

    def _maybe_compact(self) -> Step | None:
        budget = self.compaction_budget or compaction_budget(
            getattr(self.provider, "context_window", 0), self.max_tokens)
        stats = compact_if_needed(self.session, self.tokenizer,
                                  (t.spec for t in self.tools.values()), budget)
        if stats is None:
            return None
        now = time.time()
        return self._new_step(
            type=StepType.COMPACTION, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
            status=StepStatus.DONE, created_at=now, finished_at=now, compaction=stats,
            content=f"History compacted: {stats.tokens_before:,} → {stats.tokens_after:,} tokens "
                    f"(budget {budget:,})",
        )

    def __repr__(self) -> str:
        return f"ModelConnection({self.provider!r}, tools={list(self.tools)})"


def _as_nbagent_error(exc: BaseException) -> NbagentError:
    """A failed model call's error as raised to the caller: typed errors as they are, others as protocol."""
    if isinstance(exc, NbagentError):
        return exc
    err = ProtocolError(f"model call failed: {exc!r}")
    err.__cause__ = exc
    return err
