"""MCP servers never hang a turn or outlive the kernel (issue 31): ``python`` means the kernel's
interpreter, a server dies with its kernel, a 50 MB result arrives cut, and a backtracking schema
pattern does not stall the loop. Real servers: ``mcp-server-time`` and tests/support/mcp_server.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from nbagent import Agent, StepStatus  # noqa: E402
from support.scripted import ScriptedProvider, text_call, tool_call  # noqa: E402
from support.tool_runs import finished_tool_steps, in_a_thread  # noqa: E402

HERE = Path(__file__).resolve().parent
OWN = [sys.executable, str(HERE / "support" / "mcp_server.py")]
pytestmark = pytest.mark.skipif(
    subprocess.run([sys.executable, "-c", "import mcp_server_time"], capture_output=True).returncode != 0,
    reason="mcp-server-time is not installed")




def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_python_in_a_server_command_is_the_kernels_interpreter(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `python` on PATH at all
    provider = ScriptedProvider([tool_call(("t", "get_current_time", {"timezone": "Europe/Paris"})),
                                 text_call("late")])
    agent = Agent(model=provider, mcp=["python -m mcp_server_time --local-timezone Etc/UTC"])
    try:
        assert agent.ask("time?").text.strip() == "late"
        (step,) = finished_tool_steps(agent.conversation)
        assert step.status == StepStatus.DONE and "Europe/Paris" in step.content
    finally:
        for server in agent.mcp_servers:
            server.close()


KERNEL = textwrap.dedent('''
    import sys, time
    from nbagent import mcp_tools
    server = mcp_tools(sys.argv[1:])
    print(server.call_tool_sync("server_pid", {}).content[0].text, flush=True)
    time.sleep(600)
''')


def test_a_server_dies_with_its_killed_kernel(tmp_path):
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL)
    kernel = subprocess.Popen([sys.executable, str(script), *OWN, "--linger"], stdout=subprocess.PIPE, text=True,
                              cwd=str(HERE))
    try:
        pid = int(kernel.stdout.readline())
        assert not gone(pid)
    finally:
        kernel.send_signal(signal.SIGKILL)  # no atexit, no shutdown: only the parent-death signal is left
        kernel.wait()
    for _ in range(600):  # wait for what is checked: the server process gone
        if gone(pid):
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the MCP server (pid {pid}) outlived its killed kernel")


def test_a_50_mb_result_arrives_cut_within_the_timeout():
    provider = ScriptedProvider([tool_call(("b", "big", {"megabytes": 50})), text_call("seen")])
    agent = Agent(model=provider, mcp=[OWN], tool_timeout=60)
    try:
        assert in_a_thread(lambda: agent.ask("a big one").text.strip()) == "seen"
        (step,) = finished_tool_steps(agent.conversation)
        assert step.status == StepStatus.DONE, step.content
        assert step.content.startswith("xxxx") and len(step.content) < 1_000_000
        sent = provider.requests[1].messages[-1].tool_results[0].content
        assert "characters cut" in sent or "truncated" in sent
    finally:
        for server in agent.mcp_servers:
            server.close()


def test_a_backtracking_pattern_in_a_servers_schema_does_not_stall_the_turn():
    provider = ScriptedProvider([tool_call(("m", "match", {"text": "a" * 60 + "!"}), ("e", "echo", {"text": "hi"})),
                                 text_call("done")])
    agent = Agent(model=provider, mcp=[OWN])
    try:
        assert in_a_thread(lambda: agent.ask("match it").text.strip()) == "done"
        by_id = {s.tool_calls[0].id: s for s in finished_tool_steps(agent.conversation)}
        assert by_id["m"].status == StepStatus.ERROR  # refused, by nbagent or by the server
        assert by_id["e"].status == StepStatus.DONE and by_id["e"].content == "hi"
    finally:
        for server in agent.mcp_servers:
            server.close()
