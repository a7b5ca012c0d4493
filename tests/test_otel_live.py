"""nbagent.trace_live: an agent's turns sent as OpenTelemetry GenAI spans as they end.

The spans a live agent sends are compared with what ``nbagent.to_otel`` sends for the session it
saved (the SDK's InMemorySpanExporter on both sides), sent over real HTTP to the OTLP/HTTP receiver
of tests/support/otlp_receiver.py, and sent through a user's own TracerProvider. Turns come from the
demo model with a calculator tool, and a failed turn from an OpenAI-format server on loopback that
refuses (tests/support/fault_server.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import textwrap
import threading

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.proto")  # the receiver decodes with it (it comes with the OTLP exporter)

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

import nbagent  # noqa: E402
from nbagent import Agent, ConfigError, Conversation, NbagentError, tool  # noqa: E402

from support.fault_server import reply, sse  # noqa: E402
from support.otlp_receiver import OtlpReceiver  # noqa: E402
from nbagent.core.conversation_state import plumbing_of  # noqa: E402

KEY = "sk-proj-otellive0123456789abcdefXYZ"


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return str(eval(expression, {"__builtins__": {}}))


PROMPTS = ["What is 6 * 7?", "Say hello", "What is 12 + 30?"]


def replayed(path, **kw):
    """What to_otel sends for the saved session at ``path``."""
    exporter = InMemorySpanExporter()
    nbagent.to_otel(path, exporter=exporter, **kw)
    return list(exporter.get_finished_spans())


def attributes(span) -> dict:
    """A span's attributes, without the saved file's path (a live turn has no file)."""
    return {k: v for k, v in span.attributes.items() if k != "nbagent.session.path"}


def parent(span):
    return None if span.parent is None else span.parent.span_id


def tree(spans) -> list:
    """Like :func:`shape` for spans whose ids a TracerProvider made: by start time, each parent named by
    its position."""
    spans = sorted(spans, key=lambda s: s.start_time)
    at = {s.context.span_id: i for i, s in enumerate(spans)}
    return [(s.name, at.get(parent(s)), s.kind, s.status.status_code, s.start_time, s.end_time,
             {k: list(v) if isinstance(v, tuple) else v for k, v in attributes(s).items()})  # the SDK's tuples
            for s in spans]


def shape(spans) -> list:
    """Each span's name, ids, parent, kind, status, times and attributes: everything a backend shows."""
    return [(s.name, s.context.trace_id, s.context.span_id, parent(s), s.kind, s.status.status_code,
             s.status.description, s.start_time, s.end_time, attributes(s)) for s in spans]


@pytest.mark.parametrize("include_content", [False, True])
def test_live_spans_are_what_to_otel_sends_for_the_saved_session(tmp_path, include_content):
    agent = Agent(model="demo", tools=[calculator], save_to=tmp_path)
    exporter = InMemorySpanExporter()
    with nbagent.trace_live(agent, exporter=exporter, include_content=include_content) as live:
        counts = []
        for prompt in PROMPTS:
            agent.ask(prompt)
            assert live.flush()
            counts.append(len(exporter.get_finished_spans()))  # each turn's spans as that turn ends
    spans = list(exporter.get_finished_spans())
    assert counts == [4, 6, 10] and (live.turns, live.spans, live.failed_spans) == (3, 10, 0)
    assert [s.name for s in spans[:4]] == ["invoke_agent", "chat demo", "execute_tool calculator", "chat demo"]
    saved = replayed(agent.session_path, include_content=include_content)
    assert shape(spans) == shape(saved)
    assert {s.resource.attributes["service.name"] for s in spans} == {"nbagent"}
    assert {s.instrumentation_scope.name for s in spans} == {"nbagent"}
    roots = [s for s in spans if s.parent is None]
    usage = agent.conversation.usage_df()
    assert [r.attributes["gen_ai.usage.input_tokens"] for r in roots] == usage["input_tokens"].tolist()
    assert [abs(r.start_time - t.value) < 1000 for r, t in zip(roots, usage["started"].dt.as_unit("ns"))] == \
        [True] * 3  # the turns' real times
    text = str([s.attributes for s in spans])
    assert ("6 * 7" in text) is include_content and ("gen_ai.input.messages" in text) is include_content


def test_a_resumed_agent_and_its_new_conversations_are_followed(tmp_path):
    first = Agent(model="demo", tools=[calculator], save_to=tmp_path)
    first.ask(PROMPTS[0])
    first.ask(PROMPTS[1])
    path = first.session_path
    agent = Agent.load(path, tools=[calculator])
    exporter = InMemorySpanExporter()
    live = nbagent.trace_live(agent, exporter=exporter)
    agent.ask(PROMPTS[2])  # turn 2 of the resumed conversation: its cache figures compare with turn 1
    assert live.flush()
    resumed = list(exporter.get_finished_spans())
    assert [s.attributes["nbagent.turn"] for s in resumed] == [2] * 4
    assert shape(resumed) == shape(replayed(path)[-4:])
    other = agent.new_conversation()
    agent.ask("Say hello")
    assert live.flush()
    new = list(exporter.get_finished_spans())[4:]
    assert [s.name for s in new] == ["invoke_agent", "chat demo"]
    assert {s.attributes["gen_ai.conversation.id"] for s in new} == {other.conversation_id}
    assert other.conversation_id != resumed[0].attributes["gen_ai.conversation.id"]
    live.stop()
    agent.ask("Say hello again")  # stopped: nothing more is sent
    agent.new_conversation().ask("Say hello")
    assert len(exporter.get_finished_spans()) == 6 and (live.turns, live.spans) == (2, 6)
    assert "stopped" in repr(live)


def test_a_conversation_is_traced_and_a_failed_turn_is_an_error_span(tmp_path, fault_server):
    fault_server.push(reply(400, b'{"error": {"message": "bad request", "type": "invalid_request_error"}}'))
    agent = Agent(model="openai:gpt-4.1-mini", base_url=fault_server.url + "/v1", api_key=KEY, save_to=tmp_path)
    exporter = InMemorySpanExporter()
    live = nbagent.trace_live(agent.conversation, exporter=exporter)
    with pytest.raises(NbagentError):
        agent.ask("What is 6 * 7?")
    live.stop()
    spans = list(exporter.get_finished_spans())
    root = spans[0]
    assert root.name == "invoke_agent" and root.status.status_code == StatusCode.ERROR
    assert root.attributes["nbagent.status"] == "error" and root.attributes["error.type"] == "400"
    assert root.attributes["gen_ai.provider.name"] == "openai"
    assert shape(spans) == shape(replayed(agent.session_path))
    assert KEY not in str([(s.attributes, s.status.description) for s in spans])


def test_tracing_started_while_a_turn_waits_for_approval_sends_that_whole_turn(tmp_path):
    agent = Agent(model="demo", tools=[calculator], policy="ask", save_to=tmp_path)
    conv = agent.conversation
    exporter = InMemorySpanExporter()

    async def run():
        waiting = asyncio.Event()
        plumbing_of(conv).add_listener(lambda event, step: waiting.set() if getattr(step, "status", None) is
                          nbagent.StepStatus.WAITING_FOR_USER else None)
        turn = asyncio.create_task(conv.chat_to_completion("What is 6 * 7?"))
        await asyncio.wait_for(waiting.wait(), 30)
        live = nbagent.trace_live(agent, exporter=exporter)  # the turn's first steps are behind it
        call = next(s for s in conv.history if s.status is nbagent.StepStatus.WAITING_FOR_USER).tool_calls[0]
        conv.approve(call.id)
        await asyncio.wait_for(turn, 30)
        return live

    live = asyncio.run(run())
    live.stop()
    spans = list(exporter.get_finished_spans())
    assert [s.name for s in spans] == ["invoke_agent", "chat demo", "execute_tool calculator", "chat demo"]
    assert spans[2].attributes["nbagent.approval"] == "approved"
    assert shape(spans) == shape(replayed(agent.session_path))


def openai_answer(text: str, prompt_tokens: int, cached: int) -> bytes:
    """An OpenAI Chat Completions stream: ``text``, then usage with ``cached`` prompt-cache reads."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 3, "total_tokens": prompt_tokens + 3,
             "prompt_tokens_details": {"cached_tokens": cached}}
    chunks = [{"model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                                                     "finish_reason": None}]},
              {"model": "gpt-4.1-mini", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
              {"model": "gpt-4.1-mini", "choices": [], "usage": usage}]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def test_cache_figures_compare_a_turn_with_the_one_before(tmp_path, fault_server):
    fault_server.push(sse(openai_answer("First.", 4000, 3000)), sse(openai_answer("Second.", 4100, 0)))
    agent = Agent(model="openai:gpt-4.1-mini", base_url=fault_server.url + "/v1", api_key=KEY, save_to=tmp_path)
    exporter = InMemorySpanExporter()
    with nbagent.trace_live(agent, exporter=exporter):
        agent.ask("One")
        agent.ask("Two")  # the cache the first turn read from is not read again: busted
    spans = list(exporter.get_finished_spans())
    roots = [s for s in spans if s.parent is None]
    assert [r.attributes["nbagent.cache_busted"] for r in roots] == [False, True]
    assert roots[0].attributes["gen_ai.usage.cache_read.input_tokens"] == 3000
    assert roots[0].attributes["nbagent.cache_saved_usd"] > 0 and roots[1].attributes["nbagent.cost_usd"] > 0
    assert agent.conversation.usage_df()["cache_busted"].tolist() == [False, True]
    assert shape(spans) == shape(replayed(agent.session_path))


def test_live_spans_reach_a_real_otlp_receiver(tmp_path):
    agent = Agent(model="demo", tools=[calculator], save_to=tmp_path)
    with OtlpReceiver() as receiver:
        with nbagent.trace_live(agent, endpoint=receiver.url) as live:  # a bare URL: /v1/traces is added
            agent.ask(PROMPTS[0])
            agent.ask(PROMPTS[1])
        # leaving the block sent what was queued and closed the exporter it made
    assert set(receiver.paths) == {"/v1/traces"} and set(receiver.content_types) == {"application/x-protobuf"}
    got = receiver.spans()
    want = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}"): s for s in replayed(agent.session_path)}
    assert len(got) == len(want) == live.spans == 6 and live.failed_spans == 0
    for s in got:
        mine = want[(s.trace_id, s.span_id)]
        assert s.name == mine.name and (s.start_ns, s.end_ns) == (mine.start_time, mine.end_time)
        assert s.attributes == attributes(mine)
        assert s.parent_span_id == ("" if mine.parent is None else f"{mine.parent.span_id:016x}")
        assert s.service_name == "nbagent" and s.scope == "nbagent"


def test_spans_still_queued_when_python_exits_are_sent(tmp_path):
    script = textwrap.dedent("""
        import sys
        import nbagent
        agent = nbagent.Agent(model="demo")
        nbagent.trace_live(agent, endpoint=sys.argv[1])
        print(agent.ask("Say hello").text[:5])
    """)  # no stop(), no flush(): the script ends right after its turn
    with OtlpReceiver() as receiver:
        done = subprocess.run([sys.executable, "-c", script, receiver.url], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert [s.name for s in receiver.spans()] == ["invoke_agent", "chat demo"]


class Gate:
    """A SpanExporter that holds each export until released (a receiver that hangs)."""

    def __init__(self) -> None:
        self.entered, self.released = threading.Event(), threading.Event()
        self.inner = InMemorySpanExporter()

    def export(self, spans):
        self.entered.set()
        self.released.wait(30)
        return self.inner.export(spans)

    def shutdown(self):
        self.released.set()


def test_a_hanging_exporter_never_holds_a_turn():
    agent = Agent(model="demo", tools=[calculator])
    gate = Gate()
    live = nbagent.trace_live(agent, exporter=gate)
    try:
        agent.ask(PROMPTS[0])
        flushing = threading.Thread(target=live.flush)
        flushing.start()  # the processor's thread exports turn 0 and hangs in the exporter
        assert gate.entered.wait(30)
        answer = agent.ask(PROMPTS[2])  # the next turn runs to its end meanwhile
        assert "42" in answer.text and gate.inner.get_finished_spans() == ()
        gate.released.set()
        flushing.join(30)
        assert live.flush()
        assert len(gate.inner.get_finished_spans()) == live.spans == 8
    finally:
        gate.released.set()
        live.stop()


def test_turns_that_end_while_the_spans_of_another_are_made_are_sent_as_the_replay_sends_them(tmp_path):
    gate = Gate()  # the provider's SimpleSpanProcessor exports on trace_live's worker thread: it holds the worker
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(gate))
    agent = Agent(model="demo", tools=[calculator], save_to=tmp_path)
    live = nbagent.trace_live(agent, tracer_provider=provider)
    try:
        agent.ask(PROMPTS[0])
        assert gate.entered.wait(30)  # the worker is sending turn 0's spans
        for prompt in [*PROMPTS[1:], "What is 2 + 2?"]:
            agent.ask(prompt)  # these end meanwhile: the worker takes them together once free
        assert gate.inner.get_finished_spans() == ()
        gate.released.set()
        assert live.flush()
    finally:
        gate.released.set()
        live.stop()
    spans = gate.inner.get_finished_spans()
    assert (live.turns, live.spans) == (4, 14) and [s.name for s in spans[4:6]] == ["invoke_agent", "chat demo"]
    assert tree(spans) == tree(replayed(agent.session_path))


class Broken:
    def export(self, spans):
        raise RuntimeError(f"collector down (api key {KEY})")

    def shutdown(self):
        pass


def test_an_exporter_that_fails_is_logged_and_counted_never_raised(caplog):
    agent = Agent(model="demo", tools=[calculator])
    live = nbagent.trace_live(agent, exporter=Broken())
    with caplog.at_level(logging.WARNING, logger="nbagent.otel"):
        assert "42" in agent.ask(PROMPTS[0]).text
        live.flush()
        assert agent.ask(PROMPTS[1]).text
        live.stop()
    assert live.failed_spans == live.spans == 6
    assert "collector down" in live.last_error and KEY not in live.last_error
    warned = [r.getMessage() for r in caplog.records if r.name == "nbagent.otel"]
    assert len(warned) == 1 and "collector down" in warned[0] and KEY not in warned[0]  # once, not per batch
    assert "6 failed" in repr(live)


def test_a_refusing_receiver_is_counted(tmp_path):
    agent = Agent(model="demo")
    with OtlpReceiver(status=400) as receiver:
        with nbagent.trace_live(agent, endpoint=receiver.url) as live:
            agent.ask("Say hello")
    assert receiver.paths and live.failed_spans == live.spans == 2 and "did not accept" in live.last_error


def test_a_tracer_provider_of_ones_own(tmp_path):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "course-app"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(model="demo", tools=[calculator], save_to=tmp_path)
    with nbagent.trace_live(agent, tracer_provider=provider) as live:
        agent.ask(PROMPTS[0])
        agent.ask(PROMPTS[1])
    spans = list(exporter.get_finished_spans())
    saved = replayed(agent.session_path)
    assert len(spans) == live.spans == len(saved) == 6
    assert tree(spans) == tree(saved)
    assert {s.resource.attributes["service.name"] for s in spans} == {"course-app"}
    assert len({s.context.trace_id for s in spans}) == 2  # a trace per turn
    provider.shutdown()


def test_bad_arguments_and_a_missing_extra_are_config_errors(monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    agent = Agent(model="demo")
    with pytest.raises(ConfigError, match="Agent or a Conversation"):
        nbagent.trace_live("chats/", exporter=InMemorySpanExporter())
    with pytest.raises(ConfigError, match="tracer_provider="):
        nbagent.trace_live(agent)
    with pytest.raises(ConfigError, match="one of"):
        nbagent.trace_live(agent, exporter=InMemorySpanExporter(), tracer_provider=TracerProvider())
    with pytest.raises(ConfigError, match="TracerProvider"):
        nbagent.trace_live(agent, tracer_provider=object())
    with pytest.raises(ConfigError, match="SpanExporter"):
        nbagent.trace_live(Conversation(), exporter=object())
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if opentelemetry-sdk were absent
    with pytest.raises(ConfigError) as info:
        nbagent.trace_live(agent, endpoint="http://127.0.0.1:4318")
    assert 'pip install "jupyter-nbagent[otel]"' in str(info.value) and info.value.kind == "config"
    assert agent.ask("Say hello").text  # nothing was attached


def test_live_spans_of_long_turns_are_sent_in_requests_under_4_mb():
    """Turns that end close together go out in one batch (80 turns of 15 KB prompts and 25 KB answers:
    5 MB of attributes); it is sent in requests under the 4 MB receivers take (#48.10)."""
    from support.scripted import ScriptedProvider
    from nbagent.providers.base import Finish, TextDelta
    from nbagent.core.steps import FinishReason

    answer = "a long answer, row by row: ü 1 2 3\n" * 700  # 25 KB
    provider = ScriptedProvider([[TextDelta(answer), Finish(FinishReason.STOP)] for _ in range(80)],
                                context_window=10_000_000)
    agent = Agent(model=provider)
    prompt = "summarise this paste: " + "ü-row of a csv paste, 1, 2, 3\n" * 500  # 15 KB
    with OtlpReceiver() as receiver:
        with nbagent.trace_live(agent, endpoint=receiver.url, include_content=True) as live:
            for _ in range(80):
                agent.ask(prompt)
        sizes = [r.ByteSize() for r in receiver.requests]
    assert live.failed_spans == 0 and len(receiver.spans()) == live.spans == 160
    assert sum(sizes) > 4_000_000 and max(sizes) < 4_000_000, sizes
