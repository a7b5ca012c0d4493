"""``nbagent.serve()``: outside agents work on the notebook through nbagent's tools, approvals,
stale check, undo and provenance. Driven by the official ``mcp`` SDK's client over streamable HTTP
against a real server on loopback, with a real ``.ipynb`` in file mode."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
httpx = pytest.importorskip("httpx")
pytest.importorskip("mcp")

import nbagent  # noqa: E402
from nbagent.core.errors import ConfigError  # noqa: E402

pytestmark = pytest.mark.timeout(90)

CLIENT = ("Claude Code", "2.1.7")


def write_notebook(path: Path, cells: list[tuple[str, str]]) -> Path:
    nb = nbformat.v4.new_notebook()
    for cid, source in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.id = cid
        nb.cells.append(cell)
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    return write_notebook(tmp_path / "analysis.ipynb", [("load", "x = 1"), ("plot", "print(x / 0)")])


@pytest.fixture
def served(notebook: Path, tmp_path: Path):
    server = nbagent.serve(notebook, namespace={}, approve_code=False, save_to=tmp_path / "sessions")
    yield server
    server.stop()


async def _calls(url: str, token: str, steps: list[tuple[str, dict]], client: tuple[str, str] = CLIENT) -> list:
    """Run ``steps`` (tool name, arguments) through one MCP client session; the results in order."""
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    timeout = httpx2.Timeout(30.0, read=300.0)  # a call may wait for the person's Approve
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout) as http:
        info = types.Implementation(name=client[0], version=client[1])
        async with Client(streamable_http_client(url, http_client=http), client_info=info, mode="legacy") as c:
            results: list = [await c.list_tools()]
            for name, args in steps:
                results.append(await c.call_tool(name, args))
            return results


def call(server, steps: list[tuple[str, dict]], client: tuple[str, str] = CLIENT) -> list:
    return asyncio.run(_calls(server.url, server.token, steps, client))


def text(result) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def test_a_client_reads_and_edits_the_notebook_with_the_same_tools_and_schemas(served, notebook: Path):
    listed, read, edited = call(served, [("read_notebook", {}), ("edit_cell", {"cell_id": "plot",
                                                                               "source": "print(x / 1)"})])
    ours = {t.name: t.input_schema for t in nbagent.notebook_tools({}, notebook=notebook)}
    assert {t.name: t.input_schema for t in listed.tools} == ours
    assert "print(x / 0)" in text(read) and "plot" in text(read)
    assert not edited.is_error, text(edited)
    assert nbformat.read(str(notebook), as_version=4).cells[1].source == "print(x / 1)"


def test_a_stale_edit_is_refused_and_nothing_changes(served, notebook: Path):
    def someone_edits():
        nb = nbformat.read(str(notebook), as_version=4)
        nb.cells[1].source = "print('mine')"
        nbformat.write(nb, str(notebook))

    call(served, [("read_notebook", {})])
    someone_edits()
    _, edited = call(served, [("edit_cell", {"cell_id": "plot", "source": "print(x / 1)"})])
    assert edited.is_error
    assert nbformat.read(str(notebook), as_version=4).cells[1].source == "print('mine')"


def test_calls_form_a_conversation_of_the_client_and_provenance_names_it(served, notebook: Path, tmp_path: Path):
    call(served, [("read_notebook", {}), ("edit_cell", {"cell_id": "plot", "source": "print(x / 1)"})])
    conv = served.agent.conversation
    calls = conv.tool_calls_df()
    assert list(calls["name"]) == ["read_notebook", "edit_cell"]
    assert served.agent.model == "mcp:Claude Code 2.1.7"
    actions = nbformat.read(str(notebook), as_version=4).cells[1].metadata["nbagent"]["actions"]
    assert [(a["action"], a["author"]) for a in actions] == [("edited", "Claude Code 2.1.7")]
    frame = nbagent.provenance(notebook)
    assert list(frame["call_id"]) == [conv.tool_calls_df()["call_id"].iloc[-1]]
    if "author" in frame.columns:  # the column the provenance frame reads from each record
        assert list(frame["author"]) == ["Claude Code 2.1.7"]
    saved = list((tmp_path / "sessions").glob("*.json"))
    assert saved, "the outside agent's conversation is autosaved"
    undo_id = conv.tool_calls_df()["call_id"].iloc[-1]
    conv.undo(undo_id)
    assert nbformat.read(str(notebook), as_version=4).cells[1].source == "print(x / 0)"


def test_another_client_gets_a_conversation_of_its_own(served):
    call(served, [("list_variables", {})])
    first = served.agent.conversation
    call(served, [("list_variables", {})], client=("codex-mcp-client", "0.60.1"))
    assert served.agent.conversation is not first
    assert served.agent.model == "mcp:codex-mcp-client 0.60.1"
    assert len(first.tool_calls_df()) == len(served.agent.conversation.tool_calls_df()) == 1


def test_without_a_widget_a_call_needing_approval_fails_at_once(notebook: Path):
    server = nbagent.serve(notebook, namespace={})  # approve_code=True, and no widget shown
    try:
        _, edited = call(server, [("read_notebook", {}), ("edit_cell", {"cell_id": "plot", "source": "1"})])[1:]
    finally:
        server.stop()
    assert edited.is_error and "approval" in text(edited) and "no chat widget" in text(edited)
    assert nbformat.read(str(notebook), as_version=4).cells[1].source == "print(x / 0)"
    assert "denied" in set(server.agent.conversation.approvals_df()["decision"].astype(str))


def test_a_course_without_code_serves_no_code_tools(notebook: Path, tmp_path: Path, monkeypatch):
    (tmp_path / "nbagent.toml").write_text("[policy]\nrun_code = false\n")
    monkeypatch.setenv("NBAGENT_CONFIG", str(tmp_path / "nbagent.toml"))
    with pytest.warns(RuntimeWarning, match="run_code = false"):
        server = nbagent.serve(notebook, namespace={}, approve_code=False)
    try:
        listed, ran = call(server, [("run_python", {"code": "1"})])
    finally:
        server.stop()
    assert {t.name for t in listed.tools} == {"list_variables", "describe_variable", "read_notebook"}
    assert ran.is_error


# --- security ------------------------------------------------------------------------------


def _post(server, headers: dict) -> int:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
    return httpx.post(server.url, json=body, headers=headers, timeout=30).status_code


def test_requests_without_the_token_or_from_a_web_page_are_refused(served):
    assert _post(served, {}) == 401
    assert _post(served, {"Authorization": "Bearer wrong"}) == 401
    assert _post(served, {"Authorization": f"Bearer {served.token}", "Origin": "https://evil.example"}) == 403
    assert _post(served, {"Authorization": f"Bearer {served.token}", "Host": "evil.example"}) == 421
    assert _post(served, {"Authorization": f"Bearer {served.token}"}) == 200


def test_the_token_stays_out_of_reprs_and_saved_files(served, tmp_path: Path):
    call(served, [("read_notebook", {}), ("edit_cell", {"cell_id": "plot", "source": "print(x / 1)"})])
    assert served.token not in repr(served)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert served.token not in path.read_text(errors="replace"), path


def test_loopback_only_one_server_per_kernel_and_stop_frees_the_port(served, notebook: Path):
    from nbagent.loop.mcp_server import require_loopback

    with pytest.raises(ConfigError, match="loopback"):
        require_loopback("0.0.0.0")
    with pytest.raises(ConfigError, match=served.url.replace(".", r"\.")):
        nbagent.serve(notebook, namespace={})
    port = served.http.port
    served.stop()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # free again
    again = nbagent.serve(notebook, namespace={}, approve_code=False)
    again.stop()


def test_the_server_answers_initialize_with_its_name(served):
    import httpx as h

    headers = {"Authorization": f"Bearer {served.token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "8"}}}
    reply = h.post(served.url, json=body, headers=headers, timeout=30)
    data = reply.text.split("data:", 1)[-1] if "text/event-stream" in reply.headers["content-type"] else reply.text
    assert json.loads(data)["result"]["serverInfo"]["name"] == "nbagent"


def test_a_stdio_only_client_works_through_the_bridge_named_as_itself(served, notebook: Path):
    import os
    import sys

    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    root = str(Path(nbagent.__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if k != "NBAGENT_MCP_TOKEN"}  # the token file is found
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    params = StdioServerParameters(command=sys.executable, args=["-m", "nbagent", "mcp", "--connect", served.url],
                                   env=env)

    async def go():
        info = types.Implementation(name="gemini-cli", version="0.9")
        async with Client(stdio_client(params), client_info=info, mode="legacy") as c:
            listed = await c.list_tools()
            read = await c.call_tool("read_notebook", {})
            edited = await c.call_tool("edit_cell", {"cell_id": "load", "source": "x = 2"})
            return listed, read, edited

    listed, read, edited = asyncio.run(go())
    assert "edit_cell" in {t.name for t in listed.tools}
    assert "print(x / 0)" in text(read) and not edited.is_error, text(edited)
    actions = nbformat.read(str(notebook), as_version=4).cells[0].metadata["nbagent"]["actions"]
    assert actions[-1]["author"] == "gemini-cli 0.9"


def test_the_setup_lines_name_every_client_and_hold_no_token(served):
    lines = served.setup()
    assert "claude mcp add --transport http nbagent " + served.url in lines
    assert "[mcp_servers.nbagent]" in lines and 'bearer_token_env_var = "NBAGENT_MCP_TOKEN"' in lines
    assert '"servers"' in lines and '"mcpServers"' in lines and "-m nbagent mcp --connect " + served.url in lines
    assert served.token not in lines
    assert Path(served.http.token_path).read_text() == served.token
    assert Path(served.http.token_path).stat().st_mode & 0o077 == 0
    served.stop()
    assert not Path(served.http.token_path).exists()


def test_the_magic_serves_prints_the_setup_says_where_and_stops(notebook: Path):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbagent")

    def cell(source: str) -> str:
        with capture_output() as cap:
            ip.run_cell(source)
        return cap.stdout + cap.stderr

    out = cell(f"%chat_serve {notebook}")
    server = nbagent.served_notebook.serving()
    try:
        assert server is not None and f"claude mcp add --transport http nbagent {server.url}" in out
        assert server.token not in out
        again = cell(f"%chat_serve {notebook}")
        assert "already serves" in again and server.url in again and "Traceback" not in again
    finally:
        stopped = cell("%chat_serve --stop")
    assert f"stopped serving {server.url}" in stopped and not server.running
    assert "no server runs" in cell("%chat_serve --stop")


class LiveView:
    """What the chat widget looks like to view_presence once a browser draws it (the browser tier
    clicks the real buttons; here the test answers as the person would, on the agent's loop)."""

    def __init__(self, conversation) -> None:
        self.conversation, self.comm = conversation, object()


def test_with_a_live_widget_calls_wait_for_the_person_and_a_denial_is_the_clients_error(notebook: Path):
    import concurrent.futures

    from nbagent.core.steps import ApprovalDecision, StepStatus
    from nbagent.notebook import view_presence
    from support.waiting import wait_for

    server = nbagent.serve(notebook, namespace={})
    view = LiveView(server.agent.conversation)
    view_presence.register(view)
    view_presence.view_seen(view)
    conv = server.agent.conversation

    def pending() -> list[str]:
        return [c.id for s in conv.history if s.is_tool_run and s.status == StepStatus.WAITING_FOR_USER
                and s.approval == ApprovalDecision.PENDING for c in s.tool_calls]

    answered: list[str] = []

    def answer(decide) -> None:
        wait_for(lambda: set(pending()) - set(answered), "a call waiting for approval")
        call_id = next(c for c in pending() if c not in answered)
        card = next(s for s in conv.history if s.is_tool_run and s.tool_calls[0].id == call_id)
        assert ("+", "print(x / 1)") in card.preview.diff  # the diff before Approve
        answered.append(call_id)
        server.loop.call_soon_threadsafe(decide, call_id)

    steps = [("read_notebook", {}), ("edit_cell", {"cell_id": "plot", "source": "print(x / 1)"}),
             ("edit_cell", {"cell_id": "plot", "source": "print(x / 1)"})]
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            results = pool.submit(call, server, steps)
            answer(lambda cid: conv.deny(cid, reason="not this one"))
            answer(conv.approve)
            _, _, denied, approved = results.result(timeout=60)
    finally:
        server.stop()
    assert denied.is_error and "not this one" in text(denied)
    assert set(step.tool_server for step in conv.history if step.is_tool_run) == {"Claude Code 2.1.7"}  # the cards
    assert not approved.is_error, text(approved)
    assert server.agent.model == "mcp:Claude Code 2.1.7"
    cell = nbformat.read(str(notebook), as_version=4).cells[1]
    assert cell.source == "print(x / 1)"
    assert [(a["approved_by"], a["author"]) for a in cell.metadata["nbagent"]["actions"]] == [
        ("user", "Claude Code 2.1.7")]


def test_outside_the_courses_lesson_hours_a_call_is_the_clients_error_saying_when_it_opens(notebook: Path,
                                                                                             tmp_path: Path,
                                                                                             monkeypatch):
    import datetime

    now = datetime.datetime.now()
    later, end = now + datetime.timedelta(hours=2), now + datetime.timedelta(hours=3)
    window = f"{later:%H:%M}-{end:%H:%M}" if end.date() == now.date() else "00:00-00:01"  # never now
    (tmp_path / "nbagent.toml").write_text(f'[policy]\nhours = ["{window}"]\n')
    monkeypatch.setenv("NBAGENT_CONFIG", str(tmp_path / "nbagent.toml"))
    server = nbagent.serve(notebook, namespace={}, approve_code=False)
    try:
        _, read = call(server, [("read_notebook", {})])
    finally:
        server.stop()
    assert read.is_error and "lesson hours" in text(read) and "opens again" in text(read)


def test_stop_ends_the_server_while_a_client_session_is_still_open(notebook: Path):
    import threading

    server = nbagent.serve(notebook, namespace={}, approve_code=False)
    opened, release = threading.Event(), threading.Event()

    async def hold(c):
        await c.call_tool("list_variables", {})
        opened.set()
        await asyncio.get_running_loop().run_in_executor(None, release.wait)

    async def session():
        import httpx2
        import mcp_types as types
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}) as http:
            info = types.Implementation(name="holder", version="1")
            async with Client(streamable_http_client(server.url, http_client=http), client_info=info,
                              mode="legacy") as c:
                await hold(c)

    thread = threading.Thread(target=lambda: asyncio.run(session()), daemon=True)
    thread.start()
    try:
        assert opened.wait(60)
        server.stop()
        assert not server.running  # its thread ended although the client had not hung up
    finally:
        release.set()
        thread.join(60)
