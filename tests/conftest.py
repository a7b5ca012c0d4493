"""Pytest fixtures shared by several test modules (helpers live in tests/support/)."""

from __future__ import annotations

import pytest

from support.fault_server import FaultServer

# jupyter_server, lab, notebook, nb7_server, nb7: the browser tests' shared fixtures
pytest_plugins = ["support.browser_fixtures"]


@pytest.fixture
def fault_server():
    """A started FaultServer, stopped after the test."""
    with FaultServer() as server:
        yield server
