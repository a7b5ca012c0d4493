"""``nbagent.serve()`` inside a real ipykernel: an outside MCP client (the official SDK) runs code in the
kernel's own namespace through the served tools, and the server goes away when the kernel dies."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("jupyter_client")
pytest.importorskip("mcp")

from support import tiers  # noqa: E402
from support.waiting import wait_for  # noqa: E402

pytestmark = [pytest.mark.notebook, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[1]


def _kernel():
    from jupyter_client.manager import KernelManager

    tiers.require("notebook", "starts a Jupyter kernel")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    km = KernelManager(kernel_name="python3")
    km.start_kernel(env=env)
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    return km, kc


def _run(kc, code: str) -> str:
    out: list[str] = []

    def hook(msg: dict) -> None:
        if msg["header"]["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["header"]["msg_type"] == "error":
            out.append("\n".join(msg["content"]["traceback"]))

    kc.execute_interactive(code, output_hook=hook, timeout=120)
    return "".join(out)


async def _calls(url: str, token: str, steps: list[tuple[str, dict]]) -> list:
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)  # a call may wait for the person's Approve
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as http:
        info = types.Implementation(name="codex-mcp-client", version="0.60.1")
        async with Client(streamable_http_client(url, http_client=http), client_info=info, mode="legacy") as c:
            return [await c.call_tool(name, args) for name, args in steps]


def _text(result) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def test_an_outside_client_runs_code_in_the_kernels_namespace_and_the_server_dies_with_the_kernel(tmp_path):
    import httpx

    path = tmp_path / "work.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 41")]
    nb.cells[0].id = "setx"
    nbformat.write(nb, str(path))
    km, kc = _kernel()
    try:
        out = _run(kc, f"import nbagent\nserved = nbagent.serve({str(path)!r}, approve_code=False)\n"
                       "print(served.url, served.http.token_path)")
        url, token_file = re.search(r"(http://127\.0\.0\.1:\d+/mcp) (\S+)", out).groups()
        token = Path(token_file).read_text()
        ran, added = asyncio.run(_calls(url, token, [("run_cell", {"cell_id": "setx"}),
                                                      ("run_python", {"code": "x + 1"})]))
        assert not ran.is_error and "42" in _text(added), _text(added)
        assert "41" in _run(kc, "print(x)")  # the kernel's own variable
        assert "codex-mcp-client 0.60.1" in _run(kc, "print(served.agent.model)")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)  # killed: no atexit runs

    def refused() -> bool:
        try:
            httpx.post(url, json={}, timeout=5)
        except httpx.ConnectError:
            return True
        return False

    wait_for(refused, "the port closed with the kernel")
