"""The agent's code in the notebook, in a real browser: Jupyter Notebook 7 (the flow is in
support/code_flow.py; tests/test_widget_code_browser.py runs it in JupyterLab).

Run:  .venv/bin/python -m pytest -q tests/test_widget_code_notebook7.py
Env:  CHROMIUM=/usr/bin/chromium   NBAGENT_SHOTS=docs/images (also write the screenshots there)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jupyter import CHROMIUM

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("notebook.app", reason="Jupyter Notebook 7 (notebook>=7) is not installed")

from support.code_flow import CELLS, NOTEBOOK, code_flow  # noqa: E402


NOTEBOOKS = {NOTEBOOK: CELLS}  # the nb7 fixture (a page showing NOTEBOOK): support/browser_fixtures.py


def test_run_python_card_in_notebook7(nb7, tmp_path):
    code_flow(nb7, ".jp-NotebookPanel", tmp_path, "nb7")
