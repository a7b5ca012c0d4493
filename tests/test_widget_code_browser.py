"""The agent's code in the notebook, in a real browser (JupyterLab 4 and Notebook 7).

A stand-in ``run_python`` tool (approval required; it runs the code in the kernel's namespace)
is called by a scripted model. The waiting card shows the code highlighted with Approve; approving
runs it and its figure shows in the card; *Insert as cell below* puts the code in a new cell under
the widget's cell (with ``window.jupyterapp`` hidden: the widget does not need it); *Copy* puts it
on the clipboard; ``@sa`` in the chat box offers ``sales`` from the kernel.

Run:  .venv/bin/python -m pytest -q tests/test_widget_code_browser.py
Env:  CHROMIUM=/usr/bin/chromium   NBAGENT_SHOTS=docs (also write the screenshots there)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.jupyter import (CHROMIUM, CHROMIUM_ARGS, ROOT, jupyter_server, lab_page, lab_with_notebooks,
                             nb_json, notebook_opener)

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

CODE = ("from matplotlib.figure import Figure\n"
        "fig = Figure(figsize=(4, 3))\n"
        "fig.subplots().bar(sales.month, sales.revenue)  # revenue by month\n"
        "result = fig")
AGENT_CELL = (
    "import pandas as pd\n"
    "from IPython import get_ipython\n"
    "from nbagent import Agent, tool\n"
    "from support.scripted import ScriptedProvider, text_call, tool_call\n"
    "sales = pd.DataFrame({'month': ['jan', 'feb', 'mar'], 'revenue': [3, 5, 4]})\n"
    "salt = 1\n"
    "@tool(requires_approval=True)\n"
    "def run_python(code: str) -> object:\n"
    "    \"\"\"Run Python code in the notebook's namespace (a stand-in for nbagent's notebook tools).\"\"\"\n"
    "    ns = get_ipython().user_ns\n"
    "    exec(code, ns)\n"
    "    return ns.get('result')\n"
    f"CODE = {CODE!r}\n"
    "agent = Agent(model=ScriptedProvider([tool_call(('c1', 'run_python', {'code': CODE})),"
    " text_call('Revenue by month is plotted.')]), tools=[run_python])\n"
    "agent"
)
NOTEBOOK = "code.ipynb"
CELLS = [AGENT_CELL, "print('the cell after the chat')"]


def _shot(page, chat, name, tmp_path):
    target = os.environ.get("NBAGENT_SHOTS")
    page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'center'})", chat)
    page.wait_for_timeout(300)
    path = (ROOT / target / name) if target else tmp_path / name
    page.locator(chat).screenshot(path=str(path))
    return path


def _sources(page):
    """The notebook's cell sources as the current panel's model holds them (test-side only)."""
    return page.evaluate("""() => { const m = window.jupyterapp.shell.currentWidget.content.model;
        return Array.from({length: m.cells.length}, (_, i) => m.cells.get(i).sharedModel.getSource()); }""")


def _run_first_cell(page, nb):
    ok = page.evaluate("""async (t) => { const app = window.jupyterapp, w = app.shell.currentWidget;
        w.content.activeCellIndex = 0; w.content.deselectAll();
        return await Promise.race([app.commands.execute('notebook:run-cell').then(() => true),
                                   new Promise(r => setTimeout(() => r(false), t))]); }""", 60_000)
    assert ok, "the cell did not finish executing"
    page.wait_for_selector(f"{nb} .nba-chat")
    return f"{nb} .nba-chat"


def _code_flow(page, nb, tmp_path, label):
    """The whole flow on an open notebook whose first cell shows the agent (see the module doc)."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    chat = _run_first_cell(page, nb)
    page.fill(f"{chat} .nba-input", "plot revenue by month")
    page.press(f"{chat} .nba-input", "Enter")
    card = page.locator(f"{chat} .nba-tool[data-status='waiting']")
    card.wait_for()
    # the code, highlighted, before it runs; Approve / Deny offered
    assert card.locator(".nba-tool-code code").inner_text() == CODE
    assert card.locator(".nba-tool-code .hljs-keyword", has_text="import").count() == 1
    assert card.locator(".nba-tool-code .hljs-comment").inner_text() == "# revenue by month"
    assert card.locator(".nba-tool-args").is_hidden()  # the code is the only argument: no JSON beside it
    assert card.locator(".nba-approve").is_visible() and card.locator(".nba-deny").is_visible()
    _shot(page, chat, f"widget-run-python-waiting-{label}.png", tmp_path)
    # Copy
    card.locator(".nba-tool-copy").click()
    page.wait_for_function("(s) => document.querySelector(s).textContent === 'Copied'",
                           arg=f"{chat} .nba-tool .nba-tool-copy")
    assert page.evaluate("() => navigator.clipboard.readText()") == CODE
    # Insert as cell below, without window.jupyterapp
    before = _sources(page)
    assert card.locator(".nba-insert").is_visible()
    page.evaluate("() => { window.__app = window.jupyterapp; delete window.jupyterapp; }")
    try:
        card.locator(".nba-insert").click()
        page.wait_for_function("(s) => document.querySelector(s).textContent === 'Inserted'",
                               arg=f"{chat} .nba-tool .nba-insert")
    finally:
        page.evaluate("() => { window.jupyterapp = window.__app; }")
    assert _sources(page) == [before[0], CODE, *before[1:]]
    assert page.locator(f"{nb} .jp-Cell").nth(1).locator(".cm-content").inner_text() == CODE
    # Approve: the code runs in the kernel and its figure shows in the card
    card.locator(".nba-approve").click()
    done = page.locator(f"{chat} .nba-tool[data-status='done']")
    done.wait_for()
    page.wait_for_function("(s) => !document.querySelector(s).classList.contains('nba-is-running')", arg=chat)
    image = done.locator("img.nba-tool-image")
    assert image.count() == 1 and image.evaluate("i => i.complete && i.naturalWidth > 100")
    assert done.locator(".nba-tool-code code").inner_text() == CODE  # still shown after it ran
    assert page.locator(f"{chat} .nba-md", has_text="Revenue by month is plotted.").count() == 1
    _shot(page, chat, f"widget-run-python-done-{label}.png", tmp_path)
    # @sa offers sales (and salt), picked with the keyboard
    box = page.locator(f"{chat} .nba-input")
    box.fill("")
    box.press_sequentially("how is @sa")
    listbox = page.locator(f"{chat} [role=listbox]")
    listbox.locator("[role=option]").first.wait_for()
    assert listbox.locator("[role=option] .nba-mention-name").all_inner_texts() == ["sales", "salt"]
    assert listbox.locator("[role=option]").first.locator(".nba-mention-type").inner_text() == "DataFrame"
    assert box.get_attribute("aria-activedescendant") == listbox.locator("[role=option]").first.get_attribute("id")
    _shot(page, chat, f"widget-mention-{label}.png", tmp_path)
    box.press("ArrowDown")
    assert listbox.locator("[aria-selected=true] .nba-mention-name").inner_text() == "salt"
    box.press("ArrowUp")
    box.press("Enter")  # picks, does not send
    assert box.input_value() == "how is @sales " and listbox.is_hidden()
    assert page.locator(f"{chat} .nba-turn").count() == 1
    box.press_sequentially("vs @s")
    listbox.locator("[role=option]").first.wait_for()
    box.press("Escape")  # closes the list, stays in the box
    assert listbox.is_hidden() and box.evaluate("b => b === document.activeElement")
    assert box.input_value() == "how is @sales vs @s"
    errors = [e for e in page.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errors, errors


# --- JupyterLab ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lab_server(tmp_path_factory, request):
    with lab_with_notebooks(tmp_path_factory, request, {NOTEBOOK: CELLS}) as srv:
        yield srv


@pytest.fixture(scope="module")
def lab(lab_server):
    with lab_page(lab_server) as page:
        yield page


@pytest.fixture
def notebook(lab):
    yield from notebook_opener(lab)


def test_run_python_card_in_jupyterlab(lab, notebook, tmp_path):
    _code_flow(lab, notebook(NOTEBOOK), tmp_path, "lab")


# --- Notebook 7 ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def nb7(tmp_path_factory, request):
    import notebook as notebook_package

    if int(notebook_package.__version__.split(".")[0]) < 7:
        pytest.skip(f"notebook {notebook_package.__version__} is not Notebook 7")
    tmp = tmp_path_factory.mktemp("nb7code")
    root = tmp / "root"
    root.mkdir()
    (root / NOTEBOOK).write_text(json.dumps(nb_json(CELLS)))
    args = ["--JupyterNotebookApp.expose_app_in_browser=True", "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly"]
    with jupyter_server("notebook", tmp, root, args, show_log_on_error=lambda: request.session.testsfailed) as srv:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_context(viewport={"width": 1100, "height": 900}).new_page()
                page.set_default_timeout(60_000)
                page.errors = []
                page.on("pageerror", lambda e: page.errors.append(str(e)))
                page.goto(f"{srv['base']}/notebooks/{NOTEBOOK}?token={srv['token']}")
                page.wait_for_function("() => window.jupyterapp !== undefined")
                page.evaluate("async () => { await window.jupyterapp.restored; }")
                page.wait_for_function("""(path) => { const w = window.jupyterapp.shell.currentWidget;
                    return w && w.context?.path === path && w.sessionContext?.session?.kernel?.status === 'idle'; }""",
                                       arg=NOTEBOOK, polling=50)
                yield page
            finally:
                browser.close()


def test_run_python_card_in_notebook7(nb7, tmp_path):
    _code_flow(nb7, ".jp-NotebookPanel", tmp_path, "nb7")
