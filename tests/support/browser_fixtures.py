"""The browser tests' shared fixtures, a pytest plugin (``pytest_plugins`` in tests/conftest.py).

A browser test module names its notebooks in ``NOTEBOOKS`` (file name -> code cells) and asks for:

- ``jupyter_server``: one JupyterLab server for the module whose root holds ``NOTEBOOKS``;
- ``lab``: one Chromium page on it, restored (``page.errors`` collects page errors);
- ``notebook``: ``notebook(path)`` opens a notebook on ``lab`` and waits for an idle kernel; after
  the test its kernel is shut down and its tab closed;
- ``nb7_server`` / ``nb7``: one Notebook 7 server holding ``NOTEBOOKS`` and one page showing the
  first of them (skipped without Notebook 7).

A module with its own server (a copied notebook, other flags) defines its own ``lab``; ``notebook``
then opens notebooks on that one. Built on support/jupyter.py.
"""

from __future__ import annotations

import pytest

from support.jupyter import (lab_page, lab_with_notebooks, notebook7_page_on, notebook7_with_notebooks,
                             notebook_opener, require_notebook7)


def module_notebooks(request) -> dict:
    """The requesting module's ``NOTEBOOKS`` (file name -> code cells)."""
    notebooks = getattr(request.module, "NOTEBOOKS", None)
    if not isinstance(notebooks, dict) or not notebooks:
        raise pytest.UsageError(f"{request.module.__name__} needs NOTEBOOKS (file name -> code cells) "
                                "for the browser fixtures")
    return notebooks


@pytest.fixture(scope="module")
def jupyter_server(tmp_path_factory, request):
    """One JupyterLab server for the module, its root holding the module's ``NOTEBOOKS``."""
    with lab_with_notebooks(tmp_path_factory, request, module_notebooks(request)) as srv:
        yield srv


@pytest.fixture(scope="module")
def lab(jupyter_server):
    """One Chromium page on the module's JupyterLab, restored."""
    with lab_page(jupyter_server) as page:
        yield page


@pytest.fixture
def notebook(lab):
    """``notebook(path)``: open ``path`` on ``lab``; afterwards its kernel is shut down and its tab closed."""
    yield from notebook_opener(lab)


@pytest.fixture(scope="module")
def nb7_server(tmp_path_factory, request):
    """One Notebook 7 server for the module, its root holding the module's ``NOTEBOOKS``."""
    require_notebook7()
    with notebook7_with_notebooks(tmp_path_factory, request, module_notebooks(request)) as srv:
        yield srv


@pytest.fixture(scope="module")
def nb7(nb7_server, request):
    """One Chromium page showing the first of the module's ``NOTEBOOKS`` in Notebook 7, kernel idle."""
    with notebook7_page_on(nb7_server, next(iter(module_notebooks(request)))) as page:
        yield page
