"""The agent's code in the notebook, in a real browser: Jupyter Notebook 7 (the flow is in
support/code_flow.py; tests/test_widget_code_browser.py runs it in JupyterLab).

Run:  .venv/bin/python -m pytest -q tests/test_widget_code_notebook7.py
Env:  CHROMIUM=/usr/bin/chromium   NBAGENT_SHOTS=docs (also write the screenshots there)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, CHROMIUM_ARGS, jupyter_server, nb_json

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("notebook.app", reason="Jupyter Notebook 7 (notebook>=7) is not installed")

from support.code_flow import CELLS, NOTEBOOK, code_flow  # noqa: E402


@pytest.fixture(scope="module")
def nb7(tmp_path_factory, request):
    """One Notebook 7 server and a Chromium page showing NOTEBOOK with an idle kernel."""
    import notebook

    if int(notebook.__version__.split(".")[0]) < 7:
        pytest.skip(f"notebook {notebook.__version__} is not Notebook 7")
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
    code_flow(nb7, ".jp-NotebookPanel", tmp_path, "nb7")
