"""The agent works in the notebook (issue 20's "done when"), in a real browser, in JupyterLab 4 and
in Notebook 7, with the real notebook tools and the offline demo model: ask about ``@sales``,
approve the code, see the figure in the card, and get the code into a cell with *Insert as cell
below* and with ``%chat_code``. The flow is in support/agent_flow.py.

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_notebook_agent_browser.py
Env:  CHROMIUM=/usr/bin/chromium   NBAGENT_SHOTS=docs/images (also write the screenshots there)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, lab_page, lab_with_notebooks, notebook7_page, open_notebook, require_notebook7

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
pytest.importorskip("matplotlib", reason="the figure needs matplotlib")

from support.agent_flow import CELLS, NOTEBOOK, agent_flow  # noqa: E402


# One server and browser per test (each test has its own; two Playwright instances cannot be alive at once).
@pytest.fixture
def lab(tmp_path_factory, request):
    with lab_with_notebooks(tmp_path_factory, request, {NOTEBOOK: CELLS}) as srv, lab_page(srv) as page:
        yield page


@pytest.fixture
def nb7(tmp_path_factory, request):
    require_notebook7()
    with notebook7_page(tmp_path_factory, request, {NOTEBOOK: CELLS}, NOTEBOOK) as page:
        yield page


def test_agent_in_jupyterlab(lab, tmp_path):
    agent_flow(lab, open_notebook(lab, NOTEBOOK), tmp_path, "lab")


def test_agent_in_notebook7(nb7, tmp_path):
    agent_flow(nb7, ".jp-NotebookPanel", tmp_path, "nb7")
