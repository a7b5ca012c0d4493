"""Replay for teaching (issue #21 item 5): ``model="replay:PATH"`` streams a recorded lesson again.

A lesson is recorded through the real agent loop (a scripted provider with thinking, a tool call
and usage, or the demo model) into a session file; the replay runs through the same loop offline.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.scripted import ScriptedProvider, text_call, tool_call
from support.waiting import until as wait_until

from nbagent import Agent, Conversation, NbagentError, Text, Thought, ToolCall, tool
from nbagent.providers.demo import DemoProvider
from nbagent.providers.replay import DEFAULT_SPEED, END_OF_RECORDING, ReplayProvider
from nbagent.core.conversation_state import plumbing_of

RUNS: list[str] = []


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    RUNS.append(city)
    return f"Sunny in {city} today"


@tool
def broken(x: int) -> int:
    """Always fails."""
    raise ValueError("no such x")


def record(tmp_path: Path) -> Path:
    """A two-turn lesson: thinking, a tool call and its result, an answer; then a plain answer."""
    provider = ScriptedProvider([
        tool_call(("call_w", "lookup", {"city": "Paris"}), usage=(30, 8)),
        text_call("Paris is sunny today.", usage=(50, 6), thinking="The tool says sunny."),
        text_call("You are welcome!", usage=(60, 4), thinking="Polite reply."),
    ])
    agent = Agent(model=provider, tools=[lookup], save_to=tmp_path / "lesson")
    agent.ask("Weather in Paris?")
    agent.ask("Thanks!")
    RUNS.clear()
    return agent.session_path


def turn_summary(conv):
    return [(s.turn, s.source.value, s.target.value, s.thinking, s.content, [c.name for c in s.tool_calls],
             s.usage_metadata) for s in conv.history]


def test_a_replay_gives_the_recorded_turns_without_running_the_tools(tmp_path):
    path = record(tmp_path)
    original = Conversation.load(path)
    replay = Agent(model=f"replay:{path}", speed=None, tools=[lookup])
    for prompt in ("Weather in Paris?", "Thanks!"):
        replay.ask(prompt)
    assert RUNS == []  # the recorded result was given back; lookup never ran
    assert turn_summary(replay.conversation) == turn_summary(original)
    got, want = replay.conversation.usage_df(), original.usage_df()
    assert got["input_tokens"].tolist() == want["input_tokens"].tolist() == [80, 60]
    assert replay.conversation.tool_calls_df()["result_preview"].tolist() == ["Sunny in Paris today"]
    assert replay.provider.notes == []


async def test_the_stream_has_thoughts_text_and_tool_calls_in_order(tmp_path):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None)
    kinds = [type(c).__name__ async for c in replay.chat("Weather in Paris?")]
    assert kinds.index("ToolCall") < kinds.index("Thought") < kinds.index("Text")
    chunks = [c async for c in replay.chat("Thanks!")]
    assert "".join(c.text for c in chunks if isinstance(c, Thought)) == "Polite reply."
    assert "".join(c.text for c in chunks if isinstance(c, Text)).strip() == "You are welcome!"
    assert not any(isinstance(c, ToolCall) for c in chunks)


def test_rerun_tools_runs_the_agents_own_tools(tmp_path):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None, rerun_tools=True, tools=[lookup])
    replay.ask("Weather in Paris?")
    assert RUNS == ["Paris"]


def test_a_different_prompt_is_noted_and_the_replay_goes_on(tmp_path):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None)
    resp = replay.ask("What about Rome?")
    assert resp.text.strip() == "Paris is sunny today."
    assert "the recording answers the prompt \u201cWeather in Paris?\u201d" in resp.thinking
    [note] = replay.provider.notes
    assert (note.turn, note.recorded_prompt, note.prompt) == (0, "Weather in Paris?", "What about Rome?")
    assert replay.ask("Thanks!").text.strip() == "You are welcome!"
    assert replay.ask("One more?").text == END_OF_RECORDING  # past the end: said, not a crash


def test_recorded_tool_errors_come_back_as_errors(tmp_path):
    agent = Agent(model="demo", delay=0, tools=[broken], save_to=tmp_path)
    agent.ask("call broken please")
    replay = Agent(model=f"replay:{agent.session_path}", speed=None)
    replay.ask("call broken please")
    calls = replay.conversation.tool_calls_df()
    assert calls["status"].tolist() == ["ERROR"] and "no such x" in calls["error"].iloc[0]


def test_two_replays_are_identical(tmp_path):
    agent = Agent(model="demo", delay=0, tools=[lookup], save_to=tmp_path)
    agent.ask("lookup Paris")
    agent.ask("Explain monads")
    runs = []
    for _ in range(2):
        replay = Agent(model=f"replay:{agent.session_path}", speed=None)
        replay.ask("lookup Paris")
        replay.ask("Explain monads")
        runs.append(turn_summary(replay.conversation))
    assert runs[0] == runs[1] == turn_summary(agent.conversation)


def test_speed_and_a_missing_recording(tmp_path):
    path = record(tmp_path)
    assert ReplayProvider(str(path)).speed == DEFAULT_SPEED
    assert Agent(model=f"replay:{path}", speed=None).provider.speed is None  # instant, not the default
    for bad in (0, -3, "fast", True):
        with pytest.raises(NbagentError) as err:
            Agent(model=f"replay:{path}", speed=bad)
        assert err.value.kind == "config"
    with pytest.raises(NbagentError) as err:
        Agent(model=f"replay:{tmp_path / 'nope.json'}")
    assert err.value.kind == "io" and "nope.json" in str(err.value)
    with pytest.raises(NbagentError) as err:
        Agent(model="replay:")
    assert err.value.kind == "config"


async def test_step_mode_waits_for_next_before_each_model_call(tmp_path):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None, step=True)
    provider, conv = replay.provider, replay.conversation
    task = asyncio.ensure_future(conv.chat_to_completion("Weather in Paris?"))
    await wait_until(lambda: provider.waiting, "waiting before the first call")
    assert not any(s.content or s.thinking or s.tool_calls for s in conv.history[1:])  # nothing played yet
    provider.next_step()
    assert not provider.waiting  # released at once: a Next button hides without waiting for the replay to wake
    await wait_until(lambda: provider.waiting and any(s.content == "Sunny in Paris today" for s in conv.history),
                     "the tool call ran, waiting again")
    assert conv.history[1].tool_calls[0].name == "lookup"
    assert not task.done() and "Paris is sunny" not in "".join(s.content for s in conv.history)
    provider.next_step()
    resp = await task
    assert resp.text.strip() == "Paris is sunny today." and not provider.waiting
    provider.next_step()  # pressed early: the next call goes at once
    assert (await conv.chat_to_completion("Thanks!")).text.strip() == "You are welcome!"


async def test_stop_while_waiting_ends_the_turn(tmp_path):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None, step=True)
    task = asyncio.ensure_future(replay.conversation.chat_to_completion("Weather in Paris?"))
    await wait_until(lambda: replay.provider.waiting, "waiting")
    replay.conversation.interrupt()
    resp = await task
    assert resp.finish_reason.value == "INTERRUPTED" and not replay.provider.waiting


def test_a_replay_costs_nothing_and_names_the_recorded_model(tmp_path):
    provider = ScriptedProvider([text_call("Hello there.", usage=(1000, 500))])
    provider.name, provider.model = "openai", "gpt-4.1-mini"
    agent = Agent(model=provider, save_to=tmp_path)
    agent.ask("Hi")
    assert agent.conversation.usage_df()["cost_usd"].iloc[0] > 0
    replay = Agent(model=f"replay:{agent.session_path}", speed=None, budget_usd=0.0)
    replay.ask("Hi")  # a zero budget: a replay spends nothing
    row = replay.conversation.usage_df().iloc[0]
    assert (row["model"], row["provider"], row["cost_usd"]) == ("gpt-4.1-mini", "replay", 0.0)


# --- a replay a class can follow (issue #34 item 4): the counter, a differing prompt, continue or live ---

async def test_the_counter_counts_recorded_model_calls_as_they_play(tmp_path):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None, step=True)
    provider, conv = replay.provider, replay.conversation
    assert (provider.status.step, provider.status.steps, provider.status.waiting) == (0, 3, False)
    task = asyncio.ensure_future(conv.chat_to_completion("Weather in Paris?"))
    seen = []
    for _ in range(2):
        await wait_until(lambda: provider.waiting, "waiting for Next")
        seen.append((provider.status.step, provider.status.waiting))
        provider.next_step()
    await task
    assert seen == [(0, True), (1, True)] and provider.status.step == 2
    provider.next_step()
    await conv.chat_to_completion("Thanks!")
    assert (provider.status.step, provider.status.steps) == (3, 3)
    provider.next_step()
    assert (await conv.chat_to_completion("More?")).text == END_OF_RECORDING
    assert provider.status.step == 3  # past the end: no step was played


async def test_a_differing_prompt_waits_for_the_choice_before_anything_plays(tmp_path):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None, step=True)
    provider, conv = replay.provider, replay.conversation
    task = asyncio.ensure_future(conv.chat_to_completion("What about Rome?"))
    await wait_until(lambda: provider.status.mismatch is not None, "the mismatch notice")
    m = provider.status.mismatch
    assert (m.turn, m.recorded_prompt, m.prompt) == (0, "Weather in Paris?", "What about Rome?")
    assert m.live == "" and "live=" in m.live_unavailable  # no live model: the option says why
    assert not provider.waiting and not any(s.content or s.tool_calls for s in conv.history[1:])
    with pytest.raises(NbagentError, match="cannot answer live"):
        provider.choose("live")
    with pytest.raises(NbagentError, match="'continue' or 'live'"):
        provider.choose("skip")
    provider.choose("continue")
    assert provider.status.mismatch is None
    for _ in range(2):
        await wait_until(lambda: provider.waiting, "waiting for Next")
        provider.next_step()
    resp = await task
    assert resp.text.strip() == "Paris is sunny today." and provider.status.step == 2
    assert [n.prompt for n in provider.notes] == ["What about Rome?"]
    with pytest.raises(NbagentError, match="not asking"):
        provider.choose("continue")


@pytest.mark.parametrize("typed", ["weather in paris?", "  Weather   in\nParis? ", "WEATHER IN PARIS?"])
async def test_whitespace_and_case_are_no_difference(tmp_path, typed):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None, on_mismatch="ask")
    resp = await replay.conversation.chat_to_completion(typed)  # would wait forever if it asked
    assert resp.text.strip() == "Paris is sunny today." and replay.provider.notes == []


async def test_answer_live_asks_the_live_model_and_keeps_the_recorded_turn(tmp_path):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None, step=True, live=DemoProvider("demo", delay=0))
    provider, conv = replay.provider, replay.conversation
    task = asyncio.ensure_future(conv.chat_to_completion("Explain monads"))
    await wait_until(lambda: provider.status.mismatch is not None, "the mismatch notice")
    assert provider.status.mismatch.live == "demo:demo" and provider.status.mismatch.live_unavailable == ""
    provider.choose("live")
    resp = await task
    assert "monad" in resp.text.lower() and "Paris" not in resp.text  # the demo model answered, not the recording
    assert [s.model for s in conv.history if s.source.value == "MODEL" and s.turn == 0] == ["demo"]
    assert provider.status.step == 0 and provider.notes == []  # no recorded step was used up
    provider.next_step()
    provider.next_step()
    assert (await conv.chat_to_completion("Weather in Paris?")).text.strip() == "Paris is sunny today."


def test_on_mismatch_continue_or_live_without_asking_and_bad_settings(tmp_path):
    path = record(tmp_path)
    assert Agent(model=f"replay:{path}", speed=None).provider.on_mismatch.value == "continue"  # as before
    assert Agent(model=f"replay:{path}", speed=None, step=True).provider.on_mismatch.value == "ask"
    assert Agent(model=f"replay:{path}", live="demo").provider.live_name == "demo:demo"  # a model string works too
    live = Agent(model=f"replay:{path}", speed=None, live=DemoProvider("demo", delay=0), on_mismatch="live")
    assert "Paris" not in live.ask("Explain monads").text
    for bad in ({"on_mismatch": "live"}, {"on_mismatch": "maybe"}, {"live": "replay:other.json"}, {"live": ""}):
        with pytest.raises(NbagentError) as err:
            Agent(model=f"replay:{path}", **bad)
        assert err.value.kind == "config"


async def test_stop_while_the_notice_waits_ends_the_turn(tmp_path):
    path = record(tmp_path)
    replay = Agent(model=f"replay:{path}", speed=None, step=True)
    task = asyncio.ensure_future(replay.conversation.chat_to_completion("What about Rome?"))
    await wait_until(lambda: replay.provider.status.mismatch is not None, "the notice")
    replay.conversation.interrupt()
    resp = await task
    assert resp.finish_reason.value == "INTERRUPTED" and replay.provider.status.mismatch is None


# --- #48 rough edges: what the chat calls a replay -------------------------------------------------


def test_the_chat_names_a_replay_readably_and_draws_no_model_switch_between_its_turns(tmp_path):
    """The chat showed the session file's path as the model and, at each new turn, a divider
    "Model switched: replay:demo → replay:lesson7/….json" (the running turn's model is the file until
    the recorded model's answer comes)."""
    pytest.importorskip("anywidget")
    from nbagent.notebook.widget_usage import current_model
    from nbagent.notebook.turn_codec import record_dict

    lesson = Agent(model="demo", delay=0, save_to=tmp_path / "lesson7")
    lesson.ask("Hello")
    lesson.ask("What is 2 + 2?")
    replay = Agent(model=f"replay:{lesson.session_path}", speed=None)
    conv = replay.conversation
    shown: list[tuple[int, str]] = []  # (turn, the model the chat's record says), at every step
    plumbing_of(conv).add_listener(lambda event, _: shown.append((conv.turns[-1].turn, record_dict(conv.turns[-1])["model"]))
                               if event == "step" and conv.turns else None)
    for prompt in ("Hello", "What is 2 + 2?", "one more"):  # the third is past the recording's end
        replay.ask(prompt)
    labels = {model for _, model in shown}
    assert not any(".json" in m or "/" in m for m in labels), labels  # never the path
    assert labels <= {"", "demo"}, labels  # unknown until the recorded answer says, then the recorded model
    assert [record_dict(t)["model"] for t in conv.turns] == ["demo", "demo", "demo"]  # no switch anywhere
    assert current_model(conv) == f"replay of {Path(lesson.session_path).stem}"  # the gauge's label
