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
from nbagent.notebook.turn_codec import USAGE_FIELDS, USUAL_SHAPES  # noqa: E402
from support.step_fields import INDEX, NOTICE, record_change  # noqa: E402
from support.streams import StreamConnection, words  # noqa: E402
from support.widget_messages import customs  # noqa: E402
from support.waiting import until  # noqa: E402

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


async def test_a_step_no_longer_active_carries_its_lengths_once():
    """Mid-turn a step's text lengths stay out (the deltas' offsets tell a view what it misses); once
    it is no longer active its text is all there: its lengths go with that change, and not again."""
    rec = await record_change("status")  # ACTIVE -> CANCELED
    before, after = rec.marks
    assert patches(rec.messages[before:after]) == [{"turn": 0, "steps": [{"step_index": INDEX, "status": "CANCELED", "n": [2, 0]}]}]
    end = [p for p in patches(rec.messages[after:]) if p.get("ended")]
    assert len(end) == 1 and all(s["step_index"] != INDEX or "n" not in s for s in end[0].get("steps", []))


async def test_a_step_seen_once_is_not_sent_again_whole_however_many_changes_follow():
    """A model step with a tool call, a tool run waiting, approved, run: each patch after a step's
    first names only that step's changed fields (no id, no unchanged type / source / target)."""
    conv = Conversation(StreamConnection(words(400), pace=0.002, batch=20, tool=ToolCall("c1", "calc", {"x": 1})))
    w = ChatWidget(conv)
    sent = customs(w)
    run = asyncio.ensure_future(conv.chat_to_completion("go"))
    await until(lambda: any(s.status == StepStatus.WAITING_FOR_USER for s in conv.history), "the call waiting")
    conv.approve("c1")
    await run
    await asyncio.sleep(0.2)
    seen: set[int] = set()
    for p in [p for m in sent if m["type"] == "deltas" for p in m.get("patches", [])]:
        for step in p.get("steps", []):
            if isinstance(step, list):  # a new step that is all its kind says: [step_index, kind]
                step = {"step_index": step[0], "kind": step[1]}
            if step["step_index"] in seen:
                assert "id" not in step and not {"type", "source", "target", "kind"} & set(step), step
            else:
                assert step["kind"] and "id" not in step  # a step's first patch is whole (its usual shape implied)
                seen.add(step["step_index"])
    finish = {s.step_index for s in conv.history if s.kind.value == "finish"}  # says nothing: the turn's end tells it
    assert seen == {s.step_index for s in conv.history} - finish and len(finish) == 1


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
    code = "import('./js/src/reducer.js').then((m) => process.stdout.write(JSON.stringify(m.USAGE_FIELDS)))"
    out = subprocess.run([NODE, "--input-type=module", "-e", code], cwd=ROOT, check=True, capture_output=True, timeout=60)
    assert tuple(json.loads(out.stdout)) == USAGE_FIELDS  # a patch's usage counts, in this order
    for kind, shape in USUAL_SHAPES.items():
        step = Step(type=StepType(shape["type"]), source=StepSource(shape["source"]), target=StepTarget(shape["target"]))
        assert step.kind.value == kind


@pytest.mark.skipif(NODE is None, reason="node is not installed")
async def test_the_reducer_rebuilds_each_turn_from_its_patches_as_the_kernel_has_it():
    """A patch's new step leaves out what a view derives (its status, its times when they follow the
    step before, its model and finish reason when the record's: turn_codec.derived_fields); the
    reducer, fed only the flushes, ends with every step and record the kernel has (text aside)."""
    conv = Conversation(StreamConnection(words(300), thinking=["a ", "b"], pace=0.002, batch=20,
                                         tool=ToolCall("c1", "calc", {"x": 1})))
    w = ChatWidget(conv)
    sent = customs(w)
    run = asyncio.ensure_future(conv.chat_to_completion("go"))
    await until(lambda: any(s.status == StepStatus.WAITING_FOR_USER for s in conv.history), "the call waiting")
    conv.approve("c1")
    await run
    conv.connection.tool = None
    await conv.chat_to_completion("again")
    await asyncio.sleep(0.2)
    flushes = [m for m in sent if m["type"] == "deltas"]
    code = ("import('./js/src/reducer.js').then((m) => { let s = m.initialState();"
            " for (const e of JSON.parse(require('fs').readFileSync(0, 'utf8'))) s = m.apply(s, e);"
            " process.stdout.write(JSON.stringify(s.turns.map((t) => ({record: t.record, steps: t.steps.map(({content, thinking, ...k}) => k)})))); })")
    out = subprocess.run([NODE, "-e", code], cwd=ROOT, input=json.dumps(flushes).encode(), check=True,
                         capture_output=True, timeout=60)
    kernel = [w.codec.turns[n].live_dict() for n in sorted(w.codec.turns)]  # what a live view shows of each step
    for turn in kernel:  # to a view a null field is a missing one
        turn["record"] = {k: v for k, v in turn["record"].items() if v is not None}
    view = json.loads(out.stdout)
    for turn in view:  # lengths are a check, not shown: the view has them only where no delta told them
        turn["steps"] = [{k: v for k, v in s.items() if k != "n"} for s in turn["steps"]]
    assert view == kernel and len(kernel) == 2 and len(kernel[0]["steps"]) >= 4
