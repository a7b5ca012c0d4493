"""Each Step field declared once (core/steps.py): its roles make the wire, fingerprint and saved forms,
and every field the widget shows, changed on a live step, reaches the JS reducer's view of the step
(tests/test_step_fields_browser.py checks the DOM draws it)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("anywidget")

from nbagent.core.steps import Delivery, Step, StepStatus, field_roles  # noqa: E402
from nbagent.notebook.transcript import conversation_html, transcript_markdown, transcript_text  # noqa: E402
from nbagent.notebook.turn_codec import step_dict, step_shape  # noqa: E402
from support.step_fields import EXAMPLES, INDEX, record_change  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
SHOWN = sorted(n for n, r in field_roles().items() if r.shown)


def test_every_field_declares_its_roles_and_every_shown_one_has_a_contract_example():
    assert list(field_roles()) == [f.name for f in dataclasses.fields(Step)]
    assert sorted(EXAMPLES) == SHOWN, "a field the widget shows needs an example in tests/support/step_fields.py"
    for name, role in field_roles().items():
        assert not (role.shown and role.delivery in (Delivery.KERNEL, Delivery.CARRIED)), f"{name}: shown, but a change is never re-sent"
        assert role.saved or role.delivery is Delivery.KERNEL, f"{name}: on the wire but not saved (a reloaded view would lose it)"


def test_the_forms_follow_the_declaration():
    step = Step(step_index=3, content_delta="x", raw_usage={"secret_tokens": 1}, cascade_id="conv")
    wire = step_dict(step)
    assert not {n for n, r in field_roles().items() if r.delivery is Delivery.KERNEL} & set(wire)
    assert {n for n, r in field_roles().items() if r.keep_empty} <= set(wire)
    saved = step.to_dict()
    assert set(saved) == {n for n, r in field_roles().items() if r.saved}
    assert Step.from_dict(json.loads(json.dumps(step.to_dict(compact=True)))).to_dict() == saved


@pytest.mark.parametrize("name", [n for n, r in field_roles().items() if r.delivery is Delivery.STRUCTURAL])
def test_a_change_of_a_structural_field_is_a_structural_update(name):
    fields, change = EXAMPLES.get(name, ({}, {}))
    base = Step(**{"status": StepStatus.ACTIVE, **fields})
    value = change.get(name, {"finish_reason": "STOP", "preparing_tool": "calc"}.get(name))
    assert step_shape(base) != step_shape(base.copy(**{name: value}))


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("name", SHOWN)
async def test_a_shown_field_changed_on_a_live_step_reaches_the_view(name):
    rec = await record_change(name)
    out = subprocess.run([NODE, str(ROOT / "js" / "tools" / "live_steps.mjs")], check=True, capture_output=True,
                         input=json.dumps({"messages": rec.messages, "marks": list(rec.marks)}).encode(), timeout=60)
    before, after = ({s["step_index"]: s for s in steps} for steps in json.loads(out.stdout))
    want = step_dict(rec.step)
    assert INDEX in before and INDEX in after, "the live step is missing from the view"
    assert after[INDEX].get(name) == want.get(name), f"the view's {name} is not the kernel's"
    assert before[INDEX].get(name) != want.get(name)  # it changed while the turn ran
    assert after[INDEX]["kind"] == want["kind"]


def test_every_shown_field_declares_whether_the_transcript_shows_it():
    undeclared = [n for n, r in field_roles().items() if r.shown and r.transcript is None]
    assert not undeclared, "declare transcript=True or False on these shown fields (core/steps.py)"


@pytest.mark.parametrize("name", [n for n, r in field_roles().items() if r.transcript])
def test_a_field_the_transcript_shows_changes_every_transcript(name):
    fields, change = EXAMPLES[name]
    base = Step(**{"status": StepStatus.ACTIVE, **fields})
    changed = base.copy(**change)
    for render in (transcript_markdown, transcript_text):
        assert render([base]) != render([changed]), f"{render.__name__} does not show {name}"
    assert conversation_html([base], []) != conversation_html([changed], [])


NEEDS_A_BROWSER = {"display": "its HTML is drawn through DOMPurify, which needs a real DOM (test_widget_fields_browser.py)"}


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("name", SHOWN)
async def test_a_shown_field_changed_on_a_live_step_changes_the_drawn_turn(name):
    """The browser-free half of test_widget_fields_browser.py: the messages the kernel sent, through the
    real reducer and the turn's real renderer on js/test's fake DOM, draw the turn differently once the
    field changed on its live step."""
    if name in NEEDS_A_BROWSER:
        pytest.skip(NEEDS_A_BROWSER[name])
    rec = await record_change(name)
    out = subprocess.run([NODE, str(ROOT / "tests" / "support" / "draw_turn.mjs")], check=True, capture_output=True,
                         input=json.dumps([rec.messages, list(rec.marks)]).encode(), timeout=60)
    before, after = json.loads(out.stdout)
    assert f'"data-step":"{INDEX}"' in before, "the live step is not drawn"
    assert before != after, f"changing {name} on a live step changed nothing the widget draws"
