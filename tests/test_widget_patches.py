"""The running turn's structure reaches the views as patches: only what changed since the last one,
inside the flush's ``deltas`` message, so a mid-turn change costs its own fields, not the whole turn
(issue #32: the first text can go out at once without each early flush re-sending the turn)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("anywidget")

from nbagent import Conversation  # noqa: E402
from nbagent.core.steps import Step, StepSource, StepStatus, StepTarget, StepType, ToolCall  # noqa: E402
from nbagent.notebook.widget import ChatWidget  # noqa: E402
from nbagent.notebook.widget_wire import USUAL_SHAPES  # noqa: E402
from support.step_fields import INDEX, NOTICE, record_change  # noqa: E402
from support.streams import StreamConnection, words  # noqa: E402
from support.widget_messages import customs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")


def patches(messages: list) -> list[dict]:
    return [p for kind, body in messages if kind == "custom" and body["type"] == "deltas" for p in body.get("patches", [])]


async def test_a_change_on_a_live_step_sends_only_that_field():
    rec = await record_change("notice")
    before, after = rec.marks
    changed = patches(rec.messages[before:after])
    assert changed == [{"turn": 0, "steps": [{"step_index": INDEX, "notice": NOTICE}]}]
    assert all(kind == "custom" for kind, _ in rec.messages[before:after])  # no trait re-sent the turn


async def test_a_field_gone_is_null_and_the_end_carries_the_lengths():
    rec = await record_change("status")  # ACTIVE -> CANCELED
    before, after = rec.marks
    assert patches(rec.messages[before:after]) == [{"turn": 0, "steps": [{"step_index": INDEX, "status": "CANCELED"}]}]
    end = [p for p in patches(rec.messages[after:]) if p.get("ended")]
    assert len(end) == 1 and {"step_index": INDEX, "n": [2, 0]} in [
        {k: v for k, v in s.items() if k in ("step_index", "n")} for s in end[0]["steps"]]


async def test_a_step_seen_once_is_not_sent_again_whole_however_many_changes_follow():
    """A model step with a tool call, a tool run waiting, approved, run: each patch after a step's
    first names only that step's changed fields (no id, no unchanged type / source / target)."""
    conv = Conversation(StreamConnection(words(400), pace=0.002, batch=20, tool=ToolCall("c1", "calc", {"x": 1})))
    w = ChatWidget(conv)
    sent = customs(w)
    run = asyncio.ensure_future(conv.chat_to_completion("go"))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if any(s.status == StepStatus.WAITING_FOR_USER for s in conv.history):
            break
    conv.approve("c1")
    await run
    await asyncio.sleep(0.2)
    seen: set[int] = set()
    for p in [p for m in sent if m["type"] == "deltas" for p in m.get("patches", [])]:
        for step in p.get("steps", []):
            if step["step_index"] in seen:
                assert "id" not in step and not {"type", "source", "target", "kind"} & set(step), step
            else:
                assert step["kind"] and "id" not in step  # a step's first patch is whole (its usual shape implied)
                seen.add(step["step_index"])
    assert seen == {s.step_index for s in conv.history}


async def test_a_turn_answered_within_one_window_costs_its_text_and_its_structure_once():
    """The model's first text goes out at once, so such a turn takes two flushes; together they
    carry the text once and the turn's structure once, about 1.2 KB here (the whole bare turn at
    its end cost ~1.5 KB, and with the first text at once a whole `current` sync came on top)."""
    answer = "".join(words(400))
    conv = Conversation(StreamConnection(words(400), batch=400))
    w = ChatWidget(conv)
    sent = customs(w)
    await conv.chat_to_completion("again")
    await asyncio.sleep(0.2)
    flushes = [m for m in sent if m["type"] == "deltas"]
    text = sum(len(it[3]) for m in flushes for it in m["items"])
    assert text == len(answer) + len("again")
    overhead = sum(len(json.dumps(m)) for m in sent) - len(json.dumps(answer))
    assert overhead < 1_300, (overhead, sent)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_usual_step_shapes_are_the_front_ends_and_each_is_its_kind():
    """A patch's new step leaves out a usual type / source / target; the reducer fills them in from
    the same table (a mismatch would show a prompt as a model call)."""
    code = "import('./js/src/reducer.js').then((m) => process.stdout.write(JSON.stringify(m.USUAL_SHAPES)))"
    out = subprocess.run([NODE, "--input-type=module", "-e", code], cwd=ROOT, check=True, capture_output=True, timeout=60)
    assert json.loads(out.stdout) == USUAL_SHAPES
    for kind, shape in USUAL_SHAPES.items():
        step = Step(type=StepType(shape["type"]), source=StepSource(shape["source"]), target=StepTarget(shape["target"]))
        assert step.kind.value == kind
