"""An MCP tool in the widget, in a real browser (JupyterLab + Playwright + chromium): the card names
the server, waits for approval under policy="ask", and shows the image the server returned; the
kernel's shutdown stops the server.

Run:  .venv/bin/python -m pytest -q -m browser tests/test_mcp_browser.py
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from support.jupyter import ROOT, require_lab_browser, run_cell  # noqa: E402

pytestmark = pytest.mark.browser
require_lab_browser()

SERVER = str(ROOT / "tests" / "support" / "mcp_server.py")
NOTEBOOKS = {
    "mcp.ipynb": ["import sys\nfrom nbagent import Agent\n"
                  f"agent = Agent(model='demo', mcp=[[sys.executable, {SERVER!r}, '--linger']], policy='ask')\n"
                  "agent.provider.delay = 0.001\nagent"],
    "mcp_broken.ipynb": ["import sys\nfrom nbagent import Agent\n"
                         "agent = Agent(model='demo', mcp=[[sys.executable, '-c', 'import sys; sys.exit(3)']])\n"
                         "agent.provider.delay = 0.001\nagent"],
}


def server_processes() -> list[int]:
    """Processes running the tests' MCP server (the kernel's child), zombies left out."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and SERVER in (entry / "cmdline").read_bytes().decode(errors="replace") \
                    and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def send_from_first_cell(lab, nb: str, prompt: str) -> str:
    """Run the notebook's first cell (the agent's chat) and send ``prompt`` from its box; the chat's selector."""
    run_cell(lab, 0, 60_000)
    chat = f"{nb} .nba-chat"
    lab.wait_for_selector(chat)
    lab.fill(f"{chat} .nba-input", prompt)
    lab.press(f"{chat} .nba-input", "Enter")
    return chat


def test_an_mcp_card_names_its_server_waits_for_approval_and_shows_the_image(lab, notebook):
    chat = send_from_first_cell(lab, notebook("mcp.ipynb"), "Please show me red_square")
    card = f"{chat} .nba-tool[data-status='waiting']"
    lab.wait_for_selector(card, timeout=90_000)  # the server starts at this first turn
    assert lab.text_content(f"{card} .nba-tool-name") == "red_square"
    assert lab.text_content(f"{card} .nba-tool-server") == "MCP · nbagent-test"
    assert lab.locator(f"{chat} .nba-tool-image").count() == 0  # nothing ran before the approval
    lab.click(f"{card} .nba-approve")
    lab.wait_for_selector(f"{chat} .nba-tool[data-status='done'] img.nba-tool-image")
    src = lab.get_attribute(f"{chat} .nba-tool-image", "src")
    assert src.startswith("data:image/png;base64,iVBOR")
    errs = [e for e in lab.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errs, errs
    # the kernel's shutdown stops the server
    assert server_processes()
    lab.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.shutdown(); }")
    for _ in range(600):
        if not server_processes():
            break
        time.sleep(0.05)
    assert server_processes() == []


def test_a_server_that_fails_to_start_is_said_in_the_turn_before_the_answer(lab, notebook):
    """#31.17: the notice naming the server and its exit status stands above the answer, and no
    error card follows the answer (it used to: the turn's one error card, at its end)."""
    chat = send_from_first_cell(lab, notebook("mcp_broken.ipynb"), "hello")
    notice = f"{chat} .nba-system-notice.nba-system-error"
    lab.wait_for_selector(notice, timeout=90_000)
    text = lab.text_content(notice)
    assert "are not available in this turn" in text and "the server exited with status 3" in text
    lab.wait_for_selector(f"{chat} .nba-turn .nba-md", timeout=90_000)  # the demo model's answer
    lab.wait_for_function(f"() => document.querySelector({chat + ' .nba-footer'!r})?.textContent.trim() !== ''"
                          f" && !document.querySelector({chat!r}).closest('.nba-is-running')"
                          f" && !document.querySelector({chat!r}).querySelector('.nba-is-running')",
                          timeout=90_000)  # the turn ended (its footer written, nothing running)
    before = lab.evaluate(f"""() => {{ const chat = document.querySelector({chat!r});
        const n = chat.querySelector('.nba-system-notice'), md = chat.querySelector('.nba-turn .nba-md');
        return !!(n.compareDocumentPosition(md) & Node.DOCUMENT_POSITION_FOLLOWING); }}""")
    assert before  # the notice comes first
    assert lab.locator(f"{chat} .nba-error").count() == 0
