"""A student's chat under a course policy, in real JupyterLab (Playwright + chromium): the widget says
the class is closed and when it opens, then that the week's budget is spent and when it starts afresh,
and its footer names the rules in force. The notebook writes the course's nbagent.toml itself (the
server's root is the course folder); a fake clock stands for the time of day.

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q -m browser tests/test_course_browser.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jupyter import CHROMIUM

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

NOTEBOOKS = {
    "lesson.ipynb": [
        # the teacher's policy, then the student's agent at 18:00 on a Monday (after class)
        "from datetime import datetime\nfrom pathlib import Path\n"
        "Path('nbagent.toml').write_text('[policy]\\nhours = [\"09:00-12:00\"]\\nbudget_usd = 0.5\\n'\n"
        "                                'save_to = \"sessions\"\\nuser = \"ann\"\\nrules = \"tutor\"\\n')\n"
        "from nbagent import Agent\n"
        "agent = Agent(model='demo')\n"
        "agent.course.limits.clock = lambda: datetime(2026, 12, 7, 18, 0)\n"
        "agent",
        # the next morning, in class; ann spent $0.80 on gpt-4.1-mini earlier this week
        "agent.course.limits.clock = lambda: datetime(2026, 12, 8, 10, 0)\n"
        "earlier = Agent(model='demo', delay=0)\n"
        "earlier.course.limits.clock = agent.course.limits.clock\n"
        "earlier.ask('an earlier question')\n"
        "record = earlier.conversation.turns[0]\n"
        "record.model, record.provider = 'gpt-4.1-mini', 'openai'\n"
        "record.started_at = datetime(2026, 12, 7, 10, 0).timestamp()\n"
        "record.usage.prompt_token_count = 2_000_000\n"
        "print(earlier.save().parent.name)",
    ],
}


def run_cell(page, index: int) -> None:
    page.evaluate("""(i) => { const app = window.jupyterapp, nb = app.shell.currentWidget.content;
        nb.activeCellIndex = i; nb.deselectAll(); window.__run = app.commands.execute('notebook:run-cell'); }""", index)
    assert page.evaluate("async () => await Promise.race([window.__run.then(() => true),"
                         " new Promise(r => setTimeout(() => r(false), 60000))])")


def notice(page, chat: str) -> str:
    return page.evaluate("(s) => document.querySelector(s + ' .nba-notice').textContent", chat)


def send(page, chat: str, text: str) -> None:
    page.fill(f"{chat} .nba-input", text)
    page.press(f"{chat} .nba-input", "Enter")


def test_the_widget_says_closed_then_over_budget_and_names_the_rules(lab, notebook):
    nb = notebook("lesson.ipynb")
    run_cell(lab, 0)
    chat = f"{nb} .nba-chat"
    lab.wait_for_selector(chat)
    # out of lesson hours: said at once, and again when the student sends anyway
    lab.wait_for_function("(s) => /closed/.test(document.querySelector(s + ' .nba-notice').textContent)", arg=chat)
    assert "outside the lesson hours (09:00-12:00)" in notice(lab, chat)
    assert "opens again at 09:00 on Tue 08 Dec" in notice(lab, chat)
    rules = lab.locator(f"{chat} .nba-rules")
    assert rules.is_visible() and rules.text_content() == "rules: tutor"
    send(lab, chat, "help me with exercise 3")
    lab.wait_for_function("(s) => !document.querySelector(s + ' .nba-input').disabled"
                          " && !document.querySelector(s).classList.contains('nba-is-running')", arg=chat)
    assert lab.evaluate("(s) => document.querySelectorAll(s + ' .nba-turn').length", chat) == 0
    assert "opens again at 09:00" in notice(lab, chat)
    # in class, but this week's budget is spent: refused before any request, with the reset
    run_cell(lab, 1)
    send(lab, chat, "help me with exercise 4")
    lab.wait_for_function("(s) => /over the course budget/.test(document.querySelector(s + ' .nba-notice').textContent)",
                          arg=chat, timeout=30_000)
    text = notice(lab, chat)
    assert "spent $0.800 of $0.500 this week" in text and "starts afresh at 00:00 on Mon 14 Dec" in text
    assert lab.evaluate("(s) => document.querySelectorAll(s + ' .nba-turn').length", chat) == 0
    errs = [e for e in lab.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errs, errs
