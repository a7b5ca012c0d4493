"""A scripted provider for agent-loop tests: each model call replays one list of events."""

from __future__ import annotations

import asyncio

from nbagent.core.messages import Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart
from nbagent.providers.base import (
    Finish, ModelRequest, Provider, TextDelta, ThinkingDelta, ToolCallEnd, ToolCallStart, Usage,
)
from nbagent.core.steps import FinishReason, ToolCall, UsageMetadata


class Pause:
    """A point in a script where the stream waits until ``release()`` (or forever)."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.released = asyncio.Event()

    def release(self) -> None:
        self.released.set()


class ScriptedProvider(Provider):
    name = "scripted"

    def __init__(self, calls: list[list], context_window: int = 100_000) -> None:
        self.model = "scripted-1"
        self.script = list(calls)
        self.requests: list[ModelRequest] = []
        self.context_window = context_window
        self.closed = 0

    async def stream(self, request: ModelRequest):
        self.requests.append(request)
        events = self.script.pop(0)
        parts: list = []
        text, thinking = "", ""
        for ev in events:
            if isinstance(ev, Pause):
                ev.reached.set()
                await ev.released.wait()
                continue
            if isinstance(ev, BaseException):
                raise ev
            if isinstance(ev, TextDelta):
                text += ev.text
            elif isinstance(ev, ThinkingDelta):
                thinking += ev.text
            elif isinstance(ev, ToolCallEnd):
                parts.append(ToolUsePart(ev.call.id, ev.call.name, ev.call.args))
            elif isinstance(ev, Finish):
                msg = [ThinkingPart(thinking, {"signature": "sig"})] if thinking else []
                msg += [TextPart(text)] if text else []
                ev = Finish(ev.reason, ev.raw_reason, Message("assistant", msg + parts), ev.structured_output, self.model)
            yield ev
            await asyncio.sleep(0)

    async def aclose(self) -> None:
        self.closed += 1


def text_call(text: str, usage=(10, 5), thinking: str = "") -> list:
    evs: list = [ThinkingDelta(thinking)] if thinking else []
    evs += [TextDelta(w) for w in text.split(" ") if w] if " " not in text else [TextDelta(t + " ") for t in text.split(" ")]
    evs.append(Usage(UsageMetadata(usage[0], usage[1], usage[0] + usage[1])))
    evs.append(Finish(FinishReason.STOP, "stop"))
    return evs


def tool_call(*calls: tuple[str, str, dict], usage=(10, 5)) -> list:
    evs: list = []
    for i, (cid, name, args) in enumerate(calls):
        evs.append(ToolCallStart(i, cid, name))
        evs.append(ToolCallEnd(i, ToolCall(cid, name, args)))
    evs.append(Usage(UsageMetadata(usage[0], usage[1], usage[0] + usage[1])))
    evs.append(Finish(FinishReason.TOOL_CALLS, "tool_calls"))
    return evs


def assert_history_valid(session) -> None:
    """Alternation holds and every tool call has its result in the next message."""
    msgs = session.messages
    assert msgs and msgs[0].role == "user"
    for a, b in zip(msgs, msgs[1:]):
        assert a.role != b.role, f"two {a.role} messages in a row"
    for i, m in enumerate(msgs):
        if m.role == "assistant" and m.tool_uses:
            assert i + 1 < len(msgs), "tool call without a result"
            ids = {r.tool_use_id for r in msgs[i + 1].tool_results}
            for use in m.tool_uses:
                assert use.id in ids, f"tool call {use.id} has no result"
