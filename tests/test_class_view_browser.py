"""The teacher's live view (``nbagent.class_view``) in real JupyterLab + Chromium while two student
kernels (jupyter_client) chat with the demo model and save into the class folder.

Run:  flock /tmp/nbagent-browser.lock env PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_class_view_browser.py
Env:  NBAGENT_SHOTS=docs/images (also write the screenshot there)
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, ROOT, shot

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

NOTEBOOKS = {
    "teacher.ipynb": ["import nbagent\n"  # the demo is free: priced here so that a budget can be spent
                      "view = nbagent.class_view('class', interval=0.3, budget_usd=0.06,\n"
                      "                          pricing={'demo': {'input': 100, 'output': 100}})\nview"],
}
VIEW = ".nbc-class"


class StudentKernel:
    """A student's kernel: an ``Agent(model="demo", save_to=folder, user=name)`` asked from cells."""

    def __init__(self, folder: Path, user: str) -> None:
        from jupyter_client.manager import KernelManager

        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=env, cwd=str(folder.parent))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.run(f"from nbagent import Agent\nagent = Agent(model='demo', delay=0, save_to={str(folder)!r}, user={user!r})")

    def run(self, code: str) -> None:
        reply = self.kc.execute_interactive(code, timeout=60, output_hook=lambda msg: None)
        assert reply["content"]["status"] == "ok", reply["content"]

    def ask(self, prompt: str) -> None:
        self.run(f"agent.ask({prompt!r})")

    def fail_as(self, user: str, turns: int) -> None:
        """Chat as ``user`` with a model whose server is not there: each turn fails, and is saved."""
        self.run(f"bad = Agent(model='openai:gpt-4.1-mini', base_url='http://127.0.0.1:9/v1', api_key='sk-test',\n"
                 f"            save_to=agent.save_to, user={user!r}, max_retries=0)\n"
                 f"for _ in range({turns}):\n"
                 "    try:\n        bad.ask('Why does my loop not stop?')\n    except Exception:\n        pass")

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def turns_of(page) -> dict:
    """What the view shows: student -> turns."""
    return page.evaluate("""(s) => Object.fromEntries([...document.querySelectorAll(s + ' .nbc-row')].map(
        r => [r.querySelector('.nbc-user').textContent, Number(r.querySelector('.nbc-turns').textContent)]))""", VIEW)


def wait_turns(page, expected: dict) -> None:
    page.wait_for_function("""([s, want]) => { const got = Object.fromEntries([...document.querySelectorAll(s + ' .nbc-row')].map(
        r => [r.querySelector('.nbc-user').textContent, Number(r.querySelector('.nbc-turns').textContent)]));
        return JSON.stringify(got) === JSON.stringify(want); }""", arg=[VIEW, expected], timeout=30_000, polling=100)


def test_the_teachers_view_follows_two_students_and_opens_a_transcript(lab, notebook, jupyter_server, tmp_path):
    folder = Path(jupyter_server["root"]) / "class"
    nb = notebook("teacher.ipynb")
    lab.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    view = f"{nb} {VIEW}"
    lab.wait_for_selector(view)
    lab.wait_for_function("(s) => /No saved sessions/.test(document.querySelector(s + ' .nba-notice').textContent)", arg=view)
    assert turns_of(lab) == {}
    with contextlib.ExitStack() as stack:
        ana = StudentKernel(folder, "ana")
        stack.callback(ana.close)
        ben = StudentKernel(folder, "ben")
        stack.callback(ben.close)
        ana.ask("What is 12 * 7?")
        wait_turns(lab, {"ana": 1})
        assert lab.locator(f"{view} .nba-notice").is_hidden()
        ben.ask("Explain a for loop")
        wait_turns(lab, {"ana": 1, "ben": 1})
        ana.ask("And 6 * 7?")
        wait_turns(lab, {"ana": 2, "ben": 1})
        assert "2 students" in lab.inner_text(f"{view} .nbc-count")
        # ben asks the teacher: his row is marked, and the count says so
        ben.ask("@teacher my loop never ends")
        wait_turns(lab, {"ana": 2, "ben": 2})
        lab.wait_for_selector(f"{view} .nbc-row.nbc-help[data-user='ben']")
        assert lab.locator(f"{view} .nbc-row.nbc-help").count() == 1
        assert "1 asking for help" in lab.inner_text(f"{view} .nbc-count")
        # one click opens ana's latest session, read-only, with the chat's renderer
        lab.click(f"{view} .nbc-row[data-user='ana']")
        lab.wait_for_function("(s) => document.querySelectorAll(s + ' .nbb-transcript .nba-turn').length === 2", arg=view)
        transcript = lab.inner_text(f"{view} .nbb-transcript")
        assert "What is 12 * 7?" in transcript and "And 6 * 7?" in transcript
        assert "2 turns" in lab.inner_text(f"{view} .nbb-usage")
        assert not lab.locator(f"{view} .nbb-transcript textarea").count()
        # the open transcript follows the student's next turn
        ana.ask("What is 2 + 2?")
        lab.wait_for_function("(s) => document.querySelectorAll(s + ' .nbb-transcript .nba-turn').length === 3", arg=view)
        lab.wait_for_function("""(s) => { const box = document.querySelector(s + ' .nbb-transcript');
            const turns = box.querySelectorAll('.nba-turn'), last = turns[turns.length - 1].getBoundingClientRect();
            const seen = box.getBoundingClientRect(); return last.top < seen.bottom && last.bottom > seen.top; }""",
                              arg=view)  # the new turn is in view (#48: it came in below the visible part)
        wait_turns(lab, {"ana": 3, "ben": 2})
        # over budget and failing turns are marked too
        lab.wait_for_selector(f"{view} .nbc-row.nbc-over-budget[data-user='ana']")
        assert lab.locator(f"{view} .nbc-row.nbc-over-budget").count() == 1  # ben spent less
        ben.fail_as("cy", 2)
        wait_turns(lab, {"ana": 3, "ben": 2, "cy": 2})
        assert lab.inner_text(f"{view} .nbc-row[data-user='cy'] .nbc-flags") == "2 errors in a row"
        assert lab.locator(f"{view} .nbc-row.nbc-errors").count() == 1
        # a half-written file is named, never breaks the view
        (folder / "half.json").write_text('{"format": "nbagent.session", "version": 3, "tu')
        lab.wait_for_function("(s) => /Skipped 1 unreadable file: half.json/.test(document.querySelector(s + ' .nba-notice').textContent)",
                              arg=view)
        assert turns_of(lab) == {"ana": 3, "ben": 2, "cy": 2}
        shot(lab, view, "class_view.png", tmp_path)
    assert lab.errors == []
