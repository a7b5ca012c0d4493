"""The live notebook backend in a real browser, JupyterLab 4 and Notebook 7 (the flow is in
support/live_flow.py), and Run All twice on the demo notebook (notebooks/data_analysis.ipynb):
one copy of the agent's code, run at most once without a decision.

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_live_notebook_browser.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.jupyter import (CHROMIUM, lab_page, lab_with_notebooks, notebook7_page_on, notebook7_with_notebooks,
                             open_notebook, require_notebook7, wait_restored)

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

from playwright.sync_api import expect  # noqa: E402

from support.live_flow import CELLS, NOTEBOOK, cell, live_flow, reopened_keeps_provenance  # noqa: E402

DEMO = Path(__file__).parent.parent / "notebooks" / "data_analysis.ipynb"


def test_live_notebook_in_jupyterlab(tmp_path_factory, request):
    with lab_with_notebooks(tmp_path_factory, request, {NOTEBOOK: CELLS}) as srv, lab_page(srv) as page:
        nb = open_notebook(page, NOTEBOOK)
        live_flow(page, nb, srv["root"], "lab")
        page.evaluate("""async (path) => { for (const w of [...window.jupyterapp.shell.widgets('main')])
            if (w.context && w.context.path === path) w.dispose(); }""", NOTEBOOK)  # closed (saved)
        reopened_keeps_provenance(page, open_notebook(page, NOTEBOOK), srv["root"])


def test_live_notebook_in_notebook7(tmp_path_factory, request):
    require_notebook7()
    with notebook7_with_notebooks(tmp_path_factory, request, {NOTEBOOK: CELLS}) as srv, \
            notebook7_page_on(srv, NOTEBOOK) as page:
        live_flow(page, ".jp-NotebookPanel", srv["root"], "nb7")
        page.goto(f"{srv['base']}/tree?token={srv['token']}")  # closed (saved), then opened again
        page.goto(f"{srv['base']}/notebooks/{NOTEBOOK}?token={srv['token']}")
        wait_restored(page)
        page.wait_for_function("""() => { const w = window.jupyterapp.shell.currentWidget;
            return w && w.sessionContext?.session?.kernel?.status === 'idle'; }""", polling=50)
        reopened_keeps_provenance(page, ".jp-NotebookPanel", srv["root"])


def run_all(page) -> None:
    ok = page.evaluate("""async () => await Promise.race([
        window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true),
        new Promise(r => setTimeout(() => r(false), 300000))])""")
    assert ok is not None


def sources(page) -> list[str]:
    return page.evaluate("""() => { const m = window.jupyterapp.shell.currentWidget.content.model;
        return Array.from({length: m.cells.length}, (_, i) => m.cells.get(i).sharedModel.getSource()); }""")


def run_all_twice(page, nb) -> None:
    before = sources(page)
    magic = before.index("%chat_code -a agent")
    run_all(page)
    expect(cell(page, nb, magic).locator(".jp-OutputArea-output")).to_contain_text(
        "this cell now holds 1 piece of code the agent ran (turn 1)", timeout=120_000)
    page.wait_for_function("(i) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i)"
                           ".sharedModel.getSource().startsWith('%%chat_run')", arg=magic, timeout=60_000)
    after = sources(page)
    assert len(after) == len(before)  # replaced, not added
    assert after[magic].split("\n", 1)[1].startswith("# run by the agent (turn 1, call_demo_5)\nby_month = sales.groupby(")
    run_all(page)
    out = cell(page, nb, magic).locator(".jp-OutputArea-output")
    expect(out).to_contain_text("⏸ not run: code the agent ran in turn 1 (call_demo_5)", timeout=120_000)
    again = sources(page)
    assert len(again) == len(before) and sum(s.startswith("%%chat_run") for s in again) == 1
    assert "by_month = sales.groupby(" not in "".join(s for i, s in enumerate(again) if i != magic)  # one copy
    expect(cell(page, nb, magic + 1).locator(".jp-OutputArea-output")).to_contain_text("call_demo_5 turn 0 ok")


def test_run_all_twice_on_the_demo_notebook_in_jupyterlab(tmp_path_factory, request):
    pytest.importorskip("matplotlib", reason="the demo notebook plots")
    with lab_with_notebooks(tmp_path_factory, request, {"empty.ipynb": ["1"]}) as srv, lab_page(srv) as page:
        shutil.copy(DEMO, srv["root"] / "data_analysis.ipynb")
        nb = open_notebook(page, "data_analysis.ipynb")
        run_all_twice(page, nb)


def test_run_all_twice_on_the_demo_notebook_in_notebook7(tmp_path_factory, request):
    require_notebook7()
    pytest.importorskip("matplotlib", reason="the demo notebook plots")
    with notebook7_with_notebooks(tmp_path_factory, request, {"empty.ipynb": ["1"]}) as srv:
        shutil.copy(DEMO, srv["root"] / "data_analysis.ipynb")
        with notebook7_page_on(srv, "data_analysis.ipynb") as page:
            run_all_twice(page, ".jp-NotebookPanel")
