"""``%%chat`` in real JupyterLab + Chromium: the answer is rendered markdown with its math
typeset, payloads in model text and tool results stay text (outputs made in the session are
*trusted*, so JupyterLab does not sanitise them: the escaping is all there is), and with
``--widget`` the kernel stays free, so the widget's Approve button works during the turn.

Run:  .venv/bin/python -m pytest -q tests/test_magics_browser.py
"""

from __future__ import annotations


import pytest


pytestmark = pytest.mark.browser
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

SETUP = (
    "import sys\n"
    "from support.scripted import ScriptedProvider, text_call, tool_call\n"
    "from nbagent import Agent, tool\n\n"
    "@tool\n"
    "def lookup(query: str) -> str:\n"
    "    '''Look something up.'''\n"
    "    return 'found <img src=x onerror=\"window.__xss=(window.__xss||0)+1\">'\n\n"
    "bot = Agent(model=ScriptedProvider([\n"
    "    tool_call(('c1', 'lookup', {'query': '<svg onload=\"window.__xss=1\">'})),\n"
    "    text_call('Roots: $x_1 = 2$ and $x^2 - 5x + 6 = 0$. <img src=x onerror=\"window.__xss=1\"> '\n"
    "              '[go](javascript:window.__xss=1) `List<int>` end.'),\n"
    "]), tools=[lookup])\n"
    "%load_ext nbagent"
)
APPROVAL = (
    "from nbagent import Agent, tool\n\n"
    "@tool\n"
    "def calculator(expression: str) -> float:\n"
    "    '''Evaluate arithmetic.'''\n"
    "    return 84.0\n\n"
    "asker = Agent(model='demo', tools=[calculator], policy='ask')\n"
    "%load_ext nbagent"
)


# the lab and notebook fixtures: support/browser_fixtures.py
NOTEBOOKS = {
    "chat.ipynb": [SETUP, "%%chat -a bot\nFind it"],
    "approve.ipynb": [APPROVAL, "%%chat -a asker --widget\nWhat is 12 * 7?", "kernel_was_free = True"],
}


def run_all(page, timeout_ms=90_000):
    page.evaluate("() => { window.__run = window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    ok = page.evaluate("""async (t) => await Promise.race([window.__run.then(() => true),
                          new Promise(r => setTimeout(() => r(false), t))])""", timeout_ms)
    assert ok, "Run All did not finish"


def test_chat_answer_renders_math_and_runs_no_payload(lab, notebook):
    nb = notebook("chat.ipynb")
    run_all(lab)
    cell = f"{nb} .jp-Cell >> nth=1"
    md = f"{cell} >> .jp-OutputArea-output.jp-RenderedMarkdown"
    lab.wait_for_selector(md)
    lab.locator(md).locator("mjx-container, .MathJax, math").first.wait_for(timeout=30_000)  # math typeset
    text = lab.inner_text(md)
    for part in ("lookup", "Roots", "end.", "List<int>", "found <img src=x"):
        assert part in text, (part, text)
    assert lab.locator(md).locator("code", has_text="List<int>").count() == 1
    found = lab.locator(md).evaluate("""(el) => {
        return { imgs: el.querySelectorAll('img, svg:not(mjx-container svg)').length,
                 handlers: [...el.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
                 js: [...el.querySelectorAll('a')].filter(a => a.getAttribute('href')?.toLowerCase().startsWith('javascript')).length,
                 xss: window.__xss ?? null }; }""")
    assert found == {"imgs": 0, "handlers": 0, "js": 0, "xss": None}, found
    streams = lab.locator(cell).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']")
    assert streams.count() == 0  # the streamed text gave way to the rendered answer


def test_widget_option_keeps_the_kernel_free_for_approve(lab, notebook):
    nb = notebook("approve.ipynb")
    run_all(lab)  # finishes although the turn waits for approval: the turn runs in the background
    chat = f"{nb} .nba-chat"
    approve = lab.locator(chat).locator("button", has_text="Approve")
    approve.wait_for(timeout=30_000)
    approve.click()
    lab.wait_for_function("""(s) => [...document.querySelectorAll(s + ' .nba-md strong')]
                              .some(e => e.textContent.startsWith('84'))""", arg=chat, timeout=30_000)
    assert lab.locator(f"{nb} .jp-Cell >> nth=2").locator(".jp-InputArea-prompt").inner_text().strip() == "[3]:"
