"""Issue 43 item 5 in real JupyterLab: a turn asked from a cell that blocks (``conv.ask()``) while the
notebook is open in the page. The page cannot answer the busy kernel, so the edit the demo model
proposes is refused with "the live notebook cannot be reached now" and nothing is written: neither
the file behind the open editor nor the page's cell changes (the edit used to go to the file, and
JupyterLab then warned that the file changed on disk).

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_blocking_edit_browser.py
"""

from __future__ import annotations

import pytest

from support.jupyter import SALES_CELL, lab_on_notebook, require_lab_browser, run_cell

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
require_lab_browser()

from playwright.sync_api import expect  # noqa: E402

NOTEBOOK = "blocking.ipynb"
BROKEN = 'total = sales["revnue"].sum()'
CELLS = [SALES_CELL,
         BROKEN,
         "from nbagent import Agent, notebook_tools\n"
         "agent = Agent(model='demo', tools=notebook_tools(approve_code=False))\nagent",
         "agent.conversation.ask('fix the error in the cell above')\n"
         "said = ' '.join(str(s.content) for s in agent.conversation.history)\n"
         "print('UNREACHABLE' if 'cannot be reached now' in said and 'Nothing was written' in said else said[-2000:])"]


@pytest.fixture
def lab(tmp_path_factory, request):
    with lab_on_notebook(tmp_path_factory, request, {NOTEBOOK: CELLS}, NOTEBOOK) as opened:
        yield opened


def test_an_edit_from_a_blocking_cell_never_lands_behind_the_open_editor(lab):
    page, root, nb = lab
    expect.set_options(timeout=120_000)
    try:
        for i in range(3):
            run_cell(page, i)
        expect(page.locator(f"{nb} .nba-chat")).to_be_visible()  # the page reported its live notebook
        before = (root / NOTEBOOK).read_bytes()
        run_cell(page, 3)  # blocks while the turn runs
        expect(page.locator(f"{nb} .jp-Cell").nth(3).locator(".jp-OutputArea")).to_contain_text("UNREACHABLE")
        assert (root / NOTEBOOK).read_bytes() == before  # nothing written behind the editor
        assert page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1)"
                             ".sharedModel.getSource()") == BROKEN
    finally:
        expect.set_options(timeout=5_000)
