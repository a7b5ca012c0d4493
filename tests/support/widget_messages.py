"""What a ChatWidget sends, for tests without a browser: its custom messages, and a wait until
its turn has ended and everything it queued has gone out."""

from __future__ import annotations

import asyncio
import dataclasses
import json

from nbagent.notebook.widget import FLUSH_INTERVAL, ChatWidget


def customs(w: ChatWidget) -> list:
    """A list that collects every custom message ``w`` sends from now on (as the front end gets it: JSON)."""
    sent: list = []
    original = w.send
    w.send = lambda content, buffers=None: (sent.append(json.loads(json.dumps(content))), original(content, buffers))
    return sent


async def until_idle(w: ChatWidget) -> None:
    """Wait until the turn the widget runs (if any) has ended and its last flush has been sent."""
    task = w.prompts.task
    if task is not None and not task.done():
        await asyncio.wait([task])  # its outcome is the test's to read from the widget
    await asyncio.sleep(0)  # the task's done callback flushes
    while w._armed is not None:  # a flush is scheduled: it goes out within FLUSH_INTERVAL
        await asyncio.sleep(FLUSH_INTERVAL)


def deliver(widget, request) -> None:
    """Send ``request`` (a request dataclass of nbagent/notebook/protocol.py) to ``widget`` as its front
    end does: encoded on the wire as ``{"type": kind, **fields}``, through JSON, to the widget's handlers."""
    content = {"type": request.KIND, **{f.name: getattr(request, f.name) for f in dataclasses.fields(request)}}
    widget.handlers.receive(json.loads(json.dumps(content)))


def deliver_raw(widget, content: dict) -> None:
    """Send a wire dict as it is (a malformed or unknown message)."""
    widget.handlers.receive(json.loads(json.dumps(content)))
