"""Issue 30's "done when", in a real browser (JupyterLab 4 and Notebook 7) with the offline demo
model and the live notebook: a cell raised; the user types "fix the error in the cell above"; the
edit_cell card shows the diff before Approve; approved, the live cell holds the fix; run_cell
(approved too) runs it clean; Undo on the card puts the cell back.

The live notebook is the widget's (``notebook/live_notebook.py``, from the nblive branch): without
it this module is skipped. Its Undo handler must call ``conv.notebook.undo_async`` (a blocking ``conv.undo``
from the kernel's own loop cannot hear the page's answers).

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_fix_the_error_browser.py
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, lab_page, lab_with_notebooks, notebook7_page, open_notebook, require_notebook7
from support.jupyter import run_cell

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
if importlib.util.find_spec("nbagent.notebook.live_notebook") is None:
    pytest.skip("the live notebook backend (notebook/live_notebook.py) is not in this checkout",
                allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402

NOTEBOOK = "fix.ipynb"
BROKEN = 'total = sales["revnue"].sum()'
FIXED = 'total = sales["revenue"].sum()'
CELLS = ["import pandas as pd\nsales = pd.DataFrame({'month': ['Jan', 'Feb'], 'revenue': [120, 135]})",
         BROKEN,
         "from nbagent import Agent\nagent = Agent(model='demo', notebook=True)\nagent"]
LONG = 120_000


@pytest.fixture
def lab(tmp_path_factory, request):
    with lab_with_notebooks(tmp_path_factory, request, {NOTEBOOK: CELLS}) as srv, lab_page(srv) as page:
        yield page


@pytest.fixture
def nb7(tmp_path_factory, request):
    require_notebook7()
    with notebook7_page(tmp_path_factory, request, {NOTEBOOK: CELLS}, NOTEBOOK) as page:
        yield page


def source(page, index: int) -> str:
    return page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i)"
                         ".sharedModel.getSource()", index)


def fix_flow(page, nb: str) -> None:
    expect.set_options(timeout=LONG)
    try:
        for i in range(len(CELLS)):  # one by one: Run All would stop at the error
            run_cell(page, i)
        chat = f"{nb} .nba-chat"
        expect(page.locator(chat)).to_be_visible()
        box = page.locator(f"{chat} .nba-input")
        box.click()
        box.press_sequentially("fix the error in the cell above")
        box.press("Enter")
        edit = page.locator(f"{chat} .nba-tool").filter(has=page.locator(".nba-tool-name", has_text="edit_cell"))
        expect(edit).to_have_attribute("data-status", "waiting")
        expect(edit.locator(".nba-diff")).to_contain_text(BROKEN)  # the diff, before anything changed
        expect(edit.locator(".nba-diff")).to_contain_text(FIXED)
        assert source(page, 1) == BROKEN
        edit.locator(".nba-approve").click()
        run = page.locator(f"{chat} .nba-tool").filter(has=page.locator(".nba-tool-name", has_text="run_cell"))
        expect(run).to_have_attribute("data-status", "waiting")
        assert source(page, 1) == FIXED  # the live cell, not the file
        run.locator(".nba-approve").click()
        expect(page.locator(f"{chat} .nba-md", has_text="Fixed: the cell runs clean now")).to_be_visible()
        edit.locator(".nba-undo").click()
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1)"
                               ".sharedModel.getSource().includes('revnue')")
        assert source(page, 1) == BROKEN
    finally:
        expect.set_options(timeout=5_000)


def test_fix_the_error_in_jupyterlab(lab):
    fix_flow(lab, open_notebook(lab, NOTEBOOK))


def test_fix_the_error_in_notebook7(nb7):
    fix_flow(nb7, ".jp-NotebookPanel")
