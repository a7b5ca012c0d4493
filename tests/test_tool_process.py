"""``@tool(isolate=True)``: the tool runs in a subprocess that a timeout or Stop really kills."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from multiprocessing import resource_tracker
from pathlib import Path

import pytest

from nbagent import Agent, NbagentError, tool

from support.isolated_tools import fails, spin, whose_pid
from support.scripted import ScriptedProvider, text_call, tool_call


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def child_processes() -> list[int]:
    """The pids of this process's children, zombies included (from /proc)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            children.append(int(stat.parent.name))
    return children


def wait_for_pid(path: Path) -> int:
    for _ in range(3000):  # a spawned interpreter may take a while on a loaded machine
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.01)
    raise AssertionError("the isolated tool never started")


def test_an_isolated_tool_returns_its_value_from_another_process():
    out = asyncio.run(whose_pid.run({"a": 2, "b": 3}))
    assert not out.is_error and out.value["sum"] == 5
    assert out.value["pid"] != os.getpid()
    assert multiprocessing.active_children() == []


def test_an_exception_in_an_isolated_tool_is_a_tool_error():
    out = asyncio.run(fails.run({"reason": "no such row"}))
    assert out.is_error and out.text == "ValueError: no such row"


def test_a_cpu_bound_isolated_tool_is_killed_at_its_timeout(tmp_path):
    pid_file = tmp_path / "pid"
    # the first spawn of a process starts multiprocessing's resource tracker, a child that lives as long as
    # this process: started before counting, so only the tool's own process is looked for (when this test
    # ran first in its pytest-xdist worker, the tracker was counted as a tool process left behind)
    resource_tracker.ensure_running()
    before = child_processes()
    out = asyncio.run(spin.run({"pid_file": str(pid_file)}))
    assert out.is_error and out.text == "tool 'spin' did not finish within 1 s and its process was killed"
    assert child_processes() == before  # killed and reaped, not left spinning
    written = pid_file.read_text() if pid_file.exists() else ""
    if written:  # the child got as far as the loop (a slow start may be killed before, even mid-write)
        assert gone(int(written))
    assert multiprocessing.active_children() == []


def test_stop_kills_an_isolated_tool(tmp_path):
    pid_file = tmp_path / "pid"
    provider = ScriptedProvider([tool_call(("c1", "spin", {"pid_file": str(pid_file)})), text_call("never")])
    agent = Agent(provider, tools=[tool(spin.handler, isolate=True, timeout=600)])
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(resp=agent.ask("spin")))
    thread.start()
    pid = wait_for_pid(pid_file)
    agent.conversation.interrupt()
    thread.join(60)
    assert not thread.is_alive()
    assert result["resp"].finish_reason.value == "INTERRUPTED"
    assert gone(pid)


def module_level(x: int) -> int:
    return x


def test_a_function_a_new_process_cannot_import_is_refused_when_decorated():
    def local(x: int) -> int:
        return x

    for fn, why in ((lambda x: x, "lambda"), (local, "inside another function")):
        with pytest.raises(NbagentError) as info:
            tool(fn, name="echo", isolate=True)
        assert info.value.kind == "config" and why in str(info.value) and "top level of a module" in str(info.value)
    assert tool(module_level, isolate=True).isolate
