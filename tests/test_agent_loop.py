"""The agent loop end to end through Agent/Conversation: tools, approval, manual mode, interrupt, hooks."""

from __future__ import annotations

import asyncio
import threading

import pytest

from nbagent import Agent, ApprovalDecision, FinishReason, NbagentError, StepSource, StepStatus, StepTarget, StepType, Text, ToolCall, tool
from nbagent.loop.hooks import Block, Hooks
from nbagent.core.messages import ThinkingPart, ToolResultPart
from nbagent.providers.base import Finish, TextDelta, ToolCallEnd, ToolCallStart

from support.scripted import Pause, ScriptedProvider, assert_history_valid, text_call, tool_call
from support.waiting import wait_for


def env_steps(conv):
    return [s for s in conv.history if s.target == StepTarget.ENVIRONMENT and s.type == StepType.TOOL_CALL]


async def test_two_parallel_tool_calls_run_concurrently():
    both_started = asyncio.Event()
    started = []

    @tool
    async def wait_for_peer(name: str) -> str:
        """Waits until the other call has started too."""
        started.append(name)
        if len(started) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 5)  # deadlocks if run one after the other
        return f"done {name}"

    provider = ScriptedProvider([
        tool_call(("a", "wait_for_peer", {"name": "A"}), ("b", "wait_for_peer", {"name": "B"})),
        text_call("both done"),
    ])
    agent = Agent(model=provider, tools=[wait_for_peer])
    resp = await agent.conversation.chat_to_completion("go")
    assert resp.text.strip() == "both done"
    results = {s.tool_calls[0].id: s.content for s in env_steps(agent.conversation)}
    assert results == {"a": "done A", "b": "done B"}
    sent = provider.requests[1].messages[-1]
    assert [r.tool_use_id for r in sent.tool_results] == ["a", "b"]  # one user message, call order
    assert agent.conversation.turns[0].tool_calls == 2 and agent.conversation.turns[0].model_calls == 2
    assert_history_valid(agent.conversation.connection.session)


async def test_ask_policy_deny_and_approve():
    ran = []

    @tool
    def delete_file(path: str) -> str:
        """Deletes a file."""
        ran.append(path)
        return "deleted"

    provider = ScriptedProvider([
        tool_call(("d1", "delete_file", {"path": "/etc/passwd"})), text_call("ok, not deleted"),
        tool_call(("d2", "delete_file", {"path": "tmp.txt"})), text_call("deleted it"),
    ])
    agent = Agent(model=provider, tools=[delete_file], policy="ask")
    conv = agent.conversation

    async def decide(call_id, allow):
        while True:
            waiting = [s for s in env_steps(conv) if s.status == StepStatus.WAITING_FOR_USER]
            if waiting:
                assert waiting[0].tool_calls[0].id == call_id
                conv.approve(call_id) if allow else conv.deny(call_id, "too dangerous")
                return
            await asyncio.sleep(0.01)

    decider = asyncio.ensure_future(decide("d1", False))
    await conv.chat_to_completion("delete passwd")
    await decider
    assert ran == []
    denied = env_steps(conv)[-1]
    assert denied.approval == ApprovalDecision.DENIED and "denied" in denied.content and "too dangerous" in denied.content
    result = provider.requests[1].messages[-1].tool_results[0]
    assert result.is_error and "denied" in result.content

    decider = asyncio.ensure_future(decide("d2", True))
    await conv.chat_to_completion("delete tmp")
    await decider
    assert ran == ["tmp.txt"] and env_steps(conv)[-1].approval == ApprovalDecision.APPROVED
    assert_history_valid(conv.connection.session)


async def test_requires_approval_asks_even_under_allow_all_and_approve_from_another_thread():
    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pays."""
        return f"paid {amount}"

    provider = ScriptedProvider([tool_call(("p", "pay", {"amount": 5})), text_call("paid")])
    agent = Agent(model=provider, tools=[pay])
    conv = agent.conversation

    def approver():
        wait_for(lambda: any(s.status == StepStatus.WAITING_FOR_USER for s in env_steps(conv)), "the call waiting")
        conv.approve("p")

    t = threading.Thread(target=approver)
    t.start()
    await conv.chat_to_completion("pay")
    t.join()
    assert env_steps(conv)[-1].content == "paid 5"


async def test_deny_all_and_callable_policies():
    @tool
    def f(x: int) -> int:
        """Echo."""
        return x

    provider = ScriptedProvider([tool_call(("1", "f", {"x": 1}), ("2", "f", {"x": 2})), text_call("done")])
    agent = Agent(model=provider, tools=[f], policy=lambda call: call.args["x"] == 2)
    await agent.conversation.chat_to_completion("go")
    by_id = {s.tool_calls[0].id: s for s in env_steps(agent.conversation)}
    assert by_id["1"].approval == ApprovalDecision.POLICY_DENIED and by_id["2"].content == "2"

    provider = ScriptedProvider([tool_call(("1", "f", {"x": 1})), text_call("done")])
    agent = Agent(model=provider, tools=[f], policy="deny_all")
    await agent.conversation.chat_to_completion("go")
    assert env_steps(agent.conversation)[0].approval == ApprovalDecision.POLICY_DENIED


async def test_manual_mode_round_trip():
    @tool
    def lookup(q: str) -> str:
        """Looks up."""
        raise AssertionError("manual mode must not run tools")

    provider = ScriptedProvider([tool_call(("m1", "lookup", {"q": "x"})), text_call("the answer is 42")])
    agent = Agent(model=provider, tools=[lookup], auto_execute_tools=False)
    conv = agent.conversation
    chunks = [c async for c in conv.chat("find x")]
    assert ToolCall("m1", "lookup", {"q": "x"}) in chunks
    waiting = env_steps(conv)[0]
    assert waiting.status == StepStatus.WAITING_FOR_USER
    assert conv.turns[0].status == "waiting" and conv.turns[0].finish_reason == "TOOL_CALLS"
    with pytest.raises(NbagentError, match="still waiting"):
        await conv.chat_to_completion("")
    conv.add_tool_result("m1", {"value": 42})
    assert env_steps(conv)[0].status == StepStatus.DONE
    resp = await conv.chat_to_completion("")
    assert "42" in resp.text
    sent = provider.requests[1].messages[-1].tool_results[0]
    assert sent.tool_use_id == "m1" and '"value": 42' in sent.content
    assert_history_valid(conv.connection.session)


async def test_tool_exception_and_invalid_args_become_error_results_and_turn_goes_on():
    @tool
    def div(a: int, b: int) -> float:
        """Divides."""
        return a / b

    provider = ScriptedProvider([
        tool_call(("1", "div", {"a": 1, "b": 0}), ("2", "div", {"a": "x", "b": 1}), ("3", "nope", {})),
        text_call("sorry"),
    ])
    agent = Agent(model=provider, tools=[div])
    resp = await agent.conversation.chat_to_completion("divide")
    assert resp.finish_reason == FinishReason.STOP
    results = {r.tool_use_id: r for r in provider.requests[1].messages[-1].tool_results}
    assert results["1"].is_error and "ZeroDivisionError" in results["1"].content
    assert results["2"].is_error and "Invalid arguments" in results["2"].content
    assert results["3"].is_error and "Unknown tool" in results["3"].content
    assert all(s.status == StepStatus.ERROR for s in env_steps(agent.conversation))


async def test_max_tool_iterations_ends_the_turn_with_a_message():
    @tool
    def again() -> str:
        """Loops."""
        return "again"

    provider = ScriptedProvider([tool_call((f"c{i}", "again", {})) for i in range(3)])
    agent = Agent(model=provider, tools=[again], max_tool_iterations=2)
    resp = await agent.conversation.chat_to_completion("loop")
    assert resp.finish_reason == FinishReason.OTHER
    finish = agent.conversation.history[-1]
    assert finish.type == StepType.FINISH and "max_tool_iterations=2" in finish.content
    assert_history_valid(agent.conversation.connection.session)


async def test_interrupt_mid_text_keeps_partial_text_and_conversation_usable():
    pause = Pause()
    provider = ScriptedProvider([
        [TextDelta("Hello "), TextDelta("wor"), pause, TextDelta("ld")],
        text_call("next turn works"),
    ])
    agent = Agent(model=provider)
    conv = agent.conversation
    texts = []
    async for chunk in conv.chat("hi"):
        if isinstance(chunk, Text):
            texts.append(chunk.text)
        if len(texts) == 2:
            await pause.reached.wait()
            threading.Thread(target=conv.interrupt).start()  # from another thread
    assert "".join(texts) == "Hello wor"
    model_step = [s for s in conv.history if s.source == StepSource.MODEL][0]
    assert model_step.status == StepStatus.CANCELED and model_step.content == "Hello wor"
    assert conv.history[-1].finish_reason == FinishReason.INTERRUPTED
    assert conv.turns[0].status == "interrupted"
    resp = await conv.chat_to_completion("again")
    assert resp.text.strip() == "next turn works"
    assert provider.requests[1].messages[1].text == "Hello wor"  # partial answer kept for the model
    assert_history_valid(conv.connection.session)


async def test_interrupt_mid_tool_call_closes_dangling_calls():
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Takes forever."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    provider = ScriptedProvider([tool_call(("s1", "slow", {})), text_call("fine")])
    agent = Agent(model=provider, tools=[slow])
    conv = agent.conversation

    async def stopper():
        await started.wait()
        conv.interrupt()

    s = asyncio.ensure_future(stopper())
    resp = await conv.chat_to_completion("run slow")
    await s
    assert resp.finish_reason == FinishReason.INTERRUPTED
    tool_step = env_steps(conv)[0]
    assert tool_step.status == StepStatus.CANCELED
    session = conv.connection.session
    assert session.messages[-1].tool_results[0].tool_use_id == "s1"
    assert_history_valid(session)
    assert (await conv.chat_to_completion("go on")).text.strip() == "fine"
    assert conv.is_idle()


async def test_interrupt_while_waiting_for_approval():
    @tool
    def risky() -> str:
        """Risky."""
        return "ran"

    provider = ScriptedProvider([tool_call(("r", "risky", {}))])
    agent = Agent(model=provider, tools=[risky], policy="ask")
    conv = agent.conversation

    async def stopper():
        while not any(s.status == StepStatus.WAITING_FOR_USER for s in env_steps(conv)):
            await asyncio.sleep(0.01)
        conv.interrupt()

    s = asyncio.ensure_future(stopper())
    resp = await conv.chat_to_completion("go")
    await s
    assert resp.finish_reason == FinishReason.INTERRUPTED
    assert_history_valid(conv.connection.session)


async def test_hooks_rewrite_block_modify_and_report_errors():
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    seen = []
    hooks = Hooks(
        on_user_prompt=lambda p: Block("no swearing") if "darn" in p else p.upper(),
        pre_tool_use=lambda call: {"text": call.args["text"] + "!"} if call.id == "1" else Block("not this one"),
        post_tool_use=lambda call, text: seen.append(text) or f"<{text}>",
    )
    provider = ScriptedProvider([tool_call(("1", "echo", {"text": "a"}), ("2", "echo", {"text": "b"})),
                                 text_call("ok")])
    agent = Agent(model=provider, tools=[echo], hooks=hooks)
    conv = agent.conversation
    await conv.chat_to_completion("shout")
    assert provider.requests[0].messages[0].text == "SHOUT"
    results = {r.tool_use_id: r.content for r in provider.requests[1].messages[-1].tool_results}
    assert results == {"1": "<a!>", "2": "Blocked: not this one"} and seen == ["a!"]

    resp = await conv.chat_to_completion("darn it")
    assert "blocked" in conv.history[-1].content.lower() and len(provider.requests) == 2
    assert resp.finish_reason == FinishReason.OTHER

    bad = Agent(model=ScriptedProvider([text_call("x")]), hooks={"on_user_prompt": lambda p: 1 / 0})
    with pytest.raises(NbagentError, match="on_user_prompt hook failed"):
        await bad.conversation.chat_to_completion("x")


async def test_compaction_step_is_recorded_when_prompt_exceeds_budget():
    provider = ScriptedProvider([text_call("a" * 10), text_call("b" * 10), text_call("c")])
    agent = Agent(model=provider, compaction_budget=300)
    conv = agent.conversation
    await conv.chat_to_completion("x" * 800)
    await conv.chat_to_completion("y" * 800)
    await conv.chat_to_completion("z")
    comps = [s for s in conv.history if s.type == StepType.COMPACTION]
    assert comps and conv.compaction_indices
    assert conv.history[conv.compaction_indices[0]].type == StepType.COMPACTION
    assert comps[0].compaction.tokens_after < comps[0].compaction.tokens_before
    assert_history_valid(conv.connection.session)


async def test_thinking_is_kept_with_signature_but_not_as_text():
    provider = ScriptedProvider([text_call("answer", thinking="secret plan"), text_call("two")])
    agent = Agent(model=provider)
    resp = await agent.conversation.chat_to_completion("q")
    assert resp.thinking == "secret plan"
    await agent.conversation.chat_to_completion("q2")
    assistant = provider.requests[1].messages[1]
    assert assistant.text.strip() == "answer"
    assert isinstance(assistant.parts[0], ThinkingPart) and assistant.parts[0].provider_details["signature"] == "sig"


async def test_provider_error_mid_stream_keeps_partial_text_and_raises():
    provider = ScriptedProvider([[TextDelta("part"), NbagentError("reset", kind="network")], text_call("ok")])
    agent = Agent(model=provider)
    conv = agent.conversation
    with pytest.raises(NbagentError) as info:
        await conv.chat_to_completion("x")
    assert info.value.kind == "network"
    step = [s for s in conv.history if s.source == StepSource.MODEL][0]
    assert step.status == StepStatus.ERROR and step.content == "part" and "reset" in step.error
    assert (await conv.chat_to_completion("retry")).text.strip() == "ok"
    assert_history_valid(conv.connection.session)


def test_agent_ask_from_a_thread_and_in_a_loop():
    agent = Agent(model="demo")
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", agent.ask("hello")))
    t.start(); t.join()
    assert "demo model" in box["r"].text

    async def inside():
        return agent.ask("again")

    assert "demo model" in asyncio.run(inside()).text


async def test_demo_model_exercises_every_kind_of_step():
    @tool
    def calculator(expression: str) -> float:
        """Evaluates an arithmetic expression."""
        return eval(expression, {"__builtins__": {}})  # test-only

    agent = Agent(model="demo", tools=[calculator])
    conv = agent.conversation
    chunks = [c async for c in conv.chat("What is 12 * 7?")]
    kinds = {type(c).__name__ for c in chunks}
    assert kinds == {"Thought", "Text", "ToolCall"}
    assert env_steps(conv)[0].content == "84"
    assert "84" in conv.last_response
    usage = conv.last_turn_usage
    assert usage.prompt_token_count > 0 and usage.candidates_token_count > 0 and usage.thoughts_token_count > 0
    plain = await conv.chat_to_completion("Tell me about monads")
    assert "demo" in plain.text and not plain.tool_calls


def test_unknown_model_and_bad_policy_are_config_errors():
    with pytest.raises(NbagentError) as info:
        Agent(model="nosuch:thing")
    assert info.value.kind == "config"
    with pytest.raises(NbagentError):
        Agent(model="demo", policy="sometimes")


def test_model_none_uses_env_var(monkeypatch):
    monkeypatch.setenv("NBAGENT_MODEL", "demo")
    assert Agent().model == "demo:demo"


async def test_breaking_out_of_chat_stops_the_turn_and_frees_the_connection():
    provider = ScriptedProvider([[TextDelta(f"w{i} ") for i in range(100)], text_call("after")])
    agent = Agent(model=provider)
    conv = agent.conversation
    async for chunk in conv.chat("long"):
        break
    assert (await conv.chat_to_completion("next")).text.strip() == "after"
    assert conv.turns[0].status == "interrupted" and conv.turns[1].status == "done"
    assert conv.is_idle()
    assert_history_valid(conv.connection.session)


async def test_a_prompt_while_a_held_stream_reads_the_turn_is_refused():
    provider = ScriptedProvider([[TextDelta(f"w{i} ") for i in range(100)], text_call("after")])
    conv = Agent(model=provider).conversation
    stream = conv.chat("long")
    await anext(stream)  # the caller keeps the stream: the turn is still theirs
    with pytest.raises(NbagentError, match="already running"):
        await conv.chat_to_completion("two")
    await stream.aclose()
    assert (await conv.chat_to_completion("next")).text.strip() == "after"
    assert [t.status for t in conv.turns] == ["interrupted", "done"]


async def test_resume_a_saved_conversation(tmp_path):
    agent = Agent(model=ScriptedProvider([text_call("My name is Ada.")]))
    await agent.conversation.chat_to_completion("remember Ada")
    path = agent.conversation.save(tmp_path / "s.json")
    provider = ScriptedProvider([text_call("You are Ada.")])
    resumed = Agent(model=provider, resume=path)
    conv = resumed.conversation
    assert conv.turn_count == 1 and conv.history[0].content == "remember Ada"
    await conv.chat_to_completion("who am I?")
    sent = provider.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "user"] and "Ada" in sent[1].text
    indices = [s.step_index for s in conv.history]
    assert len(indices) == len(set(indices))  # new steps continue the trajectory
    assert conv.turn_count == 2 and conv.total_usage.total_token_count == 30


async def test_structured_output_lands_on_the_step_and_the_response():
    from dataclasses import dataclass

    @dataclass
    class City:
        name: str
        population: int

    agent = Agent(model="demo", response_format=City)
    resp = await agent.conversation.chat_to_completion("Largest city?")
    assert resp.structured_output == {"name": "demo", "population": 0}
    assert agent.conversation.history[1].structured_output == resp.structured_output
    schema = agent.conversation.connection.response_format
    assert schema["title"] == "City" and set(schema["properties"]) == {"name", "population"}


async def test_include_reasoning_false_hides_thoughts():
    agent = Agent(model="demo", include_reasoning=False)
    chunks = [c async for c in agent.conversation.chat("hi")]
    assert chunks and not any(type(c).__name__ == "Thought" for c in chunks)


async def test_new_conversation_gets_its_own_provider_and_history():
    agent = Agent(model="demo")
    first = agent.conversation
    await first.chat_to_completion("one")
    first_provider = agent.provider
    second = agent.new_conversation()
    assert agent.conversation is second and second is not first
    assert agent.provider is not first_provider and second.turn_count == 0
    await first.disconnect()
    assert (await second.chat_to_completion("two")).text


def test_model_none_falls_back_to_demo_with_a_notice(monkeypatch, capsys):
    import nbagent.providers.local as local

    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    monkeypatch.setattr(local, "local_runtime_available", lambda: False)
    agent = Agent()
    assert agent.model == "demo:demo"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "install-model" in err


def test_model_none_prefers_the_local_model_when_installed(monkeypatch):
    import nbagent.providers.local as local

    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    monkeypatch.setattr(local, "local_runtime_available", lambda: True)
    from nbagent.agent import default_model

    assert default_model() == "local"


def test_ctrl_c_during_ask_interrupts_the_turn_and_returns_the_partial_answer(ctrl_c):
    import os
    import signal

    pause = Pause()
    provider = ScriptedProvider([[TextDelta("partial "), pause, TextDelta("never")], text_call("next")])
    agent = Agent(model=provider)

    def press_ctrl_c():
        wait_for(pause.reached.is_set, "the stream parked at the pause")  # (never sent before: a hang, not a pass)
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C: wakes the blocked main thread

    threading.Thread(target=press_ctrl_c, daemon=True).start()
    resp = agent.ask("go")  # KeyboardInterrupt inside: the turn stops, nothing raises
    assert resp.finish_reason == FinishReason.INTERRUPTED and resp.text == "partial "
    assert agent.ask("again").text.strip() == "next"


async def test_a_second_prompt_while_a_turn_runs_is_refused_without_touching_the_first():
    pause = Pause()
    provider = ScriptedProvider([[TextDelta("first "), pause, TextDelta("done"), Finish(FinishReason.STOP, "stop")]])
    agent = Agent(model=provider)
    conv = agent.conversation
    running = asyncio.ensure_future(conv.chat_to_completion("one"))
    await pause.reached.wait()
    with pytest.raises(NbagentError, match="already running"):
        await conv.chat_to_completion("two")
    assert conv.turn_count == 1
    pause.release()
    assert (await running).text == "first done"
    assert conv.turns[0].status == "done"


async def test_a_stream_that_ends_without_finishing_is_a_protocol_error():
    provider = ScriptedProvider([[TextDelta("half an ans")], text_call("whole")])
    agent = Agent(model=provider)
    conv = agent.conversation
    with pytest.raises(NbagentError) as info:
        await conv.chat_to_completion("q")
    assert info.value.kind == "protocol"
    step = [s for s in conv.history if s.source == StepSource.MODEL][0]
    assert step.status == StepStatus.ERROR and step.content == "half an ans"
    assert (await conv.chat_to_completion("again")).text.strip() == "whole"
    assert_history_valid(conv.connection.session)


async def test_a_read_only_loaded_session_saves_again_without_losing_its_chat_history(tmp_path):
    import json

    from nbagent import Conversation

    agent = Agent(model=ScriptedProvider([text_call("kept")]))
    await agent.conversation.chat_to_completion("remember this")
    first = agent.conversation.save(tmp_path / "a.json")
    again = Conversation.load(first).save(tmp_path / "b.json")
    a, b = json.loads(first.read_text()), json.loads(again.read_text())
    assert a["chat_session"] == b["chat_session"] and b["chat_session"]["messages"]
    assert a["steps"] == b["steps"] and a["turns"] == b["turns"]


def test_a_prompt_step_takes_no_time_and_thoughts_of_two_calls_stay_apart():
    """history_df's duration_s is never negative on user steps; resp.thinking keeps one paragraph
    per model call (they ran together: '…{"expression": "12 * 7"}.The tool returned…')."""
    from nbagent import Agent, tool

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return "84"

    agent = Agent(model="demo", tools=[calculator])
    resp = agent.conversation.ask("What is 12 * 7?")
    first, second = [s.thinking for s in resp.steps if s.source.value == "MODEL" and s.thinking]
    assert resp.thinking == first + "\n\n" + second
    user = [s for s in agent.conversation.history if s.source.value == "USER"]
    assert user and all(s.finished_at == s.created_at for s in user)
    assert (agent.conversation.history_df()["duration_s"] >= 0).all()
