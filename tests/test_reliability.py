"""Reliability: what an adversarial run broke, each with a regression test (issue #14).

Each test failed on the code before its fix: lone surrogates broke a conversation for good; a hung
sync tool hung the turn, starved later tools and kept scripts from exiting; repeated tool-call ids
ran both calls but sent the model one result twice; damaged session files raised
AttributeError / RecursionError or loaded silently; every compaction check recounted the whole
history; a turn stopped at ``max_tool_iterations`` answered with an empty text.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nbagent import Agent, Conversation, NbagentError, StepStatus, tool
from nbagent.core.chat_session import ChatSession
from nbagent.core.compression import ApproxTokenizer
from nbagent.core.messages import Message, TextPart, ToolResultPart
from nbagent.loop import tool_threads
from nbagent.core.session_file import read_session
from nbagent.providers.base import TextDelta

from support.scripted import ScriptedProvider, assert_history_valid, text_call, tool_call
from support.waiting import wait_for
from nbagent.core.conversation_state import plumbing_of

LONE = "\udcff"  # what os.fsdecode makes of the byte 0xff


# --- 3. lone surrogates ----------------------------------------------------------------------


def test_lone_surrogates_from_prompt_tool_and_model_leave_the_conversation_usable(tmp_path):
    @tool
    def list_files() -> str:
        """Names in a folder."""
        return "report" + LONE + ".txt"

    provider = ScriptedProvider([
        tool_call(("c1", "list_files", {})),
        [TextDelta("I see report" + LONE + ".txt"), *text_call("")[-1:]],
        text_call("still fine"),
    ])
    agent = Agent(model=provider, tools=[list_files])
    conv = agent.conversation
    conv.ask("which files? " + LONE)
    resp = conv.ask("and now?")
    assert resp.text.strip() == "still fine"
    for message in provider.requests[-1].messages:  # every request could be encoded as UTF-8
        json.dumps(message.to_dict(), ensure_ascii=False).encode("utf-8")
    for step in conv.history:
        (step.content + step.thinking + step.error).encode("utf-8")
    assert "\ufffd" in conv.history[0].content and "\ufffd" in conv.turns[0].prompt
    path = conv.save(tmp_path / "s.json")  # saving works
    assert Conversation.load(path).history == conv.history
    assert_history_valid(agent.conversation.connection.session)


def test_error_messages_are_capped_and_encodable():
    err = NbagentError("bad request: " + "x" * 1_000_000 + LONE, kind="invalid_request")
    assert len(str(err)) < 2_200 and "more characters cut" in str(err)
    str(err).encode("utf-8")


# --- 4. hung sync tools ----------------------------------------------------------------------


def test_a_hung_sync_tool_times_out_and_later_tools_still_run():
    release = threading.Event()

    @tool(timeout=0.2)
    def hang() -> str:
        """Never returns in time."""
        release.wait(30)
        return "late"

    @tool
    def quick() -> str:
        """Returns at once."""
        return "quick result"

    calls = [tool_call(*[(f"h{i}", "hang", {}) for i in range((os.cpu_count() or 1) + 5)]), text_call("after hang"),
             tool_call(("q1", "quick", {})), text_call("done")]
    agent = Agent(model=ScriptedProvider(calls), tools=[hang, quick])
    try:
        resp = agent.ask("hang them all")
        hung = [s for s in agent.conversation.history if s.tool_calls and s.tool_calls[0].name == "hang"
                and s.source.value == "SYSTEM"]
        assert hung and all("did not finish within 0.2 s" in s.content for s in hung)
        assert all(s.status.value == "ERROR" for s in hung) and resp.text.strip() == "after hang"
        # more hung threads than the default thread pool has workers, and still:
        assert agent.ask("quick please").text.strip() == "done"
        quick_step = [s for s in agent.conversation.history if s.content == "quick result"]
        assert quick_step
    finally:
        release.set()
        # the released threads end soon, not at once: a test run next in this process counts stuck threads
        wait_for(lambda: not tool_threads.stuck_tools(), "the released tool threads ending")


def test_a_script_with_a_hung_tool_exits(tmp_path):
    script = tmp_path / "hung.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "from nbagent import Agent, tool\n"
        "from support.scripted import ScriptedProvider, text_call, tool_call\n"
        "@tool(timeout=0.2)\n"
        "def hang() -> str:\n"
        "    '''Sleeps for an hour.'''\n"
        "    time.sleep(3600)\n"
        "agent = Agent(model=ScriptedProvider([tool_call(('h', 'hang', {})), text_call('gave up')]), tools=[hang])\n"
        "print(agent.ask('go').text)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "gave up"


# --- 5. repeated tool-call ids -----------------------------------------------------------------


def test_repeated_tool_call_ids_run_each_call_once_and_replay_consistently():
    seen = []

    @tool
    def echo(x: int) -> int:
        """Echo a number."""
        seen.append(x)
        return x * 10

    provider = ScriptedProvider([tool_call(("call_0", "echo", {"x": 1}), ("call_0", "echo", {"x": 2}),
                                           ("", "echo", {"x": 3})), text_call("ok")])
    agent = Agent(model=provider, tools=[echo])
    agent.ask("echo three")
    assert sorted(seen) == [1, 2, 3]
    request = provider.requests[-1].messages
    uses = request[-2].tool_uses
    results = request[-1].tool_results
    ids = [u.id for u in uses]
    assert len(set(ids)) == 3 and ids[0] == "call_0"
    assert [r.tool_use_id for r in results] == ids
    assert [r.content for r in results] == ["10", "20", "30"]
    assert uses[1].provider_details["original_id"] == "call_0"
    assert_history_valid(agent.conversation.connection.session)
    df_ids = [c.id for s in agent.conversation.history for c in s.tool_calls if s.source.value == "MODEL"]
    assert df_ids == ids  # what the user sees matches what the model is told


# --- 8. damaged session files ------------------------------------------------------------------


def _saved(tmp_path) -> dict:
    agent = Agent(model="demo")
    agent.ask("hello")
    return json.loads(agent.conversation.save(tmp_path / "ok.json").read_text())


@pytest.mark.parametrize("damage", [
    lambda d: d["chat_session"].update(messages="not a list"),
    lambda d: d["chat_session"].update(messages=[{"role": "wizard", "parts": []}]),
    lambda d: d["chat_session"]["messages"][0].update(parts=[{"type": "text", "text": 5}]),
    lambda d: d["chat_session"]["messages"][0].update(parts=[{"type": "teleport"}]),
    lambda d: d.update(steps={"a": 1}),
    lambda d: d.update(steps=[1, 2]),
    lambda d: d["steps"][0].update(content=["not", "text"]),
    lambda d: d.update(turns=[[[[]]]]),
])
def test_damaged_session_files_are_io_errors(tmp_path, damage):
    doc = _saved(tmp_path)
    damage(doc)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(NbagentError) as err:
        read_session(path)
    assert err.value.kind == "io" and "damaged.json" in str(err.value)


def test_deeply_nested_session_file_is_an_io_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"format": "nbagent.session", "version": 2, "steps": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(NbagentError) as err:
        read_session(path)
    assert err.value.kind == "io"


# --- 11. compaction counting --------------------------------------------------------------------


class CountingTokenizer(ApproxTokenizer):
    def __init__(self):
        super().__init__()
        self.messages_counted = 0

    def count_message(self, message):
        self.messages_counted += 1
        return super().count_message(message)


def test_token_counts_are_kept_per_message_not_recounted():
    session = ChatSession()
    tok = CountingTokenizer()
    for i in range(500):
        session.push_user(f"question {i}")
        session.push_assistant(Message("assistant", [TextPart(f"answer {i}")]))
    first = tok.count_session(session)
    assert tok.messages_counted == 1000
    session.push_user("one more")
    assert tok.count_session(session) > first and tok.messages_counted == 1001  # only the new one
    session.push_tool_results([ToolResultPart("x", "y" * 5000, name="t")])  # grows the last message
    total = tok.count_session(session)
    assert tok.messages_counted == 1002 and total == ApproxTokenizer().count_session(session)
    session.compress(total // 2, tokenizer=tok)
    assert tok.count_session(session) == ApproxTokenizer().count_session(session)  # never stale


# --- 12. the tool-call limit --------------------------------------------------------------------


def test_the_tool_call_limit_says_why_in_the_response():
    @tool
    def again() -> str:
        """Ask again."""
        return "more"

    provider = ScriptedProvider([tool_call((f"c{i}", "again", {})) for i in range(3)])
    agent = Agent(model=provider, tools=[again], max_tool_iterations=2)
    resp = agent.ask("loop")
    assert "max_tool_iterations=2" in resp.text
    calls = agent.conversation.tool_calls_df()  # the call it did not run is closed, not pending
    assert calls["status"].tolist() == ["DONE", "DONE", "CANCELED"]
    assert "limit reached" in calls["result_preview"].iloc[-1]


# --- 6. calls finished before an interrupt -------------------------------------------------------


async def test_calls_complete_before_an_interrupt_are_closed_not_pending():
    from nbagent.core.steps import ToolCall
    from nbagent.providers.base import ToolCallEnd

    from support.scripted import Pause

    pause = Pause()
    provider = ScriptedProvider([[TextDelta("Let me check. "), ToolCallEnd(0, ToolCall("t1", "lookup", {"q": 1})),
                                  pause, TextDelta("never")]])

    @tool
    def lookup(q: int) -> str:
        """Look something up."""
        return "found"

    agent = Agent(model=provider, tools=[lookup])
    conv = agent.conversation
    task = asyncio.ensure_future(conv.chat_to_completion("look it up"))
    await asyncio.wait_for(pause.reached.wait(), 10)
    conv.interrupt()
    resp = await task
    assert resp.finish_reason.value == "INTERRUPTED"
    calls = conv.tool_calls_df()
    assert calls["status"].tolist() == ["CANCELED"] and calls["approval"].tolist() == ["canceled"]
    assert conv.turns[0].tool_calls == 1
    assert_history_valid(conv.connection.session)


def test_an_interrupt_before_the_model_says_anything_ends_the_turn():
    """Interrupting as the turn starts (the kernel's Interrupt right after Run) must not hang it."""
    provider = ScriptedProvider([text_call("never shown"), text_call("second turn")])
    conv = Agent(model=provider).conversation

    def stop_at_the_prompt(event, step):
        if event == "step" and step.source.value == "USER":
            conv.interrupt()

    plumbing_of(conv).add_listener(stop_at_the_prompt)
    resp = conv.ask("hello")
    assert resp.finish_reason.value == "INTERRUPTED" and conv.turns[0].status == "interrupted"
    plumbing_of(conv).remove_listener(stop_at_the_prompt)
    again = conv.ask("again")  # the model was never called for the first turn
    assert again.text.strip() == "never shown" and again.finish_reason.value == "STOP"


async def test_an_interrupt_as_tools_start_closes_every_call():
    @tool
    def slow(n: int) -> str:
        """Takes its time."""
        return str(n)

    provider = ScriptedProvider([tool_call(*[(f"s{i}", "slow", {"n": i}) for i in range(3)]), text_call("unused")])
    conv = Agent(model=provider, tools=[slow]).conversation

    def stop_at_the_first_tool(event, step):
        if event == "step" and step.source.value == "SYSTEM" and step.tool_calls:
            conv.interrupt()

    plumbing_of(conv).add_listener(stop_at_the_first_tool)
    resp = await asyncio.wait_for(conv.chat_to_completion("run three"), 30)  # a guard against a hang
    assert resp.finish_reason.value == "INTERRUPTED"
    statuses = conv.tool_calls_df()["status"].tolist()
    assert len(statuses) == 3 and "pending" not in statuses
    assert_history_valid(conv.connection.session)


def test_a_tool_returning_an_int_past_the_digit_limit_sends_readable_text():
    @tool
    def power(n: int) -> dict:
        """7 to the power n."""
        return {"value": 7**n, "n": n}

    provider = ScriptedProvider([tool_call(("c1", "power", {"n": 6000})), text_call("done")])
    Agent(model=provider, tools=[power]).ask("what is 7**6000?")
    result = provider.requests[1].messages[-1].parts[0]
    assert isinstance(result, ToolResultPart) and not result.is_error
    assert "object at 0x" not in result.content and '"n": 6000' in result.content
    assert "an integer of 5,071 digits" in result.content and "e+5070" in result.content
    assert f"ending …{7**6000 % 10**20:020d}" in result.content


def test_a_prompt_too_long_for_a_known_window_is_refused_before_sending(tmp_path):
    provider = ScriptedProvider([text_call("fine")], context_window=100_000)
    agent = Agent(model=provider)
    with pytest.raises(NbagentError) as err:
        agent.ask("x" * 5_000_000)
    assert err.value.kind == "context_length" and "100,000" in str(err.value)
    assert provider.requests == []  # nothing was sent
    conv = agent.conversation
    assert conv.turns[-1].status.value == "error" and "too long" in conv.turns[-1].error
    assert agent.ask("hello").text == "fine"  # the conversation goes on without the refused prompt
    assert [m.role for m in provider.requests[-1].messages] == ["user"]
    unknown = ScriptedProvider([text_call("sent")], context_window=None)
    assert Agent(model=unknown).ask("x" * 500_000).text == "sent"  # window unknown: the server decides


def test_hung_sync_tool_threads_are_bounded_with_a_clear_error(monkeypatch):
    from nbagent.loop import tool_threads

    monkeypatch.setattr(tool_threads, "MAX_ABANDONED_THREADS", 4)
    release = threading.Event()

    @tool(timeout=0.1)
    def hang(i: int) -> str:
        """Never returns in time."""
        release.wait(30)
        return "late"

    calls = [tool_call(*[(f"a{i}", "hang", {"i": i}) for i in range(5)]), text_call("first"),
             tool_call(*[(f"b{i}", "hang", {"i": i}) for i in range(3)]), text_call("second")]
    agent = Agent(model=ScriptedProvider(calls), tools=[hang])
    try:
        agent.ask("hang five")
        assert sum(tool_threads.stuck_tools().values()) == 5
        before = threading.active_count()
        agent.ask("hang three more")
        results = [s for s in agent.conversation.history if s.tool_calls and s.source.value == "SYSTEM"]
        refused = [s for s in results if "TooManyHungTools" in s.content]
        assert len(refused) == 3 and all(s.status.value == "ERROR" for s in refused)
        assert "5 earlier tool calls timed out and their threads still run (at most 4)" in refused[0].content
        assert threading.active_count() <= before  # no thread was started for them
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while tool_threads.stuck_tools() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not tool_threads.stuck_tools()  # released threads end and free their places


# --- issue 22, 9. a silent server means silence ------------------------------------------------


def test_a_conversation_records_each_retry_on_its_model_step_and_the_answer_follows():
    from nbagent.providers.openai_chat import OpenAIProvider
    from support.fault_server import FaultServer, reply, silent, sse
    from support.wires import OPENAI_WIRE

    with FaultServer() as server:
        server.push(reply(503, OPENAI_WIRE.error_body(503, "overloaded")), silent(0.0),  # a hang-up, no reply
                    sse(OPENAI_WIRE.text_body(["finally"])))
        provider = OpenAIProvider("gpt-fault", base_url=server.url + "/v1", api_key="sk-test-0123456789abcdef",
                                  retry_base_delay=0.01, max_retries=2)
        conv = Agent(provider).conversation

        async def run() -> list:
            await conv.send("hi")
            return [step async for step in conv.receive_steps()]

        updates = asyncio.run(run())
    model = [s for s in updates if s.is_model_call]
    notices = [s.notice for s in model if s.notice]
    shown = list(dict.fromkeys(notices))  # each distinct notice, in the order the updates carried them
    assert len(shown) == 2 and shown[0].endswith("2 of 3") and shown[1].endswith("3 of 3")
    assert shown[1].startswith("could not reach 127.0.0.1")
    firsts = [next(s for s in model if s.notice == n) for n in shown]
    assert all(not s.content and s.status == StepStatus.ACTIVE for s in firsts)  # shown while it waited
    assert conv.turns[-1].status == "done" and model[-1].content.strip() == "finally"
    saved = model[-1].to_dict(compact=True)
    assert type(model[-1]).from_dict(saved).notice == shown[1]  # kept with the step, as saved
