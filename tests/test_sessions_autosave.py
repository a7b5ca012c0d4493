"""Many conversations (issue #21): autosave, resume with settings, switching models, listing.

Real parts throughout: the agent loop with the demo model, the session files on disk, separate
Python processes for a kernel restart and for two kernels saving into one folder, and the real
provider request builders (through a loopback server) after a model switch.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from support.fault_server import FaultServer, reply
from support.scripted import Pause, ScriptedProvider, text_call, tool_call
from support.wires import WIRES

from nbagent import (
    Agent,
    AgentSettings,
    NbagentError,
    list_sessions,
    load_sessions,
    tool,
)
from nbagent.core.blocking import run_sync
from nbagent.core.session_file import read_session_document, read_session_head
from nbagent.core.session_journal import journal_path
from nbagent.core.session_settings import savable_options
from nbagent.providers.base import TextDelta

ROOT = Path(__file__).resolve().parents[1]
V1 = Path(__file__).resolve().parent / "data" / "sessions" / "demo-tools-v1.json"
KEY = "sk-autosave-secret-0123456789abcdef"


@tool
def calculator(expression: str) -> float:
    """Evaluate an arithmetic expression."""
    return eval(expression, {"__builtins__": {}})


def only_file(folder: Path) -> Path:
    files = sorted(folder.glob("*.json"))
    assert len(files) == 1, files
    return files[0]


def test_save_to_writes_one_readable_file_after_every_turn(tmp_path):
    agent = Agent(model="demo", tools=[calculator], delay=0, save_to=tmp_path, user="alice",
                  system="Be brief.", temperature=0.2, max_tokens=300, budget_usd=2.5, api_key=KEY)
    assert list(tmp_path.iterdir()) == []  # nothing before the first turn
    agent.ask("What is 6 * 7?")
    path = only_file(tmp_path)
    assert path.name.endswith(f"-what-is-6-7-{agent.conversation.conversation_id[:8]}.json")
    assert path.name[:4].isdigit() and path.name[4] == "-"  # starts with the date
    assert len(json.loads(path.read_text())["turns"]) == 1
    agent.ask("Thanks!")  # appended to the file's journal: every reader applies it
    assert only_file(tmp_path) == path and len(read_session_document(path)["turns"]) == 2
    text = path.read_text() + journal_path(path).read_text()
    assert KEY not in text and "api_key" not in text
    settings = read_session_head(path).settings
    assert settings == AgentSettings(
        model="demo:demo", system="Be brief.", temperature=0.2, max_tokens=300, provider_options={"delay": 0},
        policy="allow_all", budget_usd=2.5, tools=["calculator"], user="alice")


async def test_a_failed_turn_and_an_interrupted_one_are_saved_too(tmp_path):
    pause = Pause()
    provider = ScriptedProvider([text_call("fine"), [NbagentError("upstream down", kind="server")],
                                 [TextDelta("partial "), pause, *text_call("never")]])
    agent = Agent(model=provider, save_to=tmp_path)
    conv = agent.conversation
    await conv.chat_to_completion("first")
    with pytest.raises(NbagentError):
        await conv.chat_to_completion("second")
    task = asyncio.ensure_future(conv.chat_to_completion("third"))
    await pause.reached.wait()
    conv.interrupt()
    await task
    turns = read_session_head(only_file(tmp_path)).turns
    assert [t.prompt for t in turns] == ["first", "second", "third"] and "upstream down" in turns[1].error
    assert [t.status.value for t in turns] == ["done", "error", "interrupted"]


def test_a_failed_write_leaves_the_previous_file_whole(tmp_path, monkeypatch):
    agent = Agent(model="demo", delay=0, save_to=tmp_path)
    agent.ask("one")
    path = only_file(tmp_path)
    before = path.read_bytes()

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)  # the journal's append and a whole rewrite both sync
    with pytest.warns(RuntimeWarning, match="autosave failed.*No space left"):
        resp = agent.ask("two")
    assert resp.text  # the turn itself went through
    assert path.read_bytes() == before  # and no temp file left (the session's lock file is its writer's)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith((".lock", ".journal"))) == [path.name]
    monkeypatch.undo()
    agent.ask("three")  # the next save catches up
    assert [t.prompt for t in read_session_head(path).turns] == ["one", "two", "three"]


def test_load_restores_the_settings_and_saves_to_the_same_file(tmp_path):
    agent = Agent(model="demo", tools=[calculator], delay=0, save_to=tmp_path, user="bob", system="Short.",
                  temperature=0.5, max_tokens=123, policy="ask", budget_usd=1.0, max_tool_iterations=4,
                  pricing={"demo": {"input": 1.0, "output": 2.0}}, include_reasoning=False)
    agent.ask("hello")
    path = agent.session_path
    again = Agent.load(path, tools=[calculator])
    assert again.settings() == agent.settings()
    conn = again.conversation.connection
    assert (conn.temperature, conn.max_tokens, conn.policy, conn.max_tool_iterations) == (0.5, 123, "ask", 4)
    assert again.system == "Short." and again.user == "bob" and again.conversation.budget.usd == 1.0
    assert again.conversation.turn_count == 1 and again.session_path == path
    again.ask("and again")
    assert only_file(tmp_path) == path
    assert [t.prompt for t in read_session_head(path).turns] == ["hello", "and again"]
    # overrides win; a tool not given again is named in a warning
    with pytest.warns(RuntimeWarning, match="calculator"):
        other = Agent.load(path, temperature=0.9, user="carol")
    assert other.conversation.connection.temperature == 0.9 and other.user == "carol"


def test_older_files_load_with_the_model_they_name(tmp_path):
    agent = Agent.load(V1, tools=[calculator], save_to=tmp_path)  # version 1: no settings
    assert agent.model.startswith("demo") and agent.conversation.turn_count == 3
    resp = agent.ask("What is 6 * 7?")
    assert "42" in resp.text and len(read_session_head(only_file(tmp_path)).turns) == 4


RESTART_1 = """
import sys
from nbagent import Agent, tool
@tool
def calculator(expression: str) -> float:
    '''Evaluate an arithmetic expression.'''
    return eval(expression, {"__builtins__": {}})
agent = Agent(model="demo", tools=[calculator], delay=0, save_to=sys.argv[1], user="dana", system="Terse.",
              temperature=0.1, budget_usd=0.5)
agent.ask("What is 6 * 7?")
print(agent.session_path)
"""

RESTART_2 = """
import sys
from nbagent import Agent, tool
@tool
def calculator(expression: str) -> float:
    '''Evaluate an arithmetic expression.'''
    return eval(expression, {"__builtins__": {}})
agent = Agent.load(sys.argv[1], tools=[calculator])
s = agent.settings()
print(s.user, s.system, s.temperature, s.budget_usd, agent.conversation.turn_count)
resp = agent.ask("What is 2 + 3?")
print(" ".join(resp.text.split()))
print(len(agent.conversation.connection.chat_session.messages))
"""


def run_python(code: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                         env=env, timeout=120, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_conversation_goes_on_after_a_kernel_restart(tmp_path):
    path = run_python(RESTART_1, str(tmp_path)).strip()
    lines = run_python(RESTART_2, path).splitlines()
    assert lines[0] == "dana Terse. 0.1 0.5 1"
    assert "says: **5**" in lines[1]  # the tool ran in the new process
    assert int(lines[2]) == 8  # both turns' messages were sent: 4 from before the restart, 4 new
    assert [t.prompt for t in read_session_head(path).turns] == ["What is 6 * 7?", "What is 2 + 3?"]


TWO_KERNELS = """
import sys
from nbagent import Agent
agent = Agent(model="demo", delay=0, save_to=sys.argv[1], user=sys.argv[2])
for i in range(5):
    agent.ask("Same first prompt" if i == 0 else f"turn {i}")
"""


def test_two_kernels_saving_into_one_folder_keep_their_own_files(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", TWO_KERNELS, str(tmp_path), user], env=env, cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for user in ("k1", "k2")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    df = list_sessions(tmp_path)
    assert sorted(df["user"]) == ["k1", "k2"] and df["turns"].tolist() == [5, 5]
    assert df["path"].nunique() == 2 and (df["error"] == "").all()


def test_set_model_keeps_the_history_and_the_frames_say_who_answered(tmp_path):
    first = ScriptedProvider([tool_call(("c1", "calculator", {"expression": "2+2"})),
                              text_call("four", thinking="I add.")])
    agent = Agent(model=first, tools=[calculator], save_to=tmp_path)
    agent.ask("What is 2+2?")
    agent.set_model("demo", delay=0)
    resp = agent.ask("And now?")
    assert "demo model" in resp.text
    df = agent.conversation.usage_df()
    assert df["model"].tolist() == ["scripted-1", "demo"]
    assert read_session_head(agent.session_path).settings.model == "demo:demo"
    with pytest.raises(NbagentError) as err:
        agent.set_model("nosuch:thing")
    assert err.value.kind == "config" and agent.model == "demo:demo"


@pytest.mark.parametrize("wire", WIRES, ids=[w.name for w in WIRES])
def test_after_a_switch_no_foreign_thought_or_signature_goes_on_the_wire(wire):
    first = ScriptedProvider([tool_call(("call_1", "calculator", {"expression": "2+2"})),
                              text_call("It is four.", thinking="SECRET-THOUGHT adding")])
    agent = Agent(model=first, tools=[calculator])
    agent.ask("What is 2+2?")
    with FaultServer() as server:
        server.push(reply(200, wire.text_body(["Hi", " there"]), {"content-type": "text/event-stream"}))
        agent.set_model(wire.make_provider(server.url, api_key="test-key-1234567890"))
        resp = agent.ask("Thanks")
        run_sync(agent.disconnect())
        body = server.requests[0].body.decode()
    assert resp.text == "Hi there"
    assert "SECRET-THOUGHT" not in body and '"sig"' not in body  # the other provider's thought and signature
    assert "It is four." in body and "calculator" in body and "2+2" in body  # answer, tool call and result went on


def test_list_sessions_lists_newest_first_and_damaged_files_with_the_reason(tmp_path):
    for user, prompts in (("ann", ["What is 1 + 1?"]), ("ben", ["  A   long\nfirst prompt " + "x" * 200, "more"])):
        agent = Agent(model="demo", delay=0, save_to=tmp_path, user=user,
                      pricing={"demo": {"input": 1.0, "output": 2.0}})
        for p in prompts:
            agent.ask(p)
    (tmp_path / "broken.json").write_text('{"format": "nbagent.session", "version": 3, "turns": [')
    (tmp_path / "other.json").write_text('{"name": "not a session"}')
    df = list_sessions(tmp_path)
    assert {"path", "title", "created", "updated", "model", "models", "turns", "tokens", "cost_usd", "user",
            "error"} <= set(df.columns)
    good = df[df["error"] == ""]
    assert good["user"].tolist() == ["ben", "ann"]  # newest first
    assert good["title"].iloc[0].startswith("A long first prompt x") and len(good["title"].iloc[0]) == 80
    assert good["turns"].tolist() == [2, 1] and (good["tokens"] > 0).all() and (good["cost_usd"] > 0).all()
    assert good["model"].tolist() == ["demo:demo"] * 2 and good["models"].tolist() == ["demo:demo"] * 2
    bad = df[df["error"] != ""].set_index(df[df["error"] != ""]["path"].map(lambda p: Path(p).name))
    assert "cut short" in bad.loc["broken.json", "error"] or "not valid JSON" in bad.loc["broken.json", "error"]
    assert "not an nbagent session file" in bad.loc["other.json", "error"]
    # load_sessions carries the user too, and both price turns alike
    usage = load_sessions(sorted(good["path"]), pricing={"demo": {"input": 3.0, "output": 5.0}})
    assert sorted(usage["user"].unique()) == ["ann", "ben"]
    listed = list_sessions(sorted(good["path"]), pricing={"demo": {"input": 3.0, "output": 5.0}})
    by_path = usage.groupby("path")["cost_usd"].sum()
    assert listed.set_index("path")["cost_usd"].to_dict() == pytest.approx(by_path.to_dict())
    assert (listed["cost_usd"] != good["cost_usd"].values).all()  # the prices given win over the saved ones


def test_bad_arguments_are_config_errors(tmp_path):
    with pytest.raises(NbagentError) as err:
        Agent(model="demo", user=42)
    assert err.value.kind == "config"
    with pytest.raises(NbagentError) as err:
        Agent(model="demo").save()
    assert err.value.kind == "config" and "save_to" in str(err.value)
    with pytest.raises(NbagentError) as err:
        Agent.load(tmp_path / "missing.json")
    assert err.value.kind == "io" and "missing.json" in str(err.value)


def test_reset_starts_a_new_file(tmp_path):
    agent = Agent(model="demo", delay=0, save_to=tmp_path)
    agent.ask("one")
    agent.reset()
    agent.ask("two")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = list_sessions(tmp_path)
    assert sorted(df["title"]) == ["one", "two"]


def test_keys_in_the_url_or_the_options_stay_out_of_the_file(tmp_path):
    agent = Agent(model="openai:gpt-4.1-mini", base_url=f"http://bob:{KEY}@127.0.0.1:9/v1?key={KEY}",
                  api_key=KEY, save_to=tmp_path, read_timeout=30.0)
    text = agent.save().read_text()
    assert KEY not in text
    settings = read_session_head(agent.session_path).settings
    assert settings.base_url == "http://127.0.0.1:9/v1" and settings.provider_options == {"read_timeout": 30.0}
    assert savable_options({"auth_token": KEY, "extra_headers": KEY, "secret": KEY, "client_key": KEY,
                            "delay": 0.5, "nested": {"k": KEY}}) == {"delay": 0.5}


@pytest.mark.parametrize("damage", [
    "not settings", {"temperature": "hot"}, {"tools": [1]}, {"user": 5}, {"max_tokens": True},
    {"budget_usd": float("nan")}, {"provider_options": []},
])
def test_damaged_settings_are_listed_as_unreadable_and_refused_by_load(tmp_path, damage):
    agent = Agent(model="demo", delay=0, save_to=tmp_path)
    agent.ask("hello")
    doc = json.loads(agent.session_path.read_text())
    doc["settings"] = damage if not isinstance(damage, dict) else {**doc["settings"], **damage}
    agent.session_path.write_text(json.dumps(doc))
    (row,) = list_sessions(tmp_path).itertuples()
    assert "corrupt settings" in row.error and row.turns == 0
    with pytest.raises(NbagentError) as err:
        Agent.load(agent.session_path)
    assert err.value.kind == "io" and agent.session_path.name in str(err.value)


def test_a_notebook_chat_read_in_a_script_goes_on_without_the_kernel_tools(tmp_path, monkeypatch):
    import sys

    from nbagent import notebook_tools

    # a script: IPython not loaded (other tests of this process may have made a shell)
    monkeypatch.delitem(sys.modules, "IPython", raising=False)

    agent = Agent(model="demo", delay=0, save_to=tmp_path, tools=notebook_tools({"x": 1}, run_code=False))
    agent.ask("list_variables please")
    doc = json.loads(agent.session_path.read_text())
    doc["settings"]["notebook"], doc["settings"]["tools"] = True, []  # as Agent(notebook=True) in a kernel saves
    agent.session_path.write_text(json.dumps(doc))
    with pytest.warns(RuntimeWarning, match="outside a kernel"):
        again = Agent.load(agent.session_path)
    assert again.conversation.turn_count == 1 and "list_variables" not in again.tools
    with pytest.raises(NbagentError) as err:  # asked for explicitly: the usual error
        Agent.load(agent.session_path, notebook=True)
    assert err.value.kind == "config"


def test_a_failing_autosave_shows_in_the_widget_until_a_save_works(tmp_path, monkeypatch):
    """The run found a repeated autosave failure silent after the first warning."""
    pytest.importorskip("anywidget")
    from nbagent.notebook.widget import ChatWidget

    agent = Agent(model="demo", delay=0, save_to=tmp_path)
    widget = ChatWidget(agent)
    agent.ask("one")
    assert widget.autosave == "" and agent.autosave_status.saving

    def read_only(fd):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "fsync", read_only)
    with pytest.warns(RuntimeWarning, match="autosave failed.*Read-only file system"):
        agent.ask("two")
    line = widget.autosave
    assert line.startswith("Not saved since ") and "Read-only file system" in line, line
    assert "nbagent saves again after each turn" in line and not agent.autosave_status.saving
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once; the widget keeps saying it
        agent.ask("three")
    assert "(2 saves failed)" in widget.autosave and widget.autosave.startswith(line[:len("Not saved since 00:00:00")])
    monkeypatch.undo()
    agent.ask("four")  # this save works: the line goes, every turn is in the file
    assert widget.autosave == "" and agent.autosave_status.saving
    assert [t.prompt for t in read_session_head(agent.session_path).turns] == ["one", "two", "three", "four"]
