"""One Step field changed on a live step, as the ChatWidget sends it: for the per-field contract tests
(tests/test_step_fields.py through the JS reducer, tests/test_step_fields_browser.py through the DOM).

``EXAMPLES`` has, for every field declared ``shown`` (core/steps.py), a live step and the change that
the widget must draw; ``record_change(name)`` runs a real Conversation whose scripted connection
streams the step, waits, streams the changed step and waits again, and returns every message the
widget sent with the two marks (how many had gone out before and after the change)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from nbagent import Conversation
from nbagent.core.steps import (ApprovalDecision, CellPreview, CompactionStats, FinishReason, Step, StepSource, StepStatus, StepTarget,
                                StepType, ToolCall, UsageMetadata)
from nbagent.notebook.widget import FLUSH_INTERVAL, ChatWidget
from support.streams import StreamConnection

INDEX = 1  # the changed step's index (the prompt is step 0)
CALL = ToolCall("c1", "calc", {"x": 1})
MODEL = dict(type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER)
TOOL_RUN = dict(type=StepType.TOOL_CALL, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT, tool_calls=[CALL])
NOTICE = "no reply from 127.0.0.1 — retrying in 0.9 s, 2 of 3"
REFUSAL = "I can't help with that."

# field -> (the live step's fields, the change the widget must draw)
EXAMPLES: dict[str, tuple[dict, dict]] = {
    "type": ({**MODEL, "content": "Hi"}, {"type": StepType.COMPACTION}),
    "source": ({**MODEL, "source": StepSource.SYSTEM, "content": "Hi"}, {"source": StepSource.MODEL}),
    "target": ({**TOOL_RUN, "target": StepTarget.USER}, {"target": StepTarget.ENVIRONMENT}),
    "status": ({**MODEL, "content": "Hi"}, {"status": StepStatus.CANCELED}),
    "content": ({**MODEL, "content": "Hi"}, {"content": "Hi there"}),
    "thinking": ({**MODEL, "content": "Hi"}, {"thinking": "pondering"}),
    "tool_calls": ({**MODEL, "content": "Hi"}, {"tool_calls": [CALL]}),
    "error": ({**MODEL, "status": StepStatus.ERROR}, {"error": "the model failed"}),
    "usage_metadata": ({**MODEL, "thinking": "pondering", "content": "Hi", "status": StepStatus.DONE},
                       {"usage_metadata": UsageMetadata(10, 5, 22, 0, 7)}),
    "http_code": ({**MODEL, "status": StepStatus.ERROR, "error": "the model failed"}, {"http_code": 503}),
    "finished_at": ({**TOOL_RUN, "status": StepStatus.DONE, "content": "42", "created_at": 1000.0},
                    {"finished_at": 1002.5}),
    "approval": ({**TOOL_RUN, "status": StepStatus.WAITING_FOR_USER, "approval": ApprovalDecision.PENDING},
                 {"approval": ApprovalDecision.MANUAL}),
    "run_seconds": ({**TOOL_RUN, "status": StepStatus.DONE, "content": "42", "created_at": 1000.0, "finished_at": 1009.0},
                    {"run_seconds": 3.25}),
    "compaction": ({"type": StepType.COMPACTION, "source": StepSource.SYSTEM, "target": StepTarget.ENVIRONMENT,
                    "status": StepStatus.DONE}, {"compaction": CompactionStats(1000, 200, 500)}),
    "refusal": ({**MODEL, "status": StepStatus.DONE}, {"refusal": REFUSAL}),
    "display": ({**TOOL_RUN, "status": StepStatus.DONE, "content": "42"},
                {"display": {"text/html": "<table><tr><td>forty-two</td></tr></table>"}}),
    "tool_server": ({**TOOL_RUN}, {"tool_server": "files"}),
    "notice": ({**MODEL}, {"notice": NOTICE}),
    "preview": ({**TOOL_RUN, "status": StepStatus.WAITING_FOR_USER, "approval": ApprovalDecision.PENDING},
                {"preview": CellPreview("edit", "c-7", 3, "x = revnue\n", "x = revenue\n",
                                        (("-", "x = revnue"), ("+", "x = revenue")), "file: demo.ipynb")}),
}


class GatedConnection(StreamConnection):
    """Streams the prompt, then the test's steps; waits at each ``asyncio.Event`` among them."""

    def __init__(self, script: list) -> None:
        super().__init__([])
        self.script = script

    async def receive_steps(self):
        try:
            yield Step(step_index=self._next(), type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                       target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content=self._prompt)
            for item in self.script:
                if isinstance(item, asyncio.Event):
                    await item.wait()
                else:
                    yield item
        finally:
            self._idle = True


@dataclass
class Recording:
    messages: list  # ("update", state) | ("custom", content), as the front end gets them
    marks: tuple[int, int]  # how many messages had gone out with the step before / after the change
    step: Step  # the changed step


class _Outbox:
    def __init__(self, widget: ChatWidget) -> None:
        self.messages: list = [("update", {k: json.loads(json.dumps(getattr(widget, k)))
                                            for k in ("current", "running", "notice", "finished")})]
        widget._send = self._send

    def _send(self, msg: dict, buffers: Any = None) -> None:
        kind = "custom" if msg["method"] == "custom" else "update"
        self.messages.append((kind, json.loads(json.dumps(msg["content"] if kind == "custom" else msg["state"]))))


async def _until(check, what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _flushed(w: ChatWidget) -> None:
    await asyncio.sleep(0)
    while w._armed is not None:  # a flush is scheduled: it goes out within FLUSH_INTERVAL
        await asyncio.sleep(FLUSH_INTERVAL)


async def record_change(name: str) -> Recording:
    """Stream EXAMPLES[name]'s live step, change the field, and finish the turn; what the widget sent."""
    fields, change = EXAMPLES[name]
    base = Step(step_index=INDEX, **{"status": StepStatus.ACTIVE, **fields})
    changed = base.copy(**change)
    before, after = asyncio.Event(), asyncio.Event()
    finish = Step(step_index=INDEX + 1, type=StepType.FINISH, source=StepSource.SYSTEM, target=StepTarget.USER,
                  status=StepStatus.DONE, finish_reason=FinishReason.STOP, finished_at=time.time())
    conv = Conversation(GatedConnection([base, before, changed, after, finish]))
    w = ChatWidget(conv)
    box = _Outbox(w)
    task = asyncio.ensure_future(conv.chat_to_completion("show the field"))
    seen = lambda value: any(s.step_index == INDEX and s == value for s in conv.history)  # noqa: E731
    await _until(lambda: seen(base), "the live step")
    await _flushed(w)
    mark = len(box.messages)
    before.set()
    await _until(lambda: seen(changed), "the changed step")
    await _flushed(w)
    marks = (mark, len(box.messages))
    after.set()
    await task
    await _flushed(w)
    w.close()
    return Recording(box.messages, marks, changed)
