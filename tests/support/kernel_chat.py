"""A chat widget in a real kernel, driven the way a browser drives it, with every kernel -> browser
byte counted (bench/bench_transcript.py and tests/test_transcript_output.py).

``KernelChat`` starts an ipykernel (jupyter_client), runs one cell that shows a ChatWidget over a
scripted model (each turn's answer given in advance), then sends each prompt as the widget's
front end does (a ``comm_msg`` with ``{"type": "send"}``) and reads iopub until the turn is over.
It counts the bytes of every display_data / update_display_data and comm message (their JSON
content), and keeps the cell outputs a notebook front end would save: display_data appended to
the cell whose request is its parent, update_display_data (and display_data of a known display
id) replacing every output of that id, as JupyterLab does.
"""

from __future__ import annotations

import json
import os
import queue
import time
from dataclasses import dataclass, field
from pathlib import Path

from support import tiers

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
import sys
sys.path.insert(0, {tests!r})
from support.scripted import ScriptedProvider
from nbagent import Agent
from nbagent.core.steps import FinishReason, UsageMetadata
from nbagent.providers.base import Finish, TextDelta, Usage
answers = {answers!r}
def script(text):
    words = text.split(" ")
    chunks = [" ".join(words[i:i + 25]) + " " for i in range(0, len(words), 25)]
    return [TextDelta(c) for c in chunks] + [Usage(UsageMetadata(10, 5, 15)), Finish(FinishReason.STOP, "stop")]
agent = Agent(model=ScriptedProvider([script(a) for a in answers]))
agent
"""

DISPLAY_TYPES = ("display_data", "update_display_data")
COMM_TYPES = ("comm_open", "comm_msg", "comm_close")


def answer_text(turn: int, words: int) -> str:
    """A deterministic answer of ``words`` words, with a marker naming its turn at both ends."""
    body = " ".join(f"word{(turn * 7 + i) % 1000:03d}" for i in range(words - 2))
    return f"begin{turn:03d} {body} end{turn:03d}"


@dataclass
class TurnBytes:
    display: int = 0  # display_data + update_display_data content bytes
    comm: int = 0  # comm message content bytes

    @property
    def total(self) -> int:
        return self.display + self.comm


@dataclass
class Outputs:
    """Cell outputs as a front end keeps them (see the module docstring)."""

    cells: dict[str, list[dict]] = field(default_factory=dict)  # execute msg_id -> outputs
    where: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # display id -> (cell, index)

    def apply(self, msg: dict) -> None:
        kind, content = msg["header"]["msg_type"], msg["content"]
        display_id = (content.get("transient") or {}).get("display_id")
        for cell, i in self.where.get(display_id, []) if display_id else []:
            self.cells[cell][i] = {"data": content["data"], "metadata": content.get("metadata", {})}
        parent = (msg.get("parent_header") or {}).get("msg_id")
        if kind == "display_data" and parent in self.cells:
            self.cells[parent].append({"data": content["data"], "metadata": content.get("metadata", {})})
            if display_id:
                self.where.setdefault(display_id, []).append((parent, len(self.cells[parent]) - 1))

    def markdown(self, cell: str) -> str:
        return "\n".join("".join(o["data"].get("text/markdown", "")) for o in self.cells[cell])


class KernelChat:
    """One kernel showing one chat widget; ``turn(prompt)`` runs a turn from the widget's box."""

    def __init__(self, answers: list[str], timeout: float = 60.0) -> None:
        from jupyter_client.manager import KernelManager

        tiers.require("notebook", "starts a Jupyter kernel")

        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=timeout)
        self.timeout = timeout
        self.outputs = Outputs()
        self.comm_id = ""
        self.comm_log: list[str] = []  # every comm message's JSON content, in order
        self.setup_bytes = TurnBytes()
        self.cell = self.execute(SETUP.format(tests=str(ROOT / "tests"), answers=answers), self.setup_bytes)
        if not self.comm_id:
            raise RuntimeError("the widget's comm did not open: " + json.dumps(self.outputs.cells[self.cell])[:2000])

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def __enter__(self) -> KernelChat:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def execute(self, code: str, count: TurnBytes | None = None) -> str:
        """Run a cell; its outputs are kept under the returned id."""
        msg_id = self.kc.execute(code)
        self.outputs.cells[msg_id] = []
        self._read(count or TurnBytes(), lambda m: _is_idle(m, msg_id))
        return msg_id

    def turn(self, prompt: str) -> TurnBytes:
        """Send a prompt from the widget's box; the bytes sent until the turn is over (the widget
        says ``running`` false, in a state update or a flush's ``state``; what follows within 0.3 s
        is counted too)."""
        count = TurnBytes()
        msg = self.kc.session.msg("comm_msg", {"comm_id": self.comm_id,
                                               "data": {"method": "custom", "content": {"type": "send", "prompt": prompt}}})
        self.kc.shell_channel.send(msg)
        seen = {"running": False, "done": False}

        def over(m: dict) -> bool:
            state = _state(m, self.comm_id)
            if state.get("running") is True:
                seen["running"] = True
            elif state.get("running") is False and seen["running"]:
                seen["done"] = True
            return seen["done"]

        self._read(count, over, settle=0.3)
        return count

    def _read(self, count: TurnBytes, over, settle: float = 0.0) -> None:
        deadline = time.monotonic() + self.timeout
        ended_at: float | None = None
        while True:
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError("the kernel did not finish in time")
            if ended_at is not None and now - ended_at >= settle:
                return
            try:
                m = self.kc.get_iopub_msg(timeout=0.05 if ended_at is not None else 1.0)
            except queue.Empty:
                continue
            kind = m["header"]["msg_type"]
            size = len(json.dumps(m["content"]).encode()) + sum(len(b) for b in m.get("buffers") or [])
            if kind in DISPLAY_TYPES:
                count.display += size
                self.outputs.apply(m)
            elif kind in COMM_TYPES:
                count.comm += size
                self.comm_log.append(json.dumps(m["content"]))
                if kind == "comm_open" and "_key" in (m["content"].get("data", {}).get("state") or {}):
                    self.comm_id = m["content"]["comm_id"]
            if ended_at is None and over(m):
                ended_at = time.monotonic()


def _is_idle(m: dict, parent: str | None) -> bool:
    if m["header"]["msg_type"] != "status" or m["content"].get("execution_state") != "idle":
        return False
    return parent is None or (m.get("parent_header") or {}).get("msg_id") == parent


def _state(m: dict, comm_id: str) -> dict:
    if m["header"]["msg_type"] != "comm_msg" or m["content"].get("comm_id") != comm_id:
        return {}
    data = m["content"].get("data") or {}
    if data.get("method") == "custom":  # a flush's deltas carry the traits that changed with it
        return (data.get("content") or {}).get("state") or {}
    return data.get("state") or {} if data.get("method") == "update" else {}
