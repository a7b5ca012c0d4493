"""The run_python card flow of the browser tests in JupyterLab (tests/test_widget_code_browser.py)
and Notebook 7 (tests/test_widget_code_notebook7.py).

A stand-in ``run_python`` tool (approval required; it runs the code in the kernel's namespace)
is called by a scripted model. The waiting card shows the code highlighted with Approve; approving
runs it and its figure shows in the card; *Insert as cell below* puts the code in a new cell under
the widget's cell (with ``window.jupyterapp`` hidden: the widget does not need it); *Copy* puts it
on the clipboard; ``@sa`` in the chat box offers ``sales`` from the kernel.
"""

from __future__ import annotations

from support.jupyter import cell_sources, run_cell, shot

CODE = ("from matplotlib.figure import Figure\n"
        "fig = Figure(figsize=(4, 3))\n"
        "fig.subplots().bar(sales.month, sales.revenue)  # revenue by month\n"
        "fig.suptitle('<img src=x onerror=\"window.__pwned=1\">')  # code is shown as text, never markup\n"
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


def run_first_cell(page, nb):
    run_cell(page, 0)
    page.wait_for_selector(f"{nb} .nba-chat")
    return f"{nb} .nba-chat"


def code_flow(page, nb, tmp_path, label):
    """The whole flow on an open notebook whose first cell shows the agent (see the module doc)."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    chat = run_first_cell(page, nb)
    page.fill(f"{chat} .nba-input", "plot revenue by month")
    page.press(f"{chat} .nba-input", "Enter")
    card = page.locator(f"{chat} .nba-tool[data-status='waiting']")
    card.wait_for()
    # the code, highlighted before it runs (once static/grammars.js arrives: plain until then); Approve / Deny offered
    assert card.locator(".nba-tool-code code").inner_text() == CODE
    card.locator(".nba-tool-code code.hljs:not(.nba-hl-pending)").wait_for()
    assert card.locator(".nba-tool-code .hljs-keyword", has_text="import").count() == 1
    assert card.locator(".nba-tool-code .hljs-comment").all_inner_texts() == ["# revenue by month", "# code is shown as text, never markup"]
    assert card.locator(".nba-tool-args").is_hidden()  # the code is the only argument: no JSON beside it
    assert card.locator(".nba-tool-code img").count() == 0
    assert card.locator(".nba-approve").is_visible() and card.locator(".nba-deny").is_visible()
    shot(page, chat, f"widget-run-python-waiting-{label}.png", tmp_path)
    # Copy
    card.locator(".nba-tool-copy").click()
    page.wait_for_function("async (code) => (await navigator.clipboard.readText()) === code", arg=CODE, polling=100)
    # Insert as cell below, without window.jupyterapp
    before = cell_sources(page)
    assert card.locator(".nba-insert").is_visible()
    page.evaluate("() => { window.__app = window.jupyterapp; delete window.jupyterapp; }")
    try:
        card.locator(".nba-insert").click()
        page.wait_for_function("(n) => window.__app.shell.currentWidget.content.model.cells.length === n",
                               arg=len(before) + 1, polling=50)
    finally:
        page.evaluate("() => { window.jupyterapp = window.__app; }")
    assert cell_sources(page) == [before[0], CODE, *before[1:]]
    assert page.locator(f"{nb} .jp-Cell").nth(1).locator(".cm-content").inner_text() == CODE
    # Approve: the code runs in the kernel and its figure shows in the card
    card.locator(".nba-approve").click()
    done = page.locator(f"{chat} .nba-tool[data-status='done']")
    done.wait_for()
    page.wait_for_function("(s) => !document.querySelector(s).classList.contains('nba-is-running')", arg=chat)
    image = done.locator("img.nba-tool-image")
    assert image.count() == 1
    # an inserted image (a data: URL) loads and decodes after it is in the page: waited for, not read at once
    page.wait_for_function("(i) => i.complete && i.naturalWidth > 100", arg=image.element_handle(), polling=50,
                           timeout=30_000)
    assert done.locator(".nba-tool-code code").inner_text() == CODE  # still shown after it ran
    assert page.locator(f"{chat} .nba-md", has_text="Revenue by month is plotted.").count() == 1
    shot(page, chat, f"widget-run-python-done-{label}.png", tmp_path)
    # @sa offers sales (and salt), picked with the keyboard
    box = page.locator(f"{chat} .nba-input")
    box.fill("")
    box.press_sequentially("how is @sa")
    listbox = page.locator(f"{chat} [role=listbox]")
    listbox.locator("[role=option]").first.wait_for()
    assert listbox.locator("[role=option] .nba-mention-name").all_inner_texts() == ["sales", "salt"]
    assert listbox.locator("[role=option]").first.locator(".nba-mention-type").inner_text() == "DataFrame"
    assert box.get_attribute("aria-activedescendant") == listbox.locator("[role=option]").first.get_attribute("id")
    shot(page, chat, f"widget-mention-{label}.png", tmp_path)
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
    assert page.evaluate("() => window.__pwned") is None
    errors = [e for e in page.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errors, errors
