"""What serving costs: one ``read_notebook`` called by an outside MCP client against the same call made directly.

A 50-cell notebook in file mode. *Direct*: the ``read_notebook`` tool nbagent's own agent gets, awaited in
process. *Served*: the official ``mcp`` SDK's client, over streamable HTTP on loopback with the bearer
token, calling ``nbagent.serve()``'s ``read_notebook`` in one open session: the HTTP round trip, the
SDK on both sides, and the turn the call runs as (approval path, step records, autosave off). Best
of several runs of 20 calls each, in one process; the ratio is served / direct.

Goal: a served call under 50 ms (an agent's own model call takes seconds; the overhead should not show).
Run: .venv/bin/python bench/bench_serve.py     (always exits 0)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from measure import row  # noqa: E402

CELLS = 50
CALLS = 20
REPEAT = 5
GOAL_MS = 50.0


def _notebook(folder: Path) -> Path:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"value_{i} = {i} * 2\nprint(value_{i})") for i in range(CELLS)]
    path = folder / "bench.ipynb"
    nbformat.write(nb, str(path))
    return path


async def _direct_ms(path: Path) -> float:
    import nbagent

    tool = next(t for t in nbagent.notebook_tools({}, notebook=path) if t.name == "read_notebook")
    best = float("inf")
    for _ in range(REPEAT):
        started = time.perf_counter()
        for _ in range(CALLS):
            await tool.handler()
        best = min(best, time.perf_counter() - started)
    return best / CALLS * 1000.0


async def _served_ms(url: str, token: str) -> float:
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)  # a call may wait for the person's Approve
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as http:
        info = types.Implementation(name="bench", version="1")
        async with Client(streamable_http_client(url, http_client=http), client_info=info, mode="legacy") as c:
            await c.call_tool("read_notebook", {})  # warm
            best = float("inf")
            for _ in range(REPEAT):
                started = time.perf_counter()
                for _ in range(CALLS):
                    await c.call_tool("read_notebook", {})
                best = min(best, time.perf_counter() - started)
    return best / CALLS * 1000.0


def rows(quick: bool = False) -> list[dict]:
    import nbagent

    with tempfile.TemporaryDirectory() as tmp:
        path = _notebook(Path(tmp))
        direct = asyncio.run(_direct_ms(path))
        served = nbagent.serve(path, namespace={}, approve_code=False)
        try:
            over = asyncio.run(_served_ms(served.url, served.token))
        finally:
            served.stop()
    ratio = over / direct if direct else float("inf")
    return [row("served read_notebook / direct", ratio, f"served < {GOAL_MS:g} ms", over < GOAL_MS,
                f"{CELLS} cells: served {over:.1f} ms per call, direct {direct:.2f} ms (best of {REPEAT} x {CALLS})")]


def main() -> None:
    for r in rows():
        print(f"{r['measure']}: ratio {r['ratio']:.1f} — {r['detail']} — goal {r['goal']}: "
              f"{'met' if r['met'] else 'NOT met'}")


if __name__ == "__main__":
    main()
