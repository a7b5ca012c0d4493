"""The widget's usage footer and over-budget ask in a real browser (JupyterLab + Playwright + chromium).

Run:  .venv/bin/python -m pytest -q -m browser tests/test_widget_budget_browser.py
Env:  NBAGENT_SHOTS=docs/images (also write a screenshot of the over-budget ask there)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, ROOT

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

# the demo model at a made-up price: its first turn (~10 input tokens) fits the $0.02 budget and
# spends ~$0.015 (~140 tokens of reply), so the second turn's estimate goes over
NOTEBOOKS = {
    "budget.ipynb": ["from nbagent import Agent\n"
                     "agent = Agent(model='demo', budget_usd=0.02, pricing={'demo': {'input': 100.0, 'output': 100.0}})\n"
                     "agent.provider.delay = 0.001\nagent"],
}


def show_widget(page, nb):
    page.evaluate("""() => { const app = window.jupyterapp, nb = app.shell.currentWidget.content;
        nb.activeCellIndex = 0; nb.deselectAll(); window.__run = app.commands.execute('notebook:run-cell'); }""")
    assert page.evaluate("async () => await Promise.race([window.__run.then(() => true),"
                         " new Promise(r => setTimeout(() => r(false), 60000))])")
    page.wait_for_selector(f"{nb} .nba-chat")
    return f"{nb} .nba-chat"


def wait_turns(page, chat, n):
    page.wait_for_function("""([sel, n]) => { const c = document.querySelector(sel);
        return c && [...c.querySelectorAll('.nba-turn')].filter(t => !t.classList.contains('nba-running')).length >= n
          && !c.classList.contains('nba-is-running'); }""", arg=[chat, n], timeout=60_000, polling=50)


def shot(page, chat, tmp_path):
    target = os.environ.get("NBAGENT_SHOTS")
    path = (ROOT / target if target else tmp_path) / "widget_budget_ask.png"
    page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'center'})", chat)
    page.locator(chat).screenshot(path=str(path))


def test_footer_gauge_and_spend_and_an_over_budget_send_asks(lab, notebook, tmp_path):
    nb = notebook("budget.ipynb")
    chat = show_widget(lab, nb)
    lab.fill(f"{chat} .nba-input", "hello")
    lab.press(f"{chat} .nba-input", "Enter")
    wait_turns(lab, chat, 1)
    lab.wait_for_function("(s) => /of \\$0\\.020/.test(document.querySelector(s + ' .nba-spend').textContent)", arg=chat)
    gauge = lab.evaluate("""(s) => { const g = document.querySelector(s + ' .nba-gauge');
        return {text: g.querySelector('.nba-gauge-text').textContent, spend: g.querySelector('.nba-spend').textContent,
                level: g.dataset.level, width: g.querySelector('.nba-gauge-fill').style.width}; }""", chat)
    assert gauge["text"].startswith("context ") and "/ 8,192 (" in gauge["text"]
    assert gauge["level"] == "ok" and gauge["width"].endswith("%")
    assert gauge["spend"].startswith("$0.01") and gauge["spend"].endswith("of $0.020")
    # over budget: the widget asks, nothing is sent; Cancel gives the prompt back
    prompt = "<img src=x onerror=\"window.__pwned=1\"> tell me more"
    lab.fill(f"{chat} .nba-input", prompt)
    lab.press(f"{chat} .nba-input", "Enter")
    lab.wait_for_selector(f"{chat} .nba-confirm", state="visible")
    ask = lab.evaluate("(s) => document.querySelector(s + ' .nba-confirm-text').textContent", chat)
    assert "would exceed the budget" in ask and "input tokens" in ask and "of $0.020" in ask
    shot(lab, chat, tmp_path)
    assert lab.evaluate("(s) => document.querySelectorAll(s + ' .nba-turn').length", chat) == 1  # the prompt's echo went
    assert not lab.locator(f"{chat} .nba-input").is_disabled()
    lab.click(f"{chat} .nba-cancel")
    assert lab.locator(f"{chat} .nba-confirm").is_hidden()
    assert lab.input_value(f"{chat} .nba-input") == prompt
    # asked again, "Send anyway" sends that one turn
    lab.press(f"{chat} .nba-input", "Enter")
    lab.wait_for_selector(f"{chat} .nba-confirm", state="visible")
    lab.click(f"{chat} .nba-anyway")
    wait_turns(lab, chat, 2)
    assert lab.evaluate("(s) => document.querySelectorAll(s + ' .nba-turn').length", chat) == 2
    assert lab.locator(f"{chat} .nba-confirm").is_hidden()
    assert not lab.evaluate("() => !!window.__pwned")
    errs = [e for e in lab.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errs, errs
