"""The kernel indicator while the agent's code runs, in real JupyterLab (#31.16): busy while an
approved ``run_python`` runs, idle after; a cell the user runs meanwhile keeps its own busy until it
ends, and a cell run afterwards shows busy and idle as always (nbagent/notebook/kernel_status.py).

The agent's code and the cell each wait for a flag file the test creates: no timing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, run_cell

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

FLAGS = Path(tempfile.mkdtemp(prefix="nbagent-kernel-status-"))


def waits_for(flag: str) -> str:
    return f"import os, time\nwhile not os.path.exists({str(FLAGS / flag)!r}):\n    time.sleep(0.05)\n'{flag} ran'"


AGENT_CELL = (
    "from nbagent import Agent, notebook_tools\n"
    "from support.scripted import ScriptedProvider, text_call, tool_call\n"
    f"agent = Agent(model=ScriptedProvider([tool_call(('c1', 'run_python', {{'code': {waits_for('first')!r}}})),"
    " text_call('First done.'),"
    f" tool_call(('c2', 'run_python', {{'code': {waits_for('second')!r}}})), text_call('Second done.')]),"
    " tools=notebook_tools())\n"
    "agent"
)
CELL_WAITS = ("import asyncio, os\n"
              f"while not os.path.exists({str(FLAGS / 'cell')!r}):\n    await asyncio.sleep(0.05)\n"
              "print('the cell ended')")
NOTEBOOKS = {"busy.ipynb": [AGENT_CELL, CELL_WAITS, "print('a cell afterwards')"]}
STATUS = "() => window.jupyterapp.shell.currentWidget.sessionContext.session?.kernel?.status"


def wait_status(page, status: str) -> None:
    page.wait_for_function(f"(s) => ({STATUS})() === s", arg=status, polling=50, timeout=60_000)


INDICATOR = """() => { const el = window.jupyterapp.shell.currentWidget.node
    .querySelector('.jp-Notebook-ExecutionIndicator, .jp-Toolbar-kernelStatus');
    return el ? (el.getAttribute('title') || el.getAttribute('data-status') || el.textContent || '') : ''; }"""


def indicator(page) -> str:
    """What the notebook's toolbar kernel indicator says (its title: "Kernel status: Busy" …)."""
    return page.evaluate(INDICATOR)


def wait_indicator(page, word: str) -> None:
    """Wait until the toolbar's indicator says ``word`` (it renders a moment after the status changes)."""
    page.wait_for_function(f"(w) => ({INDICATOR})().toLowerCase().includes(w)", arg=word, polling=50,
                           timeout=60_000)


def ask_and_approve(page, chat: str, prompt: str, call: int) -> None:
    page.fill(f"{chat} .nba-input", prompt)
    page.press(f"{chat} .nba-input", "Enter")
    card = page.locator(f"{chat} .nba-tool[data-status='waiting']")
    card.wait_for()
    card.locator(".nba-approve").click()


def turn_over(page, chat: str, turns: int) -> None:
    page.wait_for_function("([s, n]) => { const c = document.querySelector(s);"
                           " return c.querySelectorAll('.nba-tool[data-status=\"done\"]').length === n"
                           " && !c.classList.contains('nba-is-running') && !c.querySelector('.nba-is-running'); }",
                           arg=[chat, turns], polling=50, timeout=60_000)


def test_the_kernel_says_busy_while_the_agents_code_runs_and_real_cells_keep_their_status(lab, notebook):
    nb = notebook("busy.ipynb")
    run_cell(lab, 0)
    chat = f"{nb} .nba-chat"
    lab.wait_for_selector(chat)
    wait_status(lab, "idle")
    # 1. an approved run_python from the box: busy while it runs, idle after
    ask_and_approve(lab, chat, "run the first", 1)
    wait_status(lab, "busy")  # was: idle all along (the box's message was handled; the code ran beside)
    wait_indicator(lab, "busy")  # the toolbar's indicator shows it too
    (FLAGS / "first").touch()
    turn_over(lab, chat, 1)
    wait_status(lab, "idle")
    wait_indicator(lab, "idle")  # and changes back with it
    assert "busy" not in indicator(lab).lower()
    # 2. a cell the user runs while the agent's code runs keeps the kernel busy after that code ends
    ask_and_approve(lab, chat, "run the second", 2)
    wait_status(lab, "busy")
    lab.evaluate("""() => { const app = window.jupyterapp, w = app.shell.currentWidget;
        w.content.activeCellIndex = 1; w.content.deselectAll();
        window.__cell = app.commands.execute('notebook:run-cell'); }""")
    lab.wait_for_function("() => window.jupyterapp.shell.currentWidget.content.widgets[1]"
                          ".node.querySelector('.jp-InputPrompt').textContent.includes('*')", polling=50)
    (FLAGS / "second").touch()
    turn_over(lab, chat, 2)  # the agent's code ended while the cell still runs
    assert lab.evaluate(STATUS) == "busy"  # not misreported idle: the cell is running
    (FLAGS / "cell").touch()
    assert lab.evaluate("async () => { await window.__cell; return true; }")
    wait_status(lab, "idle")
    # 3. a real cell afterwards: its output, and the kernel idle again
    run_cell(lab, 2)
    wait_status(lab, "idle")
    assert "a cell afterwards" in lab.evaluate("() => window.jupyterapp.shell.currentWidget.content.widgets[2].node"
                                               ".querySelector('.jp-OutputArea').textContent")
    errs = [e for e in lab.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errs, errs
