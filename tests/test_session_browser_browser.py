"""The session browser, the chat's New chat / History, and a stepping replay's Next (a teacher
stepping a recorded lesson with the keyboard only), in a real browser (JupyterLab + Playwright +
chromium).

Run:  flock /tmp/nbagent-browser.lock env PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_session_browser_browser.py
Env:  NBAGENT_SHOTS=docs/images (also write the screenshots there)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, ROOT

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

CALCULATOR = ("from nbagent import Agent, tool\n"
              "@tool\ndef calculator(expression: str) -> str:\n"
              "    \"\"\"Evaluate an arithmetic expression.\"\"\"\n"
              "    return str(eval(expression, {'__builtins__': {}}))\n")
NOTEBOOKS = {
    "browser.ipynb": [
        "from nbagent import Agent\nimport pathlib\n"
        "a = Agent(model='demo', delay=0, save_to='chats', user='ann'); a.ask('Plot the sales data')\n"
        "b = Agent(model='demo', delay=0, save_to='chats', user='ben'); b.ask('Second chat'); b.ask('More please')\n"
        "pathlib.Path('chats/broken.json').write_text('{not json')",
        "import nbagent\nnbagent.session_browser('chats', delay=0)",
    ],
    "history.ipynb": [
        "from nbagent import Agent\nAgent(model='demo', delay=0, save_to='chats2').ask('Old question')\n"
        "agent = Agent(model='demo', delay=0, save_to='chats2')\nagent",
    ],
    "unsaved.ipynb": [
        "from nbagent import Agent\nagent = Agent(model='demo', delay=0, save_to='unsaved')\nagent",
    ],
    "replay.ipynb": [
        CALCULATOR + "rec = Agent(model='demo', delay=0, save_to='lesson', tools=[calculator])\n"
        "rec.ask('What is 12 * 7?')\n"
        "replay = Agent(model=f'replay:{rec.session_path}', speed=None, step=True)\nreplay",
    ],
    "lesson.ipynb": [  # a two-turn lesson of 3 steps: a tool call and its answer, then a plain answer
        CALCULATOR + "rec = Agent(model='demo', delay=0, save_to='lesson2', tools=[calculator])\n"
        "rec.ask('What is 12 * 7?'); rec.ask('Explain monads')\n"
        "lesson = Agent(model=f'replay:{rec.session_path}', speed=None, step=True)\nlesson",
    ],
}


def run_all(page, nb: str, selector: str) -> str:
    page.evaluate("() => { window.__run = window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    assert page.evaluate("async () => await Promise.race([window.__run.then(() => true),"
                         " new Promise(r => setTimeout(() => r(false), 90000))])")
    page.wait_for_selector(f"{nb} {selector}")
    return f"{nb} {selector}"


def shot(page, selector: str, name: str, tmp_path: Path) -> Path:
    target = os.environ.get("NBAGENT_SHOTS")
    path = (ROOT / target if target else tmp_path) / name
    page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'start'})", selector)
    page.locator(selector).screenshot(path=str(path))
    return path


def rows(page, browser: str) -> list[str]:
    return page.evaluate("(s) => [...document.querySelectorAll(s + ' .nbb-row')].map(r => r.querySelector('.nbb-name').textContent)",
                         browser)


def wait_rows(page, browser: str, n: int) -> None:
    page.wait_for_function("([s, n]) => document.querySelectorAll(s + ' .nbb-row').length === n", arg=[browser, n])


def turns_done(page, chat: str, n: int) -> None:
    page.wait_for_function("""([sel, n]) => { const c = document.querySelector(sel);
        return c && [...c.querySelectorAll('.nba-turn')].filter(t => !t.classList.contains('nba-running')).length === n
          && !c.classList.contains('nba-is-running'); }""", arg=[chat, n], timeout=60_000, polling=50)


def saved_turns(path: Path) -> int:
    return len(json.loads(path.read_text())["turns"])


def test_the_browser_lists_filters_opens_exports_resumes_and_deletes(lab, notebook, jupyter_server, tmp_path):
    folder = Path(jupyter_server["root"]) / "chats"
    nb = notebook("browser.ipynb")
    browser = run_all(lab, nb, ".nbb-browser")
    wait_rows(lab, browser, 3)
    assert rows(lab, browser)[:2] == ["Second chat", "Plot the sales data"]  # newest first
    broken = lab.locator(f"{browser} .nbb-row.nbb-unreadable")
    assert broken.count() == 1 and "unreadable" in broken.inner_text()
    # filters: text, user, model
    lab.fill(f"{browser} .nbb-search", "SALES")
    wait_rows(lab, browser, 1)
    assert rows(lab, browser) == ["Plot the sales data"]
    lab.fill(f"{browser} .nbb-search", "")
    lab.select_option(f"{browser} .nbb-user", "ben")
    wait_rows(lab, browser, 1)
    assert rows(lab, browser) == ["Second chat"]
    lab.select_option(f"{browser} .nbb-user", "")
    lab.fill(f"{browser} .nbb-search", "more please")  # only in the second chat's second prompt
    lab.check(f"{browser} .nbb-fulltext")
    wait_rows(lab, browser, 1)
    assert rows(lab, browser) == ["Second chat"]
    lab.uncheck(f"{browser} .nbb-fulltext")
    lab.fill(f"{browser} .nbb-search", "")
    wait_rows(lab, browser, 3)
    # open: the transcript read-only, with the chat's renderer, and its usage
    broken.click()
    assert not lab.locator(f"{browser} .nbb-detail.nbb-open").count()  # an unreadable row does not open
    lab.click(f"{browser} .nbb-row:has-text('Second chat')")
    lab.wait_for_function("(s) => document.querySelectorAll(s + ' .nbb-transcript .nba-turn').length === 2", arg=browser)
    assert "2 turns" in lab.inner_text(f"{browser} .nbb-usage")
    assert lab.locator(f"{browser} .nbb-transcript .nba-md-done, {browser} .nbb-transcript .nba-md-tail").count() > 0
    assert not lab.locator(f"{browser} .nbb-transcript textarea").count()  # read-only
    second = next(p for p in folder.glob("*.json") if "Second" in p.read_text()[:3000] and p.name != "broken.json")
    # export md and html: the written path is shown
    lab.click(f"{browser} .nbb-export-md")
    lab.wait_for_function("(s) => /Exported to .*\\.md/.test(document.querySelector(s + ' .nbb-status').textContent)", arg=browser)
    assert "More please" in second.with_suffix(".md").read_text()
    lab.click(f"{browser} .nbb-export-html")
    lab.wait_for_function("(s) => /\\.html$/.test(document.querySelector(s + ' .nbb-status').textContent)", arg=browser)
    assert second.with_suffix(".html").read_text().startswith("<!DOCTYPE html>")
    shot(lab, browser, "session_browser.png", tmp_path)
    # resume: a live chat below the browser; its turn saves into the same file
    lab.click(f"{browser} .nbb-resume")
    chat = f"{nb} .nbb-chat .nba-chat"
    lab.wait_for_selector(chat)
    turns_done(lab, chat, 2)
    lab.fill(f"{chat} .nba-input", "A third turn")
    lab.press(f"{chat} .nba-input", "Enter")
    turns_done(lab, chat, 3)
    assert saved_turns(second) == 3
    lab.wait_for_function("""(s) => [...document.querySelectorAll(s + ' .nbb-row')].some(r =>
        r.textContent.startsWith('Second chat') && r.children[3].textContent === '3')""", arg=browser)  # the list follows
    shot(lab, f"{nb} .nbb-chat", "session_browser_resumed.png", tmp_path)
    # delete: asks first, then moves the file to the trash
    lab.click(f"{browser} .nbb-row:has-text('Plot the sales data')")
    lab.click(f"{browser} .nbb-delete")
    lab.wait_for_selector(f"{browser} .nbb-confirm .nbb-delete-yes")
    first = [p for p in folder.glob("*.json") if p.name != "broken.json" and p != second]
    assert len(first) == 1 and first[0].exists()  # nothing moved before the answer
    lab.click(f"{browser} .nbb-delete-yes")
    wait_rows(lab, browser, 2)
    assert not first[0].exists() and (folder / ".trash" / first[0].name).exists()
    assert "Plot the sales data" not in rows(lab, browser)
    # undo: the notice of the delete has Undo, which moves the file back and lists it again
    lab.click(f"{browser} .nba-notice .nbb-undo")
    wait_rows(lab, browser, 3)
    assert first[0].exists() and not (folder / ".trash" / first[0].name).exists()
    assert "Plot the sales data" in rows(lab, browser)
    lab.wait_for_function("(s) => /Restored /.test(document.querySelector(s + ' .nba-notice').textContent)", arg=browser)
    assert not lab.errors


def test_new_chat_and_history_in_the_chat_widget(lab, notebook, jupyter_server, tmp_path):
    folder = Path(jupyter_server["root"]) / "chats2"
    nb = notebook("history.ipynb")
    chat = run_all(lab, nb, ".nba-chat")
    lab.wait_for_selector(f"{chat} .nba-new-chat", state="visible")
    lab.fill(f"{chat} .nba-input", "Fresh question")
    lab.press(f"{chat} .nba-input", "Enter")
    turns_done(lab, chat, 1)
    lab.click(f"{chat} .nba-new-chat")
    turns_done(lab, chat, 0)
    assert lab.locator(f"{chat} .nba-empty").is_visible()
    lab.click(f"{chat} .nba-history-btn")
    lab.wait_for_selector(f"{chat} .nba-history-row")
    titles = lab.eval_on_selector_all(f"{chat} .nba-history-row .nba-history-title", "els => els.map(e => e.textContent)")
    assert titles == ["Fresh question", "Old question"]
    shot(lab, chat, "chat_history.png", tmp_path)
    lab.click(f"{chat} .nba-history-row:has-text('Old question')")
    turns_done(lab, chat, 1)
    assert "Old question" in lab.inner_text(f"{chat} .nba-turn")
    lab.fill(f"{chat} .nba-input", "Back again")
    lab.press(f"{chat} .nba-input", "Enter")
    turns_done(lab, chat, 2)
    old = next(p for p in folder.glob("*.json") if "Old question" in p.read_text())
    assert saved_turns(old) == 2 and len(list(folder.glob("*.json"))) == 2
    # the notebook's saved transcript follows: the fresh chat's outputs were blanked by the switches
    outputs_md = """() => { const cells = window.jupyterapp.shell.currentWidget.content.model.cells, out = [];
        for (let i = 0; i < cells.length; i++) for (const o of (cells.get(i).outputs?.toJSON() || []))
          out.push([].concat((o.data || {})['text/markdown'] || []).join(''));
        return out.join('\\n'); }"""
    # the transcript of the turn just ended goes out beside its end: waited for, not guessed at with a pause
    lab.wait_for_function(f"() => ({outputs_md})().includes('Back again')", polling=50, timeout=30_000)
    md = lab.evaluate(outputs_md)
    assert "Old question" in md and "Back again" in md and "Fresh question" not in md
    assert not lab.errors


def test_a_stepping_replay_waits_for_next(lab, notebook, tmp_path):
    nb = notebook("replay.ipynb")
    chat = run_all(lab, nb, ".nba-chat")
    assert not lab.locator(f"{chat} .nba-new-chat").is_visible()  # no save_to: no New chat / History
    lab.fill(f"{chat} .nba-input", "What is 12 * 7?")
    lab.press(f"{chat} .nba-input", "Enter")
    lab.wait_for_selector(f"{chat} .nba-next", state="visible")
    assert lab.locator(f"{chat} .nba-turn .nba-tool").count() == 0  # nothing played before Next
    shot(lab, chat, "replay_next.png", tmp_path)
    lab.click(f"{chat} .nba-next")
    lab.wait_for_selector(f"{chat} .nba-tool")  # the recorded tool call played
    lab.wait_for_selector(f"{chat} .nba-next", state="visible")  # and it waits again
    lab.click(f"{chat} .nba-next")
    turns_done(lab, chat, 1)
    assert "84" in lab.inner_text(f"{chat} .nba-turn")
    assert lab.get_attribute(f"{chat} .nba-next", "aria-disabled") == "true"  # shown, with nothing to play
    assert counter(lab, chat) == "step 2 of 2"
    assert not lab.errors


def text(page, selector: str) -> str:
    """An element's text (textContent: a notebook scrolled by a key may skip rendering the chat)."""
    return page.evaluate("(s) => document.querySelector(s)?.textContent ?? ''", selector)


def counter(page, chat: str) -> str:
    return text(page, f"{chat} .nba-step-count")


def wait_step(page, chat: str, text: str) -> None:
    page.wait_for_function("([s, t]) => document.querySelector(s + ' .nba-step-count')?.textContent === t",
                           arg=[chat, text], timeout=60_000, polling=50)


def wait_next_focused(page, chat: str) -> None:
    """Next has the keyboard and a step to play (the failure says where the keyboard and Next were)."""
    try:
        page.wait_for_function("""(s) => { const b = document.querySelector(s + ' .nba-next');
            return b && document.activeElement === b && b.getAttribute('aria-disabled') === 'false'; }""",
                               arg=chat, timeout=60_000, polling=50)
    except sync_api.TimeoutError:
        seen = page.evaluate("""(s) => ({focus: document.activeElement?.outerHTML.slice(0, 120),
            next: document.querySelector(s + ' .nba-next')?.outerHTML, count: document.querySelector(s + ' .nba-step-count')?.textContent})""", chat)
        raise AssertionError(f"Next never had the keyboard with a step to play: {seen}") from None


def focused(page) -> str:
    return page.evaluate("() => document.activeElement?.className || ''")


def test_a_teacher_steps_a_recorded_lesson_with_the_keyboard_only(lab, notebook, tmp_path):
    nb = notebook("lesson.ipynb")
    chat = run_all(lab, nb, ".nba-chat")
    nxt = f"{chat} .nba-next"
    assert counter(lab, chat) == "step 0 of 3"
    assert lab.get_attribute(nxt, "aria-keyshortcuts") == "ArrowRight Space"
    assert lab.get_attribute(f"{chat} .nba-step-count", "aria-live") == "polite"
    assert "← cannot go back" in lab.get_attribute(nxt, "title")

    lab.focus(f"{chat} .nba-input")  # the teacher focuses the chat; from here on, the keyboard only
    lab.keyboard.type("What is 12 * 7?")
    lab.keyboard.press("Enter")
    wait_next_focused(lab, chat)  # the keyboard went from the box to Next, nothing played yet
    assert counter(lab, chat) == "step 0 of 3" and lab.locator(f"{chat} .nba-tool").count() == 0
    lab.keyboard.press("ArrowLeft")  # no going back: nothing visible happens
    lab.keyboard.press("ArrowRight")
    wait_step(lab, chat, "step 1 of 3")
    lab.wait_for_selector(f"{chat} .nba-tool")  # the recorded tool call played
    wait_next_focused(lab, chat)  # Next kept the keyboard and waits again
    assert counter(lab, chat) == "step 1 of 3"  # one press, one step (Space's own click adds none)
    shot(lab, chat, "replay_keyboard.png", tmp_path)

    # the keys belong to the chat only: with the keyboard in the notebook, → and Space play nothing
    lab.evaluate("(nb) => document.querySelector(nb + ' .jp-Notebook').focus()", nb)
    lab.keyboard.press("ArrowRight")
    lab.keyboard.press("Space")
    assert counter(lab, chat) == "step 1 of 3"
    assert lab.get_attribute(nxt, "aria-disabled") == "false"  # still waiting for the teacher
    lab.focus(nxt)
    lab.keyboard.press("Space")
    wait_step(lab, chat, "step 2 of 3")
    turns_done(lab, chat, 1)
    assert "84" in text(lab, f"{chat} .nba-turn")
    lab.wait_for_function("(s) => document.activeElement === document.querySelector(s + ' .nba-input')", arg=chat)

    # a prompt that differs from the recorded one: the notice comes before anything plays
    lab.keyboard.type("Explain functors")
    lab.keyboard.press("Enter")
    notice = f"{chat} .nba-replay-notice"
    lab.wait_for_selector(notice, state="visible")
    assert "“Explain monads”" in text(lab, notice)
    assert lab.get_attribute(f"{chat} .nba-replay-live", "aria-disabled") == "true"  # no live model, and why
    assert "live=" in text(lab, f"{chat} .nba-replay-why")
    assert lab.get_attribute(nxt, "aria-disabled") == "true" and counter(lab, chat) == "step 2 of 3"
    lab.wait_for_function("() => document.activeElement?.classList.contains('nba-replay-continue')")
    shot(lab, chat, "replay_mismatch.png", tmp_path)
    lab.keyboard.press("Enter")  # Continue with the recording
    lab.wait_for_selector(notice, state="hidden")
    wait_next_focused(lab, chat)
    lab.keyboard.press("Space")
    wait_step(lab, chat, "step 3 of 3")
    turns_done(lab, chat, 2)
    assert "monad" in text(lab, f"{chat} .nba-turn:last-of-type").lower()
    assert not lab.errors


def test_a_chat_whose_saves_fail_says_so_until_a_save_works(lab, notebook, jupyter_server, tmp_path):
    """The run found a repeated autosave failure silent after the first warning."""
    folder = Path(jupyter_server["root"]) / "unsaved"
    nb = notebook("unsaved.ipynb")
    chat = run_all(lab, nb, ".nba-chat")
    banner = f"{chat} .nba-autosave"

    def say(prompt: str, n: int) -> None:
        lab.fill(f"{chat} .nba-input", prompt)
        lab.press(f"{chat} .nba-input", "Enter")
        turns_done(lab, chat, n)

    say("first", 1)
    assert not lab.locator(banner).is_visible()
    saved = next(folder.glob("*.json"))
    away = folder.with_name("unsaved-away")
    folder.rename(away)
    folder.write_text("a file where the folder was: every save fails")
    try:
        say("second", 2)
        lab.wait_for_selector(f"{banner}.nba-autosave-failing", state="visible")
        text = lab.inner_text(banner)
        assert text.startswith("Not saved since") and "saves again after each turn" in text, text
        say("third", 3)
        lab.wait_for_function("(s) => /2 saves failed/.test(document.querySelector(s).textContent)", arg=banner)
        shot(lab, chat, "autosave_failing.png", tmp_path)
    finally:
        folder.unlink()
        away.rename(folder)
    say("fourth", 4)
    lab.wait_for_selector(banner, state="hidden")
    assert saved_turns(saved) == 4  # the turns kept in memory were all saved at once
    assert not lab.errors
