"""policy="ask" under a headless runner (#31.18): nbclient (what papermill and ``nbconvert --execute``
use) displays the chat widget, but no browser draws a view of it, so nobody can press Approve. A cell
that awaits ``chat_to_completion`` says at once which call waits and how to approve it, and ends with a
clear error after ``conv.approval_wait``; it never waits forever. Real kernel, real nbclient."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("anywidget")

from support import tiers  # noqa: E402

pytestmark = pytest.mark.notebook  # a real kernel

ROOT = Path(__file__).resolve().parents[1]
SHOW = '''from nbagent import Agent, NbagentError, tool

@tool
def calculator(expression: str) -> float:
    """Evaluate an arithmetic expression."""
    return 84.0

agent = Agent(model="demo", tools=[calculator], policy="ask")
agent.conversation.approval_wait = 3
agent  # the widget, displayed: nbclient draws no view of it'''
AWAIT = '''try:
    response = await agent.chat_to_completion("What is 12 * 7?")
    print("answered:", response.text)
except NbagentError as err:
    print("ended:", err.kind, err)'''


def test_a_displayed_widget_with_no_live_view_does_not_wait_forever_for_approval(tmp_path, monkeypatch):
    tiers.require("notebook", "starts a Jupyter kernel")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(tmp_path)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SHOW), nbformat.v4.new_code_cell(AWAIT)])
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # the old code waited here until nbclient's 120 s cell timeout
    shown, asked = nb.cells
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in shown.outputs)
    stderr = "".join(o.get("text", "") for o in asked.outputs if o.get("name") == "stderr")
    stdout = "".join(o.get("text", "") for o in asked.outputs if o.get("name") == "stdout")
    assert "⏸ tool call 'calculator' (call_demo_1) is waiting for approval" in stderr
    assert "no live view shows it" in stderr and "conv.approve('call_demo_1')" in stderr
    assert "answered:" not in stdout
    assert ("ended: config [config] policy='ask': tool call 'calculator' (call_demo_1) waited 3 s for approval "
            "and nothing answered it") in stdout
