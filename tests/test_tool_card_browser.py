"""The run_python card in real JupyterLab (issue 31): hidden bidirectional and invisible
characters in the code to approve are shown as markers with a warning (Trojan Source), and a
call stopped while its code runs says it was stopped while running, not that it never ran.

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_tool_card_browser.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, run_cell

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

# reads as `if level != "user":` with a comment in an editor; the bidi controls reorder it
TROJAN = 'level = "user"\nif level != "user\u202e \u2066# admin only\u2069 \u2066":\n    result = "admin"\nname = "ad\u200bmin"'
SLOW = "import time\nwhile True:\n    time.sleep(0.05)"
AGENT_CELL = (
    "from nbagent import Agent\n"
    "from support.scripted import ScriptedProvider, text_call, tool_call\n"
    f"TROJAN = {TROJAN!r}\n"
    f"SLOW = {SLOW!r}\n"
    "agent = Agent(model=ScriptedProvider([tool_call(('c1', 'run_python', {'code': TROJAN})),"
    " tool_call(('c2', 'run_python', {'code': SLOW})), text_call('never')]), notebook=True)\n"
    "agent"
)
LONG_CELL = (  # a result longer than its box, and a quick one
    "from nbagent import Agent, tool\n"
    "from support.scripted import ScriptedProvider, text_call, tool_call\n"
    "@tool\ndef report() -> str:\n    \"A long report.\"\n    return '\\n'.join(f'line {i}' for i in range(300))\n"
    "@tool\ndef now() -> str:\n    \"The time.\"\n    return '12:00'\n"
    "agent = Agent(model=ScriptedProvider([tool_call(('r1', 'report', {}), ('n1', 'now', {})), text_call('done')]),"
    " tools=[report, now])\n"
    "agent"
)
NOTEBOOK = "card.ipynb"
NOTEBOOKS = {NOTEBOOK: [AGENT_CELL], "long.ipynb": [LONG_CELL]}
AXE = Path(__file__).resolve().parents[1] / "js" / "node_modules" / "axe-core" / "axe.min.js"  # a js/ dev dependency


def test_hidden_characters_are_shown_and_a_stopped_run_says_it_was_running(lab, notebook):
    page, nb = lab, notebook(NOTEBOOK)
    run_cell(page, 0)
    chat = f"{nb} .nba-chat"
    page.wait_for_selector(chat)
    page.fill(f"{chat} .nba-input", "check the level")
    page.press(f"{chat} .nba-input", "Enter")
    card = page.locator(f"{chat} .nba-tool[data-call-id='c1'][data-status='waiting']")
    card.wait_for()
    # 10. the hidden characters are shown, and the card warns of them
    warning = card.locator(".nba-tool-warning")
    assert warning.is_visible() and "holds 5 hidden bidirectional or invisible characters" in warning.inner_text()
    code = card.locator(".nba-tool-code code")
    assert code.locator(".nba-hidden-char").all_inner_texts() == ["⟨U+202E⟩", "⟨U+2066⟩", "⟨U+2069⟩", "⟨U+2066⟩", "⟨U+200B⟩"]
    card.locator(".nba-tool-code code.hljs:not(.nba-hl-pending)").wait_for()  # highlighted once static/grammars.js is here
    assert code.locator(".hljs-keyword", has_text="if").count() == 1
    # the markers survive that highlighting (drawn again from the code, not from the text shown plain)
    assert code.locator(".nba-hidden-char").all_inner_texts() == ["⟨U+202E⟩", "⟨U+2066⟩", "⟨U+2069⟩", "⟨U+2066⟩", "⟨U+200B⟩"]
    shown = code.inner_text()
    assert not any(ch in shown for ch in "\u202e\u2066\u2069\u200b")  # none left raw in what is read
    assert 'if level != "user⟨U+202E⟩ ⟨U+2066⟩# admin only⟨U+2069⟩ ⟨U+2066⟩":' in shown
    card.locator(".nba-approve").click()
    page.locator(f"{chat} .nba-tool[data-call-id='c1'][data-status='done']").wait_for()
    # 16. code that runs until Stop: the card says running, then that it was stopped while running
    slow = page.locator(f"{chat} .nba-tool[data-call-id='c2'][data-status='waiting']")
    slow.wait_for()
    assert not slow.locator(".nba-tool-warning").is_visible()  # plain code: no warning
    slow.locator(".nba-approve").click()
    running = page.locator(f"{chat} .nba-tool[data-call-id='c2'][data-status='running']")
    running.wait_for()
    page.wait_for_function("(s) => /^[1-9][0-9.]* s$/.test(document.querySelector(s).textContent)",  # the clock ticks
                           arg=f"{chat} .nba-tool[data-call-id='c2'] .nba-tool-dur")
    page.click(f"{chat} .nba-stop")
    stopped = page.locator(f"{chat} .nba-tool[data-call-id='c2'][data-status='canceled']")
    stopped.wait_for()
    text = stopped.locator(".nba-tool-result").inner_text()
    assert "The user stopped this tool call while it ran (after" in text, text
    assert "before this tool call ran" not in text
    assert stopped.locator(".nba-badge").inner_text().startswith("stopped after ")  # not "canceled": it ran
    page.wait_for_function("(s) => !document.querySelector(s).classList.contains('nba-is-running')", arg=chat)
    errors = [e for e in page.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errors, errors


def test_a_result_box_that_scrolls_can_be_reached_by_keyboard(lab, notebook):
    """#48 rough edges: axe's scrollable-region-focusable failed on a long tool result (the box scrolled
    but could not be focused); a box that fits its text adds no Tab stop."""
    page, nb = lab, notebook("long.ipynb")
    run_cell(page, 0)
    chat = f"{nb} .nba-chat"
    page.wait_for_selector(chat)
    page.fill(f"{chat} .nba-input", "report")
    page.press(f"{chat} .nba-input", "Enter")
    page.locator(f"{chat} .nba-tool[data-call-id='n1'][data-status='done']").wait_for()
    long_box = page.locator(f"{chat} .nba-tool[data-call-id='r1'] .nba-tool-out")
    long_box.wait_for()
    page.wait_for_function("(s) => document.querySelector(s).getAttribute('tabindex') === '0'",
                           arg=f"{chat} .nba-tool[data-call-id='r1'] .nba-tool-out")
    assert long_box.get_attribute("aria-label") == "Result of report"
    assert page.locator(f"{chat} .nba-tool[data-call-id='n1'] .nba-tool-out").get_attribute("tabindex") is None
    assert AXE.exists(), "axe-core is missing: run `npm ci` in js/"
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async (s) => (await window.axe.run(document.querySelector(s),
        { runOnly: { type: 'rule', values: ['scrollable-region-focusable'] } })).violations.map(v => v.id)""", chat)
    assert found == [], found
