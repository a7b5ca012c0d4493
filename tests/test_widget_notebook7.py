"""ChatWidget in a real browser under Jupyter Notebook 7 (test_widget_browser.py covers JupyterLab).

One Notebook 7 server and one Chromium page: open a notebook, run all its cells (define an agent
with a calculator tool, show it, run a turn from the next cell) and check that the widget shows
the whole turn, is readable (theme colours resolve, enough contrast, non-zero size) and logs no
errors.

Run:  .venv/bin/python -m pytest -q tests/test_widget_notebook7.py
Env:  CHROMIUM=/usr/bin/chromium   NBAGENT_SHOTS=docs/images (also write docs/images/widget-notebook7.png)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, CHROMIUM_ARGS, ROOT

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("notebook.app", reason="Jupyter Notebook 7 (notebook>=7) is not installed")

NOTEBOOK = "nb7.ipynb"
CELLS = [
    "from nbagent import Agent, tool\n"
    "@tool\n"
    "def calculator(expression: str) -> str:\n"
    "    \"\"\"Evaluate an arithmetic expression.\"\"\"\n"
    "    return str(eval(expression, {'__builtins__': {}}))\n"
    "agent = Agent(model=\"demo\", tools=[calculator])",
    "agent",
    "await agent.conversation.chat_to_completion(\"What is 12 * 7?\")",
]
WIDGET_WORDS = ("nba", "nbagent", "anywidget", "widget")
LIFE = "life.ipynb"  # restart, save, reopen, keyboard
LIFE_CELLS = [CELLS[0] + "\nagent"]
RICH = "rich.ipynb"  # a DataFrame and a figure in tool cards, math, XSS payloads
# the nb7_server fixture (one Notebook 7 server holding these): support/browser_fixtures.py
NOTEBOOKS = {NOTEBOOK: CELLS, LIFE: LIFE_CELLS,
             RICH: ["from support.streams import rich_agent\nagent = rich_agent()\nagent"]}


def _widget_frames(stack):
    """The stack frames that run in the widget's code (anywidget loads our ESM from a blob: URL)."""
    return "\n".join(ln for ln in (stack or "").splitlines() if "blob:" in ln or "anywidget" in ln or "jupyter-widgets" in ln)


@pytest.fixture(scope="module")
def nb7_page(nb7_server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport={"width": 1100, "height": 900})
        page = ctx.new_page()
        page.set_default_timeout(60_000)
        page.errors = []
        page.on("pageerror", lambda e: page.errors.append(f"pageerror: {e}\n{_widget_frames(e.stack)}"))
        page.on("console", lambda m: page.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        _goto(page, nb7_server, NOTEBOOK)
        yield page
        ctx.close()
        browser.close()


def _goto(page, server, path):
    """Open ``path`` in Notebook 7 (one document per page) and wait for its idle kernel."""
    page.goto(f"{server['base']}/notebooks/{path}?token={server['token']}")
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    page.wait_for_function("""(path) => { const w = window.jupyterapp.shell.currentWidget;
        return w && w.context?.path === path && w.sessionContext?.session?.kernel?.status === 'idle'; }""",
                           arg=path, polling=50)


def _run_all(page):
    ok = page.evaluate("""async (t) => await Promise.race([
        window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true),
        new Promise(r => setTimeout(() => r(false), t))])""", 60_000)
    assert ok, "cells did not finish executing"


def _send(page, chat, text):
    page.fill(f"{chat} .nba-input", text)
    page.press(f"{chat} .nba-input", "Enter")


def _turns_done(page, chat, n):
    page.wait_for_function("""([sel, n]) => { const c = document.querySelector(sel);
        return c && [...c.querySelectorAll('.nba-turn')].filter(t => !t.classList.contains('nba-running')).length >= n
          && !c.classList.contains('nba-is-running'); }""", arg=[chat, n], polling=50)


def _lum(c):
    """Relative luminance of an 'rgb(a)(r, g, b[, a])' or 'color(srgb r g b[ / a])' colour (the
    computed value of a color-mix; alpha ignored)."""
    scale = 1 if c.startswith("color(srgb") else 255
    r, g, b = (float(x) / scale for x in re.findall(r"[\d.]+", c)[:3])
    lin = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(fg, bg):
    """WCAG contrast ratio of two colours."""
    hi, lo = sorted((_lum(fg), _lum(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _assert_readable(page, chat, dark=False):
    look = page.evaluate("""(s) => { const c = document.querySelector(s), r = c.getBoundingClientRect();
        const st = (el) => { const x = getComputedStyle(el); return {color: x.color, bg: x.backgroundColor}; };
        const body = getComputedStyle(document.body);
        return { jpFg: body.getPropertyValue('--jp-ui-font-color1').trim(), jpBg: body.getPropertyValue('--jp-layout-color1').trim(),
                 chat: st(c), prompt: st(c.querySelector('.nba-prompt')), tool: st(c.querySelector('.nba-tool')),
                 input: st(c.querySelector('.nba-input')), send: st(c.querySelector('.nba-send')),
                 md: st(c.querySelector('.nba-md')), footer: st(c.querySelector('.nba-footer')),
                 w: r.width, h: r.height, turnsH: c.querySelector('.nba-turns').getBoundingClientRect().height }; }""", chat)
    assert look["jpFg"] and look["jpBg"], f"Jupyter theme variables missing: {look}"
    assert look["w"] > 300 and look["h"] > 150 and look["turnsH"] > 100, look
    assert _opaque(look["chat"]["bg"]), look
    assert (_lum(look["chat"]["bg"]) < 0.2) == dark, look  # the widget follows the page's theme
    for part, need in [("chat", 4.5), ("prompt", 4.5), ("tool", 4.5), ("input", 4.5), ("md", 4.5), ("footer", 3), ("send", 3)]:
        bg = look[part]["bg"] if _opaque(look[part]["bg"]) else look["chat"]["bg"]
        assert _contrast(look[part]["color"], bg) >= need, (part, look[part], bg, look)


def _opaque(c):
    return not c.startswith("rgba") or not c.replace(" ", "").endswith(",0)")


def test_widget_shows_a_full_turn_readably_in_notebook7(nb7_page, tmp_path):
    page = nb7_page
    nb = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
    ok = page.evaluate("""async (t) => await Promise.race([
        window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true),
        new Promise(r => setTimeout(() => r(false), t))])""", 60_000)
    assert ok, "cells did not finish executing"
    chat = f'[id="{nb}"] .nba-chat'
    page.wait_for_selector(chat, state="attached")
    page.wait_for_function("""(sel) => { const c = document.querySelector(sel);
        return c && c.querySelector('.nba-turn .nba-footer') && !c.classList.contains('nba-is-running'); }""",
                           arg=chat, polling=50)
    # the cells' own outputs: no traceback anywhere, the last cell returned a response
    assert page.locator(f'[id="{nb}"] .jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').count() == 0
    turn = page.locator(chat).locator(".nba-turn").first
    assert turn.locator(".nba-prompt").inner_text() == "What is 12 * 7?"
    thinking = turn.locator(".nba-thinking").first
    assert re.search(r"Thought · \d+ tokens", thinking.locator("summary").inner_text())
    card = turn.locator(".nba-tool").first
    assert card.locator(".nba-tool-name").inner_text() == "calculator"
    assert card.get_attribute("data-status") == "done"
    assert card.locator(".nba-tool-out").inner_text() == "84"
    assert turn.locator(".nba-md strong", has_text="84").count() == 1
    assert "84" in turn.locator(".nba-md").last.inner_text()

    # readable in Notebook 7's theme: Jupyter's CSS variables resolve, text contrasts with its background,
    # the widget has a real size
    page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'center'})", chat)
    _assert_readable(page, chat)
    # and in its dark theme too
    page.evaluate("async () => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'}); }")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    _assert_readable(page, chat, dark=True)
    page.evaluate("async () => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'}); }")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'")

    # a screenshot (its thought opened, nothing focused); kept in docs/images/ with NBAGENT_SHOTS=docs/images
    page.evaluate("""(s) => { document.activeElement && document.activeElement.blur();
        document.querySelector(s).querySelector('.nba-thinking').open = true; }""", chat)
    page.wait_for_timeout(300)
    shots = os.environ.get("NBAGENT_SHOTS")
    path = (ROOT / shots / "widget-notebook7.png") if shots else tmp_path / "widget-notebook7.png"
    page.locator(chat).screenshot(path=str(path))

    # errors from the widget (its message names it, or its stack runs through the widget's ESM/manager);
    # Notebook 7 itself throws one on load ("reading 'schema'", from its shortcuts settings) without any widget
    errors = [e for e in page.errors if "blob:" in e or any(w in e.lower() for w in WIDGET_WORDS)]
    assert not errors, errors


def test_restart_save_reopen_and_keys_in_notebook7(nb7_page, nb7_server):
    """Ctrl+S from the chat box saves; a kernel restart leaves a readable, unlocked widget that says
    to re-run the cell; the saved notebook, reopened with another kernel, shows the conversation."""
    page = nb7_page
    _goto(page, nb7_server, LIFE)
    nb = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
    _run_all(page)
    chat = f'[id="{nb}"] .nba-chat'
    page.wait_for_selector(chat)
    _send(page, chat, "What is 6 * 7?")
    _turns_done(page, chat, 1)
    assert page.locator(chat).locator(".nba-tool-out").first.inner_text() == "42"
    assert page.evaluate("(s) => document.activeElement === document.querySelector(s + ' .nba-input')", chat)
    page.keyboard.type("draft")
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", polling=50)
    saved = json.loads((nb7_server["root"] / LIFE).read_text())
    md = "".join("".join(o["data"]["text/markdown"]) for o in saved["cells"][0]["outputs"] if "text/markdown" in o.get("data", {}))
    assert "What is 6 * 7?" in md and "42" in md
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart(); }")
    page.wait_for_function("(s) => document.querySelector(s + ' .nba-notice')?.textContent.includes('re-run this cell')",
                           arg=chat, polling=50)
    page.press(f"{chat} .nba-input", "Enter")
    page.wait_for_timeout(300)
    assert page.locator(chat).locator(".nba-turn").count() == 1 and "42" in page.inner_text(f"{chat} .nba-turns")
    assert page.is_enabled(f"{chat} .nba-input") and page.is_enabled(f"{chat} .nba-send")
    assert not page.locator(chat).evaluate("c => c.classList.contains('nba-is-running')")
    # reopen the saved file with another kernel: the transcript output is shown
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.shutdown(); }")
    _goto(page, nb7_server, LIFE)
    page.wait_for_selector(".nbagent-transcript")
    shown = page.evaluate("() => [...document.querySelectorAll('.nbagent-transcript')].filter(e => e.offsetParent).map(e => e.innerText)")
    assert len(shown) == 2 and "saved transcript" in shown[0]  # the head, then the turn's output
    assert "What is 6 * 7?" in shown[1] and "42" in shown[1]
    # the widget's output settles on the blank stand-in it saved, not "model not found"
    page.wait_for_function("""() => { const a = document.querySelector('.jp-Cell .jp-OutputArea');
        return !a.textContent.includes('Loading widget')
          && (a.textContent.includes('Error displaying') || !!a.querySelector('.jp-OutputArea-output > .lm-Widget')); }""",
                           polling=100)
    assert "Error displaying widget" not in page.inner_text(".jp-Cell >> nth=0 >> .jp-OutputArea")
    errors = [e for e in page.errors if ("blob:" in e or any(w in e.lower() for w in WIDGET_WORDS))
              and "model not found" not in e.lower()]
    assert not errors, errors


def test_rich_tool_results_math_and_xss_in_notebook7(nb7_page, nb7_server):
    from test_widget_browser import check_rich_turn

    page = nb7_page
    _goto(page, nb7_server, RICH)
    nb = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
    _run_all(page)
    chat = f'[id="{nb}"] .nba-chat'
    page.wait_for_selector(chat)
    check_rich_turn(page, chat)
    errors = [e for e in page.errors if "blob:" in e or any(w in e.lower() for w in WIDGET_WORDS)]
    assert not errors, errors
