"""Scripted streaming connections for the widget tests (kernel-less and in a real kernel).

``StreamConnection`` generates its steps lazily (a 20,000-delta answer is never held as 20,000
Step objects), paces them like a model would, honours ``interrupt()`` (the cut step ends
CANCELED with its partial text, the turn INTERRUPTED) and can ask for approval of a tool call.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

from nbagent.core.compression import ApproxTokenizer
from nbagent.core.steps import (ApprovalDecision, FinishReason, Step, StepSource, StepStatus, StepTarget, StepType,
                           ToolCall, UsageMetadata)


def words(n: int, per_paragraph: int = 100) -> list[str]:
    """``n`` numbered word deltas, a blank line every ``per_paragraph`` words."""
    return [f"w{i:05d}" + ("\n\n" if (i + 1) % per_paragraph == 0 else " ") for i in range(n)]


class StreamConnection:
    """Each ``send()`` streams ``deltas`` (a list, or a function of the prompt giving one)."""

    model_name = "scripted"
    provider_name = "mock"
    context_window: int | None = None
    request_guard = None  # a script runs no model calls to guard
    tool_guard = None  # nor tools
    chat_session = None  # no model history

    def __init__(self, deltas, thinking=(), *, pace: float = 0.0, batch: int = 1, tool: ToolCall | None = None,
                 tool_result: str = "42"):
        self.deltas = deltas
        self.thinking = list(thinking)
        self.pace, self.batch = pace, max(1, batch)
        self.tool, self.tool_result = tool, tool_result
        self.conversation_id = str(uuid.uuid4())
        self._index = 0
        self._prompt = ""
        self._interrupted = threading.Event()
        self._decision: tuple[bool, str | None] | None = None
        self._idle = True
        self.sent_at: dict[str, float] = {}
        self.tokenizer = ApproxTokenizer()

    async def send(self, prompt: str) -> None:
        self._prompt, self._idle, self._decision = prompt, False, None
        self._interrupted.clear()

    def is_idle(self) -> bool:
        return self._idle

    def interrupt(self) -> None:
        self._interrupted.set()

    def approve(self, call_id: str) -> None:
        self._decision = (True, None)

    def deny(self, call_id: str, reason: str | None = None) -> None:
        self._decision = (False, reason)

    async def disconnect(self) -> None:
        pass

    def tool_descriptions(self) -> list:
        return []

    def resume(self, session, next_step_index: int) -> None:
        self._index = max(self._index, next_step_index)

    def _next(self) -> int:
        self._index += 1
        return self._index - 1

    def _model(self, idx: int, **kw) -> Step:
        return Step(step_index=idx, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER, **kw)

    async def _tick(self, i: int) -> None:
        if self.pace and (i + 1) % self.batch == 0:
            await asyncio.sleep(self.pace)
        elif (i + 1) % self.batch == 0:
            await asyncio.sleep(0)

    def _finish(self, reason: FinishReason) -> Step:
        return Step(step_index=self._next(), type=StepType.FINISH, source=StepSource.SYSTEM, target=StepTarget.USER,
                    status=StepStatus.DONE, finished_at=time.time(), finish_reason=reason)

    async def receive_steps(self):
        try:
            yield Step(step_index=self._next(), type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                       target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content=self._prompt)
            if self.tool is not None:
                async for step in self._tool_steps():
                    yield step
            idx = self._next()
            thinking = content = ""
            for i, d in enumerate(self.thinking):
                thinking += d
                yield self._model(idx, thinking=thinking, thinking_delta=d)
                await self._tick(i)
            deltas = self.deltas(self._prompt) if callable(self.deltas) else self.deltas
            for i, d in enumerate(deltas):
                if self._interrupted.is_set():
                    yield self._model(idx, thinking=thinking, content=content, status=StepStatus.CANCELED,
                                      finished_at=time.time())
                    yield self._finish(FinishReason.INTERRUPTED)
                    return
                content += d
                yield self._model(idx, thinking=thinking, content=content, content_delta=d)
                await self._tick(i)
            self.sent_at["last_delta"] = time.time()
            usage = UsageMetadata(20, len(deltas), 20 + len(deltas) + len(self.thinking), 0, len(self.thinking))
            yield self._model(idx, thinking=thinking, content=content, status=StepStatus.DONE,
                              usage_metadata=usage, finished_at=time.time())
            yield self._finish(FinishReason.STOP)
        finally:
            self._idle = True

    async def _tool_steps(self):
        call = self.tool
        idx = self._next()
        yield Step(step_index=idx, type=StepType.TOOL_CALL, source=StepSource.MODEL, target=StepTarget.USER,
                   status=StepStatus.DONE, tool_calls=[call], finished_at=time.time())
        run = Step(step_index=self._next(), type=StepType.TOOL_CALL, source=StepSource.SYSTEM,
                   target=StepTarget.ENVIRONMENT, status=StepStatus.WAITING_FOR_USER, tool_calls=[call],
                   approval=ApprovalDecision.PENDING)
        yield run
        while self._decision is None and not self._interrupted.is_set():
            await asyncio.sleep(0.01)
        allow, reason = self._decision or (False, "interrupted")
        text = self.tool_result if allow else f"The user denied this tool call. Reason: {reason}"
        yield run.copy(status=StepStatus.DONE, content=text, finished_at=time.time(),
                       approval=ApprovalDecision.APPROVED if allow else ApprovalDecision.DENIED)


XSS = ('<img src=x onerror="window.__pwned=1"> <script>window.__pwned=1</script> '
       '[a link](javascript:window.__pwned=1) $\\href{javascript:window.__pwned=1}{x}$')


def rich_agent():
    """An Agent whose model (scripted) calls two tools — one returns a pandas DataFrame (a cell holds
    an XSS payload), one a matplotlib Figure — then answers with math and an XSS payload."""
    import pandas as pd
    from matplotlib.figure import Figure

    from nbagent import Agent, tool
    from support.scripted import ScriptedProvider, text_call, tool_call

    @tool
    def prices() -> object:
        """Prices as a table."""
        return pd.DataFrame({"item": ["tea", '<img src=x onerror="window.__pwned=1">'], "price": [2.5, 3.0]})

    @tool
    def chart() -> object:
        """A line chart."""
        fig = Figure(figsize=(4, 3))
        ax = fig.subplots()
        ax.plot([1, 2, 3], [2, 3, 1])
        ax.set_title("trend")
        return fig

    answer = "The mean is $\\bar x = \\tfrac{1}{n}\\sum_i x_i$ and\n\n$$E = mc^2$$\n\n" + XSS
    provider = ScriptedProvider([tool_call(("c1", "prices", {}), ("c2", "chart", {})), text_call(answer)])
    return Agent(model=provider, tools=[prices, chart])
