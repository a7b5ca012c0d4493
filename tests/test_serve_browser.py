"""An outside agent on the live notebook in real JupyterLab (Chromium): the official ``mcp`` client,
as Claude Code would, reads the notebook ``nbagent.serve()`` serves, asks to fix the failing cell;
the card in the page names the client and shows the diff; Deny is the client's error and changes
nothing; Approve in the page changes the cell in the open notebook, recorded with the client as author and badged with its name;
the approved ``run_cell`` runs it in the kernel; the card's Undo puts the cell back.

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q -m browser tests/test_serve_browser.py
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from support.jupyter import require_lab_browser, run_cell  # noqa: E402

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
require_lab_browser()

NOTEBOOKS = {
    "served.ipynb": ["import nbagent, pathlib\nx = 1\nserved = nbagent.serve()\n"
                     "pathlib.Path('served.txt').write_text(served.url + '\\n' + str(served.http.token_path))\n"
                     "served",
                     "x = 1",
                     "print(x / 0)"],
}
CLIENT = ("Claude Code", "2.1.7")


async def _session(url: str, token: str, work) -> list:
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)  # a call waits for the person's Approve
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as http:
        info = types.Implementation(name=CLIENT[0], version=CLIENT[1])
        async with Client(streamable_http_client(url, http_client=http), client_info=info, mode="legacy") as c:
            return await work(c)


def _text(result) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def _cell_source(lab, index: int) -> str:
    return lab.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i).sharedModel"
                        ".getSource()", index)


def test_an_outside_agents_fix_waits_for_approve_in_the_page(lab, notebook, jupyter_server):
    nb = notebook("served.ipynb")
    run_cell(lab, 0, 90_000)
    chat = f"{nb} .nba-chat"
    lab.wait_for_selector(chat)
    url, token_file = (Path(jupyter_server["root"]) / "served.txt").read_text().split("\n")
    token = Path(token_file).read_text()

    async def work(c):
        read = await c.call_tool("read_notebook", {})
        cell_id = re.search(r"\[3\] id=(\S+)", _text(read)).group(1)
        denied = await c.call_tool("edit_cell", {"cell_id": cell_id, "source": "print(x / 2)"})
        fixed = await c.call_tool("edit_cell", {"cell_id": cell_id, "source": "print(x / 1)"})
        ran = await c.call_tool("run_cell", {"cell_id": cell_id})
        return read, denied, fixed, ran

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        results = pool.submit(lambda: asyncio.run(_session(url, token, work)))
        card = f"{chat} .nba-tool[data-status='waiting']"
        lab.wait_for_selector(card, timeout=120_000)
        assert lab.text_content(f"{card} .nba-tool-server") == "MCP · Claude Code 2.1.7"
        assert "print(x / 2)" in lab.text_content(card)  # the diff before the decision
        lab.click(f"{card} .nba-deny")
        lab.wait_for_function(f"() => [...document.querySelectorAll({card!r})].some(c => "
                              "c.textContent.includes('print(x / 1)'))", timeout=120_000)
        assert _cell_source(lab, 2) == "print(x / 0)"  # the denied edit changed nothing
        lab.click(f"{card} .nba-approve")
        run_card = f"{chat} .nba-tool[data-status='waiting']:has(.nba-tool-name:text-is('run_cell'))"
        lab.wait_for_selector(run_card, timeout=120_000)
        lab.click(f"{run_card} .nba-approve")
        read, denied, fixed, ran = results.result(timeout=120)
    assert "print(x / 0)" in _text(read)
    assert denied.is_error and not fixed.is_error, _text(fixed)
    assert not ran.is_error and "1.0" in _text(ran), _text(ran)  # ran in the kernel, with its x
    lab.wait_for_function("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(2).sharedModel"
                          ".getSource() === 'print(x / 1)'", timeout=60_000)
    author = lab.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(2)"
                          ".getMetadata('nbagent').actions.at(-1).author")
    assert author == "Claude Code 2.1.7"
    lab.wait_for_function("() => [...document.querySelectorAll('.jp-Cell')].some(c => "
                          "(c.dataset.nbaAgent || '').startsWith('written by Claude Code 2.1.7'))", timeout=60_000)
    lab.locator(f"{chat} .nba-undo:visible").first.click()  # the edit's Undo, in the page
    lab.wait_for_function("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(2).sharedModel"
                          ".getSource() === 'print(x / 0)'", timeout=60_000)
    errs = [e for e in lab.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not errs, errs
