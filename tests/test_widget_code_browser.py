"""The agent's code in the notebook, in a real browser: JupyterLab 4 (the flow is in
support/code_flow.py; tests/test_widget_code_notebook7.py runs it in Notebook 7).

Run:  .venv/bin/python -m pytest -q tests/test_widget_code_browser.py
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
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

from support.code_flow import CELLS, NOTEBOOK, code_flow  # noqa: E402


NOTEBOOKS = {NOTEBOOK: CELLS}  # the lab and notebook fixtures: support/browser_fixtures.py


def test_run_python_card_in_jupyterlab(lab, notebook, tmp_path):
    code_flow(lab, notebook(NOTEBOOK), tmp_path, "lab")
