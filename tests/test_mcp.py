"""MCP tools against real servers: mcp-server-time (PyPI) and the tests' own server, over stdio
and streamable HTTP, through the whole agent loop (a scripted model asks for the calls)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from nbagent import Agent, NbagentError, StepStatus, StepType, mcp_tools, tool  # noqa: E402

from support.scripted import ScriptedProvider, assert_history_valid, text_call, tool_call  # noqa: E402

HERE = Path(__file__).resolve().parent
OWN = [sys.executable, str(HERE / "support" / "mcp_server.py")]
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))
TIME = [TIME_SERVER, "--local-timezone", "Etc/UTC"]

pytestmark = pytest.mark.skipif(not os.path.exists(TIME_SERVER), reason="mcp-server-time is not installed")


def env_steps(conv):
    return [s for s in conv.history if s.type == StepType.TOOL_CALL and s.status != StepStatus.ACTIVE
            and s.source.value == "SYSTEM"]


def result_of(conv, call_id: str):
    return [s for s in env_steps(conv) if s.tool_calls[0].id == call_id][-1]


def mcp_children() -> list[int]:
    """Our child processes that are MCP servers (zombies included: they would be a leak too)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and ("mcp" in cmdline or "defunct" in stat):
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def model(*calls) -> ScriptedProvider:
    return ScriptedProvider(list(calls))


@pytest.fixture(autouse=True)
def no_server_left_behind():
    yield
    assert mcp_children() == []


async def test_time_server_over_stdio_lists_at_the_first_turn_and_answers():
    provider = model(tool_call(("t1", "get_current_time", {"timezone": "Europe/Paris"})), text_call("It is late."))
    agent = Agent(model=provider, mcp=[TIME])
    assert mcp_children() == []  # naming a server starts nothing
    resp = await agent.chat_to_completion("What time is it in Paris?")
    assert resp.text.strip() == "It is late."
    spec = {t.name: t for t in provider.requests[0].tools}["get_current_time"]
    assert spec.input_schema["required"] == ["timezone"] and "timezone" in spec.description.lower()
    step = result_of(agent.conversation, "t1")
    assert step.status == StepStatus.DONE and step.tool_server == "mcp-time"
    assert '"timezone": "Europe/Paris"' in step.content and '"day_of_week"' in step.content
    sent = provider.requests[1].messages[-1].tool_results[0]
    assert not sent.is_error and "Europe/Paris" in sent.content
    assert agent.tools["get_current_time"].server == "mcp-time"
    from nbagent.notebook.turn_codec import step_dict

    assert step_dict(step)["tool_server"] == "mcp-time"  # what the widget's card shows
    markdown = agent.conversation.to_markdown().replace("&#95;", "_")  # markdown escapes dropped
    assert "get_current_time (MCP mcp-time)** returned" in markdown  # and the transcript
    [pid] = mcp_children()
    await agent.aclose()
    assert not alive(pid)


async def test_results_text_structured_image_and_errors():
    provider = model(tool_call(("e", "echo", {"text": "hi there"}), ("f", "forecast", {"city": "Oslo"}),
                               ("i", "red_square", {}), ("x", "fail", {"message": "boom"})),
                     text_call("done"))
    agent = Agent(model=provider, mcp=[OWN])
    await agent.chat_to_completion("try them all")
    conv = agent.conversation
    assert result_of(conv, "e").content == "hi there"
    assert '"temperature_c": 21' in result_of(conv, "f").content
    image = result_of(conv, "i")
    assert image.display is not None and image.display["image/png"].startswith("iVBOR")  # a PNG, base64
    assert "image/png image" in image.content and "shown to the user" in image.content
    failed = result_of(conv, "x")
    assert failed.status == StepStatus.ERROR and "fail" in failed.content
    by_id = {r.tool_use_id: r for r in provider.requests[1].messages[-1].tool_results}
    assert by_id["x"].is_error and not by_id["e"].is_error
    assert_history_valid(conv.connection.session)
    await agent.aclose()


def test_one_server_per_agent_across_event_loops():
    provider = model(tool_call(("a", "server_pid", {})), text_call("one"),
                     tool_call(("b", "server_pid", {})), text_call("two"))
    agent = Agent(model=provider, mcp=[OWN])
    asyncio.run(agent.chat_to_completion("pid?"))
    asyncio.run(agent.chat_to_completion("pid again?"))  # another event loop, the same session
    conv = agent.conversation
    assert result_of(conv, "a").content == result_of(conv, "b").content
    assert len(mcp_children()) == 1
    asyncio.run(agent.aclose())


@pytest.fixture
def http_server(tmp_path):
    """The tests' MCP server over streamable HTTP, on a socket bound here and passed to it: no free port to
    find and lose before the server binds it, and a request made before it serves waits in the backlog."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        fd = listening.fileno()
        log = tmp_path / "mcp-http.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([*OWN, "--http-socket", str(fd)], pass_fds=[fd], stdout=out, stderr=out)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            urllib.request.urlopen(url, timeout=60)  # answered (a GET without a session is refused): serving
        except urllib.error.HTTPError:
            pass
        except OSError as exc:
            proc.kill()
            proc.wait(10)
            raise AssertionError(f"the MCP server did not answer: {exc}\n{log.read_text()[-2000:]}") from None
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


async def test_streamable_http_with_headers(http_server):
    server = mcp_tools(http_server, headers={"X-Nbagent-Test": "open sesame"})
    provider = model(tool_call(("h", "request_header", {"name": "X-Nbagent-Test"})), text_call("ok"))
    agent = Agent(model=provider, mcp=[server])
    await agent.chat_to_completion("which header?")
    step = result_of(agent.conversation, "h")
    assert step.content == "open sesame" and step.tool_server == "nbagent-test"
    assert "open sesame" not in repr(server)
    await agent.aclose()
    assert not server.running


async def test_name_clash_is_prefixed_with_the_server_name():
    @tool
    def get_current_time(timezone: str) -> str:
        """The user's own clock."""
        return "teatime"

    provider = model(tool_call(("u", "get_current_time", {"timezone": "UTC"}),
                               ("m", "mcp-time_get_current_time", {"timezone": "UTC"}),
                               ("o", "nbagent-test_get_current_time", {"timezone": "UTC"})),
                     text_call("three clocks"))
    agent = Agent(model=provider, tools=[get_current_time], mcp=[TIME, OWN])
    await agent.chat_to_completion("what time is it?")
    names = [t.name for t in provider.requests[0].tools]
    assert {"get_current_time", "mcp-time_get_current_time", "nbagent-test_get_current_time", "echo"} <= set(names)
    conv = agent.conversation
    assert result_of(conv, "u").content == "teatime" and result_of(conv, "u").tool_server == ""
    assert '"timezone": "UTC"' in result_of(conv, "m").content and result_of(conv, "m").tool_server == "mcp-time"
    assert result_of(conv, "o").content == "12:00 in UTC" and result_of(conv, "o").tool_server == "nbagent-test"
    await agent.aclose()


async def test_policy_ask_waits_for_approval_of_mcp_tools():
    provider = model(tool_call(("a", "echo", {"text": "approved"})), text_call("ok"))
    agent = Agent(model=provider, mcp=[OWN], policy="ask")
    conv = agent.conversation
    turn = asyncio.ensure_future(conv.chat_to_completion("echo"))
    while not any(s.status == StepStatus.WAITING_FOR_USER for s in env_steps(conv)):
        assert not turn.done()
        await asyncio.sleep(0.02)
    waiting = [s for s in conv.history if s.status == StepStatus.WAITING_FOR_USER][-1]
    assert waiting.tool_server == "nbagent-test" and waiting.content == ""
    conv.approve("a")
    await turn
    assert result_of(conv, "a").content == "approved"
    await agent.aclose()


async def test_a_crashed_server_is_a_tool_error_and_the_next_call_restarts_it():
    provider = model(tool_call(("p1", "server_pid", {})), text_call("got it"),
                     tool_call(("c", "crash", {})), text_call("it crashed"),
                     tool_call(("p2", "server_pid", {})), text_call("back"))
    agent = Agent(model=provider, mcp=[OWN])
    conv = agent.conversation
    await conv.chat_to_completion("pid?")
    first = int(result_of(conv, "p1").content)
    resp = await conv.chat_to_completion("crash it")
    crashed = result_of(conv, "c")
    assert crashed.status == StepStatus.ERROR and "'nbagent-test'" in crashed.content
    assert "crashed or exited" in crashed.content and "crashing on purpose" in crashed.content  # its stderr
    assert resp.text.strip() == "it crashed"  # the turn went on
    await conv.chat_to_completion("pid now?")
    second = int(result_of(conv, "p2").content)
    assert second != first and not alive(first)
    assert_history_valid(conv.connection.session)
    await agent.aclose()


async def test_a_missing_command_is_a_config_error_naming_the_server_and_the_conversation_goes_on():
    with pytest.raises(NbagentError) as err:
        await mcp_tools("no-such-mcp-server-xyz --flag").list_tools()
    assert err.value.kind == "config" and "no-such-mcp-server-xyz" in str(err.value)
    with pytest.raises(NbagentError) as err:  # before any turn: naming the server checks its command
        Agent(model=model(text_call("never")), mcp=["no-such-mcp-server-xyz"])
    assert err.value.kind == "config" and "'no-such-mcp-server-xyz' not found" in str(err.value)
    provider = model(text_call("no tools, but here"), text_call("still here"))
    server = mcp_tools(TIME)
    server.command = ["no-such-mcp-server-xyz"]  # uninstalled after it was named
    agent = Agent(model=provider, mcp=[server])
    resp = await agent.chat_to_completion("hello")
    assert resp.text.strip() == "no tools, but here"
    [note] = [s for s in agent.conversation.history if s.type == StepType.SYSTEM_MESSAGE]
    assert note.status == StepStatus.ERROR and "not found" in note.error and "no-such-mcp-server-xyz" in note.error
    assert (await agent.chat_to_completion("again")).text.strip() == "still here"
    assert provider.requests[0].tools == []


@pytest.mark.parametrize("server, says", [
    ([sys.executable, "-c", "import sys; sys.exit(3)"], "the server exited with status 3"),
    ([sys.executable, "-c", "print('garbage, not JSON'); import sys; sys.exit(3)"], "not MCP to its output: 'garbage, not JSON'"),
    ("python -m mcp_server_time --local-timezone Not/AZone",  # the package index's server, misconfigured
     "invalid --local-timezone 'Not/AZone'"),
], ids=["exits-3", "garbage-then-exits", "mcp-server-time-bad-zone"])
async def test_a_server_that_fails_to_start_is_said_before_the_answer_and_the_model_gets_no_tools(server, says):
    """The turn's first steps are the prompt and an error notice naming the server and why (its exit
    status, the garbage it wrote, its stderr), before the model is asked; the model is asked without
    the server's tools (nothing pretends they exist), the turn itself is not failed, and the next turn
    tries the server again (#31.17)."""
    provider = model(text_call("answered without its tools"), text_call("again"))
    agent = Agent(model=provider, mcp=[server])
    resp = await agent.chat_to_completion("what time is it?")
    steps = agent.conversation.history
    assert [s.type for s in steps[:3]] == [StepType.TEXT_RESPONSE, StepType.SYSTEM_MESSAGE, StepType.TEXT_RESPONSE]
    note = steps[1]
    assert note.status == StepStatus.ERROR and "are not available in this turn" in note.content
    assert says in note.error and "MCP server" in note.error
    assert note.finished_at <= steps[2].created_at  # said before the model was asked
    assert resp.text.strip() == "answered without its tools" and provider.requests[0].tools == []
    assert agent.conversation.turns[-1].status == "done"
    await agent.chat_to_completion("again?")
    assert sum(s.type == StepType.SYSTEM_MESSAGE for s in agent.conversation.history) == 2  # tried again
    await agent.aclose()


async def test_a_server_that_exits_at_once_is_a_tool_error_quoting_its_stderr():
    server = mcp_tools([sys.executable, "-c", "import sys; sys.exit('no config file here')"], name="quitter")
    with pytest.raises(NbagentError) as err:
        await server.list_tools()
    message = str(err.value)
    assert err.value.kind == "tool" and "'quitter' exited" in message and "no config file here" in message


async def test_garbage_on_stdout_is_a_protocol_error_naming_the_server():
    server = mcp_tools([*OWN, "--garbage"], name="noisy")
    with pytest.raises(NbagentError) as err:
        server.tools()
    assert err.value.kind == "protocol" and "'noisy'" in str(err.value) and "not MCP" in str(err.value)
    assert not server.running


async def test_a_server_that_never_answers_is_a_timeout_error_and_is_stopped():
    server = mcp_tools([*OWN, "--silent"], name="mute", timeout=1)
    with pytest.raises(NbagentError) as err:
        await server.list_tools()
    assert err.value.kind == "timeout" and "'mute'" in str(err.value) and "within 1 s" in str(err.value)
    assert not server.running  # and the fixture checks the process is gone


async def test_interrupting_a_turn_while_a_server_starts_ends_the_turn_and_the_start():
    provider = model(text_call("later"))
    agent = Agent(model=provider, mcp=[mcp_tools([*OWN, "--silent"], timeout=120)])
    conv = agent.conversation
    turn = asyncio.ensure_future(conv.chat_to_completion("hello"))
    while not mcp_children():
        await asyncio.sleep(0.02)
    conv.interrupt()
    resp = await turn
    assert resp.finish_reason.value == "INTERRUPTED" and provider.requests == []
    assert_history_valid(conv.connection.session)
    for _ in range(600):  # the start gives up too: the process goes away without aclose()
        if not mcp_children():
            break
        await asyncio.sleep(0.05)
    assert mcp_children() == []
    await agent.aclose()


async def test_aclose_stops_the_process_and_a_later_call_starts_it_again():
    server = mcp_tools(OWN)
    tools = {t.name: t for t in await server.list_tools()}
    [pid] = mcp_children()
    await server.aclose()
    assert not alive(pid) and not server.running
    assert (await tools["echo"].run({"text": "again"})).text == "again"
    assert server.running
    server.close()


def test_interpreter_exit_stops_the_servers(tmp_path):
    # --linger: the server outlives the end of its input, so only nbagent's exit handler stops it
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        import nbagent
        tools = {{t.name: t for t in nbagent.mcp_tools({[*OWN, "--linger"]!r}).tools()}}
        print(tools["server_pid"](), flush=True)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.strip())
    try:
        assert not alive(pid)
    finally:
        if alive(pid):
            os.kill(pid, 9)


def test_chat_tools_lists_mcp_tools_with_their_server():
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbagent")
    agent = Agent(model="demo", mcp=[OWN])
    ip.user_ns["mcp_bot"] = agent
    with capture_output() as cap:
        ip.run_line_magic("chat_tools", "-a mcp_bot")
    assert "MCP servers listed at the first turn: mcp_server" in cap.stdout  # nothing started yet
    assert mcp_children() == []
    resp = agent.ask('Please use echo with "hello MCP"')  # the demo model calls echo(text="hello MCP")
    assert "hello MCP" in resp.text
    [call] = [s.tool_calls[0] for s in env_steps(agent.conversation)]
    assert call.args == {"text": "hello MCP"}  # the double-quoted text, not the whole prompt
    with capture_output() as cap:
        ip.run_line_magic("chat_tools", "-a mcp_bot")
    assert "echo (MCP nbagent-test)" in cap.stdout and "first turn" not in cap.stdout
    ip.user_ns.pop("mcp_bot")
    asyncio.run(agent.aclose())
