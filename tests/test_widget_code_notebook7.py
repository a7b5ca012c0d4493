"""The agent's code in the notebook, in a real browser: Jupyter Notebook 7 (the flow is in
support/code_flow.py; tests/test_widget_code_browser.py runs it in JupyterLab).

Run:  .venv/bin/python -m pytest -q tests/test_widget_code_notebook7.py
Env:  CHROMIUM=/usr/bin/chromium   NBAGENT_SHOTS=docs (also write the screenshots there)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, notebook7_page

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("notebook.app", reason="Jupyter Notebook 7 (notebook>=7) is not installed")

from support.code_flow import CELLS, NOTEBOOK, code_flow  # noqa: E402


@pytest.fixture(scope="module")
def nb7(tmp_path_factory, request):
    """One Notebook 7 server and a Chromium page showing NOTEBOOK with an idle kernel."""
    import notebook

    if int(notebook.__version__.split(".")[0]) < 7:
        pytest.skip(f"notebook {notebook.__version__} is not Notebook 7")
    with notebook7_page(tmp_path_factory, request, {NOTEBOOK: CELLS}, NOTEBOOK) as page:
        yield page


def test_run_python_card_in_notebook7(nb7, tmp_path):
    code_flow(nb7, ".jp-NotebookPanel", tmp_path, "nb7")
