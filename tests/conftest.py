"""Pytest fixtures shared by several test modules (helpers live in tests/support/)."""

from __future__ import annotations

import pytest

from support.fault_server import FaultServer


@pytest.fixture
def fault_server():
    """A started FaultServer, stopped after the test."""
    with FaultServer() as server:
        yield server
