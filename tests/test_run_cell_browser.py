"""Issue 43 item 2 in a real browser (JupyterLab 4 and Notebook 7) with the offline demo model:
"fix the error in the cell above" ends with the fixed cell *run in the notebook*, as the user would
run it: its old KeyError replaced by the new value, a higher execution count, in the page and in the
saved file; the run_cell card shows the code it is about to run, and its result is the cell's outputs;
Undo on the edit's card then takes the source, the provenance badge and the agent's record away.

The widget alone (the extension disabled, as where the front end has none) runs the real cell the same way.

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_run_cell_browser.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.jupyter import SALES_CELL, lab_on_notebook, lab_page, lab_with_notebooks, notebook7_page_on
from support.jupyter import notebook7_with_notebooks, open_notebook, require_lab_browser, require_notebook7, run_cell

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
require_lab_browser()

from playwright.sync_api import expect  # noqa: E402

NOTEBOOK = "run.ipynb"
BROKEN = 'total = sales["revnue"].sum()\ntotal'
FIXED = 'total = sales["revenue"].sum()'
CELLS = [SALES_CELL,
         BROKEN,
         "from nbagent import Agent\nagent = Agent(model='demo', notebook=True)\nagent"]
LONG = 120_000
MODEL = "window.jupyterapp.shell.currentWidget.content.model"


@pytest.fixture
def lab(tmp_path_factory, request):
    with lab_on_notebook(tmp_path_factory, request, {NOTEBOOK: CELLS}, NOTEBOOK) as opened:
        yield opened


@pytest.fixture
def nb7(tmp_path_factory, request):
    require_notebook7()
    with notebook7_with_notebooks(tmp_path_factory, request, {NOTEBOOK: CELLS}) as srv, \
            notebook7_page_on(srv, NOTEBOOK) as page:
        yield page, srv["root"], ".jp-NotebookPanel"


def count(page, index: int):
    return page.evaluate(f"(i) => {MODEL}.cells.get(i).executionCount", index)


def run_flow(page, root: Path, nb: str) -> None:
    expect.set_options(timeout=LONG)
    try:
        for i in range(len(CELLS)):  # one by one: Run All would stop at the error
            run_cell(page, i)
        broken = page.locator(f"{nb} .jp-Cell").nth(1)
        expect(broken.locator(".jp-OutputArea")).to_contain_text("KeyError")
        before = count(page, 1)
        chat = f"{nb} .nba-chat"
        box = page.locator(f"{chat} .nba-input")
        box.click()
        box.press_sequentially("fix the error in the cell above")
        box.press("Enter")
        card = lambda name: page.locator(f"{chat} .nba-tool").filter(  # noqa: E731
            has=page.locator(".nba-tool-name", has_text=name))
        expect(card("edit_cell")).to_have_attribute("data-status", "waiting")
        card("edit_cell").locator(".nba-approve").click()

        run = card("run_cell")
        expect(run).to_have_attribute("data-status", "waiting")
        expect(run.locator(".nba-diff-head")).to_contain_text("runs cell")  # not "+0 −0"
        expect(run.locator(".nba-diff")).to_contain_text(FIXED)  # the code that will run
        run.locator(".nba-approve").click()
        expect(run).to_have_attribute("data-status", "done")

        # the notebook's own cell ran: its output in place, a higher execution count
        expect(broken.locator(".jp-OutputArea")).to_contain_text("255")
        expect(broken.locator(".jp-OutputArea")).not_to_contain_text("KeyError")
        after = count(page, 1)
        assert isinstance(after, int) and after > before, (before, after)
        expect(broken.locator(".jp-InputPrompt")).to_contain_text(f"[{after}]")
        expect(run.locator(".nba-tool-out")).to_contain_text("255")  # the tool's result: the cell's outputs
        expect(run.locator(".nba-tool-out")).not_to_contain_text("not updated in this front end")
        expect(page.locator(f"{chat} .nba-md", has_text="Fixed: the cell runs clean now")).to_be_visible()

        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(f"() => !{MODEL}.dirty")
        saved = json.loads((root / NOTEBOOK).read_text())["cells"][1]
        assert saved["source"] == FIXED + "\ntotal" or "".join(saved["source"]) == FIXED + "\ntotal"
        assert saved["execution_count"] == after
        texts = ["".join(o.get("data", {}).get("text/plain", "")) for o in saved["outputs"]]
        assert any("255" in t for t in texts) and not any(o["output_type"] == "error" for o in saved["outputs"]), saved["outputs"]

        # Undo on the edit's card: the source, and no badge nor label saying the agent wrote it
        badge = broken.locator(".nba-prov-badge")
        extension = page.evaluate("() => window.jupyterapp.hasPlugin('jupyter-nbagent:provenance')"
                                  " || [...window.jupyterapp.listPlugins()].some(p => p.startsWith('jupyter-nbagent'))")
        if extension:
            expect(badge).to_contain_text("edited by nbagent")
        card("edit_cell").locator(".nba-undo").click()
        page.wait_for_function(f"() => {MODEL}.cells.get(1).sharedModel.getSource().includes('revnue')")
        expect(broken.locator(".nba-prov")).to_have_count(0)
        expect(broken).not_to_have_attribute("data-nba-agent", "written by the agent, turn 1")
        assert "nbagent" not in page.evaluate(f"() => {MODEL}.cells.get(1).sharedModel.getMetadata()")
    finally:
        expect.set_options(timeout=5_000)


@pytest.fixture
def lab_without_extension(tmp_path_factory, request):
    """JupyterLab with nbagent's front-end extension disabled, as `jupyter labextension disable` does: the
    chat widget alone, as in a front end without the extension."""
    config = tmp_path_factory.mktemp("config")
    (config / "labconfig").mkdir()
    (config / "labconfig" / "page_config.json").write_text(json.dumps({"disabledExtensions": {"jupyter-nbagent": True}}))
    with lab_with_notebooks(tmp_path_factory, request, {NOTEBOOK: CELLS}, env={"JUPYTER_CONFIG_DIR": str(config)}) as srv, \
            lab_page(srv) as page:
        yield page, srv["root"], open_notebook(page, NOTEBOOK)


def test_fix_the_error_runs_the_real_cell_in_jupyterlab(lab):
    run_flow(*lab)


def test_fix_the_error_runs_the_real_cell_in_notebook7(nb7):
    run_flow(*nb7)


def test_the_widget_alone_keeps_its_behaviour_with_the_extension_disabled(lab_without_extension):
    page, _, nb = lab_without_extension
    plugins = page.evaluate("() => [...window.jupyterapp.listPlugins()].filter(p => p.startsWith('jupyter-nbagent'))")
    assert plugins == [], plugins  # the extension is really off in this page
    run_flow(*lab_without_extension)  # the widget still runs the real cell and undoes the edit
    expect(page.locator(f"{nb} .nba-ask")).to_have_count(0)  # no Ask nbagent without the extension
