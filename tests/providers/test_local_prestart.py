"""The local model's server starts when the chat is shown, and never outlives its owner (real llama.cpp
server with SmolLM2-135M; ``local_model`` tier). Also: the real SmolLM2 file's chat template, read from
the GGUF, agrees with llama.cpp's own verdict that it takes no tools."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from nbagent.providers.local import INSTALL_COMMAND, LocalProvider, local_runtime_available, running_servers
from nbagent.providers.local_server import wait_answering

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.local_model,
              pytest.mark.skipif(not local_runtime_available(), reason=f"needs the local model: {INSTALL_COMMAND}")]


def server_of(n_ctx: int) -> dict | None:
    return next((s for s in running_servers() if s["n_ctx"] == n_ctx), None)


def wait_for(predicate, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


def gone(pid: int, timeout: float = 10.0) -> bool:
    def dead() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        return state in ("Z", "X")
    return bool(wait_for(dead, timeout))


def test_a_shown_chat_starts_the_server_before_the_first_prompt():
    pytest.importorskip("anywidget")
    from nbagent import Agent

    agent = Agent(model="local", n_ctx=896, temperature=0, max_tokens=8)  # a server of its own size
    assert server_of(896) is None
    agent.widget()  # what displaying the agent does
    up = wait_for(lambda: (s := server_of(896)) and s["alive"] and s)
    assert up, "showing the chat did not start the server"
    try:
        reply = asyncio.run(agent.chat_to_completion("Say hello."))
        assert reply.text.strip()
        after = server_of(896)
        assert after["pid"] == up["pid"] and after["starts"] == 1  # the prompt used the started server
    finally:
        asyncio.run(agent.aclose())
    assert gone(up["pid"])


def test_a_prestarted_server_of_an_agent_never_used_stops_with_it():
    provider = LocalProvider(n_ctx=832)
    provider.prestart()
    up = wait_for(lambda: (s := server_of(832)) and s["alive"] and s)
    assert up
    started = provider._prestart
    assert started is not None
    started.result(timeout=60)  # the background start is over: only the lease holds the server
    del provider
    gc.collect()  # the lease goes with the provider
    assert gone(up["pid"]), "the server outlived the agent that never used it"
    assert server_of(832) is None


def test_a_prestarted_server_dies_with_its_killed_owner():
    script = textwrap.dedent(
        """
        import time
        from nbagent.providers.local import LocalProvider, running_servers
        provider = LocalProvider(n_ctx=704)
        provider.prestart()  # never used: no prompt, no start() awaited
        while not any(s["alive"] for s in running_servers()):
            time.sleep(0.05)
        print(running_servers()[0]["pid"], flush=True)
        time.sleep(120)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = owner.stdout.readline()
        assert line.strip().isdigit(), f"owner printed {line!r}"
        pid = int(line)
        assert not gone(pid, 0.5)
        owner.kill()  # SIGKILL: no atexit, no finalizer
        owner.wait(5)
        assert gone(pid), "the prestarted server outlived its killed owner"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_smollm2_template_takes_no_tools_as_llama_cpp_says_and_the_agent_warns():
    from nbagent import Agent

    provider = LocalProvider(n_ctx=960)
    try:
        asyncio.run(provider.start())
        url = provider.base_url.rsplit("/v1", 1)[0]
        props = httpx.get(f"{url}/props", timeout=10, trust_env=False).json()
        assert props["chat_template_caps"]["supports_tools"] is False
        assert provider.takes_tools is False  # read from the GGUF, no server asked
        assert wait_answering(provider._server, 5.0)
    finally:
        asyncio.run(provider.aclose())

    def describe(name: str) -> str:
        """Describe a variable."""
        return name

    with pytest.warns(RuntimeWarning, match="cannot call tools"):
        agent = Agent(model="local", tools=[describe])
    assert "demo" in agent.tools_notice
