"""Pytest fixtures shared by several test modules (helpers live in tests/support/)."""

from __future__ import annotations

import signal

import pytest

from support import tiers
from support.fault_server import FaultServer

# jupyter_server, lab, notebook, nb7_server, nb7: the browser tests' shared fixtures
pytest_plugins = ["support.browser_fixtures"]


def pytest_collection_modifyitems(items):
    """A test of a slow tier gets that tier's time limit (the longest of its tiers) unless it sets its own."""
    for item in items:
        limits = [tiers.SLOW_TIERS[m.name] for m in item.iter_markers() if m.name in tiers.SLOW_TIERS]
        if limits and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(max(limits)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    tiers.current = {m.name for m in item.iter_markers()}


@pytest.fixture(autouse=True)
def only_local_model_tests_start_llama_cpp(request, monkeypatch):
    """In a test not marked local_model, starting the real llama.cpp server fails the test."""
    if request.node.get_closest_marker("local_model") is None:
        from nbagent.providers import local_server

        def refuse(spec):
            tiers.require("local_model", "starts the real llama.cpp server")

        monkeypatch.setattr(local_server, "start_server", refuse)


@pytest.fixture
def fault_server():
    """A started FaultServer, stopped after the test."""
    with FaultServer() as server:
        yield server


@pytest.fixture
def ctrl_c():
    """SIGINT raises KeyboardInterrupt for the test's duration, as in an interactive Python, even when
    the test command was started with SIGINT ignored (``nohup``, ``cmd &`` in a script), where a test
    sending itself a Ctrl-C would otherwise wait for a signal that never comes."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
