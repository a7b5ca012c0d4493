"""nbagent.to_otel: saved and live sessions as OpenTelemetry GenAI spans.

Spans go to the SDK's own InMemorySpanExporter and, over real HTTP, to an OTLP/HTTP receiver on
loopback that decodes the protobuf with opentelemetry-proto (tests/support/otlp_receiver.py).
Sessions: the saved files in tests/data/sessions (format 1, the demo model with an approved and a
denied calculator call), sessions from support.many_sessions (priced models, cached tokens,
HTTP 429 turns) and a live demo-model conversation with a tool call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.proto")  # the receiver decodes with it (it comes with the OTLP exporter)
pd = pytest.importorskip("pandas")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

import nbagent  # noqa: E402
from nbagent import Agent, ConfigError, NbagentError, StorageError, load_sessions, tool  # noqa: E402
from nbagent.core.session_file import save_conversation  # noqa: E402

from support.many_sessions import synthetic_state  # noqa: E402
from support.otlp_receiver import OtlpReceiver  # noqa: E402

SAVED = Path(__file__).resolve().parent / "data" / "sessions"


def export(sessions, **kw):
    exporter = InMemorySpanExporter()
    result = nbagent.to_otel(sessions, exporter=exporter, **kw)
    return result, list(exporter.get_finished_spans())


def traces(spans):
    """{trace id: (the invoke_agent span, its children in export order)}."""
    roots = {s.context.trace_id: s for s in spans if s.parent is None}
    out = {t: (root, []) for t, root in roots.items()}
    for s in spans:
        if s.parent is not None:
            out[s.context.trace_id][1].append(s)
    return out


def every_text(spans) -> str:
    """Every attribute value and status description, as one string."""
    parts = []
    for s in spans:
        parts += [json.dumps(v, default=str) for v in s.attributes.values()] + [s.status.description or ""]
        parts.append(s.name)
    return "\n".join(parts)


def assert_tree(spans):
    """Roots are invoke_agent spans; every other span is a child of its trace's root and lies inside it."""
    assert spans
    for root, children in traces(spans).values():
        assert root.name == "invoke_agent" and root.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert root.kind == SpanKind.INTERNAL and root.start_time <= root.end_time
        for c in children:
            assert c.parent.span_id == root.context.span_id and c.parent.trace_id == root.context.trace_id
            assert root.start_time <= c.start_time <= c.end_time <= root.end_time, c.name
            op = c.attributes["gen_ai.operation.name"]
            if op == "chat":
                assert c.name == f"chat {c.attributes['gen_ai.request.model']}" and c.kind == SpanKind.CLIENT
            else:
                assert op == "execute_tool" and c.name == f"execute_tool {c.attributes['gen_ai.tool.name']}"
        starts = [c.start_time for c in sorted(children, key=lambda c: c.attributes["nbagent.step_index"])]
        assert starts == sorted(starts)  # in step order, as they ran


def assert_matches_usage(spans, frame):
    """One invoke_agent span per turn, with the turn's tokens and cost; the chat spans add up to them."""
    by_session = {}
    for root, children in traces(spans).values():
        by_session.setdefault(root.attributes["gen_ai.conversation.id"], []).append((root, children))
    for session_id, turns in frame.groupby("session_id", observed=True):
        got = sorted(by_session.pop(str(session_id)), key=lambda t: t[0].attributes["nbagent.turn"])
        assert [r.attributes["nbagent.turn"] for r, _ in got] == turns["turn"].tolist()
        inputs = [r.attributes["gen_ai.usage.input_tokens"] for r, _ in got]
        outputs = [r.attributes["gen_ai.usage.output_tokens"] for r, _ in got]
        assert inputs == turns["input_tokens"].tolist()
        assert outputs == (turns["output_tokens"] + turns["thinking_tokens"]).tolist()
        costs = [r.attributes.get("nbagent.cost_usd") for r, _ in got]
        want = turns["cost_usd"].tolist()
        assert [c is None for c in costs] == pd.isna(want).tolist()
        assert [c for c in costs if c is not None] == pytest.approx([w for w in want if not pd.isna(w)])
        starts = [r.start_time for r, _ in got]  # the saved times (the frame holds microseconds)
        assert [abs(a - int(b.value)) < 1000 for a, b in zip(starts, turns["started"].dt.as_unit("ns"))] == \
            [True] * len(turns)
        for root, children in got:  # the model calls add up to their turn
            chats = [c for c in children if c.attributes["gen_ai.operation.name"] == "chat"]
            assert sum(c.attributes.get("gen_ai.usage.input_tokens", 0) for c in chats) == \
                root.attributes["gen_ai.usage.input_tokens"]
            possible = all(c.attributes.get("gen_ai.usage.cache_read.input_tokens", 0)
                           + c.attributes.get("gen_ai.usage.cache_creation.input_tokens", 0)
                           <= c.attributes.get("gen_ai.usage.input_tokens", 0) for c in chats)
            if "nbagent.cost_usd" in root.attributes and chats and possible:  # (the formula clamps per call)
                assert sum(c.attributes.get("nbagent.cost_usd", 0.0) for c in chats) == \
                    pytest.approx(root.attributes["nbagent.cost_usd"])
    assert not by_session


def test_saved_sessions_export_with_their_own_times_tokens_and_cost(tmp_path):
    result, spans = export(SAVED)
    frame = load_sessions(SAVED)
    assert (result.sessions, result.turns, result.spans) == (2, len(frame), len(spans))
    assert_tree(spans)
    assert_matches_usage(spans, frame)
    assert all(s.start_time < 1_800_000_000 * 10**9 for s in spans)  # 2026-11: when they were saved, not now
    tools = [s for s in spans if s.attributes["gen_ai.operation.name"] == "execute_tool"]
    assert {s.attributes["nbagent.approval"] for s in tools} == {"approved", "denied"}
    assert all(s.name == "execute_tool calculator" and s.attributes["gen_ai.tool.call.id"] for s in tools)
    assert {s.attributes["gen_ai.provider.name"] for s in spans} == {"demo", "mock"}
    assert all(s.resource.attributes["service.name"] == "nbagent" for s in spans)
    assert {s.instrumentation_scope.name for s in spans} == {"nbagent"}
    # no prompt or answer text by default
    text = every_text(spans)
    for prompt in frame["prompt"]:
        assert prompt not in text
    assert "The `calculator` tool says" not in text and "gen_ai.input.messages" not in str(spans[0].attributes)
    # exporting again sends the same ids (a backend that upserts by id keeps one copy)
    _, again = export(SAVED)
    assert [(s.context.trace_id, s.context.span_id) for s in again] == \
        [(s.context.trace_id, s.context.span_id) for s in spans]


def test_priced_models_cached_tokens_and_failed_turns(tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    for seed in range(4):  # gpt-4.1-mini, claude-sonnet-4-5, gemini-2.5-flash, local
        save_conversation(synthetic_state(seed, 25), folder / f"s{seed}.json")
    result, spans = export(str(folder / "*.json"))
    frame = load_sessions(folder)
    assert result.turns == len(frame) == 100
    assert_tree(spans)
    assert_matches_usage(spans, frame)
    roots = [s for s in spans if s.parent is None]
    assert {r.attributes["gen_ai.provider.name"] for r in roots} == {"openai", "anthropic", "gcp.gemini", "local"}
    assert sum(r.attributes.get("nbagent.cost_usd", 0) for r in roots) == pytest.approx(frame["cost_usd"].sum())
    assert any(r.attributes.get("gen_ai.usage.cache_read.input_tokens", 0) > 0 for r in roots)
    assert {r.attributes["nbagent.price_source"] for r in roots} >= {"free"}
    failed = [r for r in roots if r.attributes["nbagent.status"] == "error"]
    assert len(failed) == (frame["status"] == "error").sum() > 0
    assert all(r.status.status_code == StatusCode.ERROR and r.attributes["error.type"] == "429" for r in failed)
    assert all(r.attributes["gen_ai.response.finish_reasons"] == ["error"] for r in failed)
    ok = [r for r in roots if r.attributes["nbagent.status"] == "done"]
    assert all(r.status.status_code == StatusCode.UNSET for r in ok)


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return f"{eval(expression, {'__builtins__': {}})} (checked with sk-proj-otel0123456789abcdefXYZ)"


def test_a_live_conversation_with_a_tool_call(monkeypatch):
    agent = Agent(model="demo", tools=[calculator])
    answer = agent.ask("What is 6 * 7?")
    conv = agent.conversation
    result, spans = export(conv)
    assert (result.sessions, result.turns, result.spans) == (1, 1, 4)
    assert_tree(spans)
    root, children = next(iter(traces(spans).values()))
    assert [c.name for c in children] == ["chat demo", "execute_tool calculator", "chat demo"]
    first, run, last = children
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert last.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    call = conv.tool_calls_df().iloc[0]
    assert run.attributes["gen_ai.tool.call.id"] == call["call_id"] and run.attributes["nbagent.approval"] == "auto"
    assert first.end_time <= run.start_time <= run.end_time <= last.start_time
    usage = conv.usage_df().iloc[0]
    assert root.attributes["gen_ai.usage.input_tokens"] == usage["input_tokens"] > 0
    assert root.attributes["gen_ai.conversation.id"] == conv.conversation_id
    assert abs(root.start_time - usage["started"].as_unit("ns").value) < 1000
    assert "nbagent.session.path" not in root.attributes
    text = every_text(spans)
    thinking = [s.thinking for s in conv.history if s.thinking]
    assert thinking and not any(t in text for t in thinking)  # no content by default
    assert "6 * 7" not in text and "42 (checked" not in text and answer.text not in text
    # with include_content: the prompt, the answer, the thinking, the tool's arguments and result
    _, spans = export(conv, include_content=True)
    root, (first, run, last) = next(iter(traces(spans).values()))
    assert json.loads(root.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 6 * 7?"}]}]
    out = json.loads(root.attributes["gen_ai.output.messages"])
    assert out[0]["role"] == "assistant" and out[0]["parts"][0]["content"] == answer.text.replace(
        "sk-proj-otel0123456789abcdefXYZ", "[redacted]")
    assert out[0]["finish_reason"] == "stop"
    parts = json.loads(first.attributes["gen_ai.output.messages"])[0]["parts"]
    assert [p["type"] for p in parts] == ["reasoning", "text", "tool_call"][-len(parts):]
    assert parts[-1]["name"] == "calculator" and parts[-1]["arguments"] == {"expression": "6 * 7"}
    assert json.loads(run.attributes["gen_ai.tool.call.arguments"]) == {"expression": "6 * 7"}
    # the tool's result went to the model as it was; in the span the key is redacted
    assert run.attributes["gen_ai.tool.call.result"].startswith("42")
    assert "sk-proj-otel0123" not in every_text(spans) and "[redacted]" in run.attributes["gen_ai.tool.call.result"]


def test_a_real_otlp_receiver_gets_the_same_spans(tmp_path):
    path = save_conversation(synthetic_state(0, 8), tmp_path / "s.json")
    _, local = export(path)
    with OtlpReceiver() as receiver:
        result = nbagent.to_otel(path, endpoint=receiver.url)  # a bare URL: /v1/traces is added
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.content_types) == {"application/x-protobuf"}
    got = receiver.spans()
    assert len(got) == result.spans == len(local)
    want = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}"): s for s in local}
    frame = load_sessions(path)
    roots = [s for s in got if not s.parent_span_id]
    assert len(roots) == len(frame) == 8  # read back: the same turn count, token sums and cost
    assert sum(r.attributes["gen_ai.usage.input_tokens"] for r in roots) == frame["input_tokens"].sum()
    assert sum(r.attributes["gen_ai.usage.output_tokens"] for r in roots) == \
        (frame["output_tokens"] + frame["thinking_tokens"]).sum()
    assert sum(r.attributes["nbagent.cost_usd"] for r in roots) == pytest.approx(frame["cost_usd"].sum())
    for s in got:
        mine = want[(s.trace_id, s.span_id)]
        assert s.name == mine.name and (s.start_ns, s.end_ns) == (mine.start_time, mine.end_time)
        assert s.attributes == dict(mine.attributes)
        assert s.parent_span_id == ("" if mine.parent is None else f"{mine.parent.span_id:016x}")
        assert s.service_name == "nbagent" and s.scope == "nbagent"


def test_the_standard_endpoint_variable_names_the_receiver(tmp_path, monkeypatch):
    path = save_conversation(synthetic_state(2, 2), tmp_path / "s.json")
    with OtlpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)  # the SDK adds /v1/traces
        monkeypatch.setenv("OTEL_SERVICE_NAME", "course-chats")
        result = nbagent.to_otel([path])
    got = receiver.spans()
    assert len(got) == result.spans > 0 and {s.service_name for s in got} == {"course-chats"}


def test_a_receiver_that_refuses_raises_a_network_error(tmp_path):
    path = save_conversation(synthetic_state(1, 3), tmp_path / "s.json")
    with OtlpReceiver(status=400) as receiver:
        with pytest.raises(NbagentError) as info:
            nbagent.to_otel(path, endpoint=receiver.url + "/v1/traces?token=sk-proj-query0123456789abcdef")
    assert info.value.kind == "network" and receiver.url in str(info.value)
    assert "sk-proj-query" not in str(info.value) and "token" not in str(info.value)


def test_bad_arguments_and_a_damaged_file_send_nothing(tmp_path, monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    good = save_conversation(synthetic_state(2, 3), tmp_path / "good.json")
    with pytest.raises(ConfigError, match="exporter= .* or endpoint="):
        nbagent.to_otel(good)
    with pytest.raises(ConfigError, match="not both"):
        nbagent.to_otel(good, exporter=InMemorySpanExporter(), endpoint="http://127.0.0.1:4318")
    with pytest.raises(ConfigError, match="http"):
        nbagent.to_otel(good, endpoint="localhost:4318")
    with pytest.raises(ConfigError, match="SpanExporter"):
        nbagent.to_otel(good, exporter=object())
    with pytest.raises(ConfigError, match="Conversations"):
        nbagent.to_otel([good, 42], exporter=InMemorySpanExporter())
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "nbagent.session", "version": 3, "steps": [', encoding="utf-8")
    exporter = InMemorySpanExporter()
    with pytest.raises(StorageError, match="bad.json"):
        nbagent.to_otel([good, bad], exporter=exporter)
    assert exporter.get_finished_spans() == ()
    empty = nbagent.to_otel(str(tmp_path / "none-*.json"), exporter=exporter)
    assert (empty.sessions, empty.turns, empty.spans) == (0, 0, 0)


def test_without_the_otel_extra_the_error_says_what_to_install(tmp_path, monkeypatch):
    path = save_conversation(synthetic_state(3, 2), tmp_path / "s.json")
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if opentelemetry-sdk were absent
    with pytest.raises(ConfigError) as info:
        nbagent.to_otel(path, endpoint="http://127.0.0.1:4318")
    assert 'pip install "jupyter-nbagent[otel]"' in str(info.value) and info.value.kind == "config"


def test_a_huge_prompt_is_capped_in_its_span_and_every_request_stays_under_4_mb(tmp_path):
    """A 3 MB prompt made a 3 MB attribute, and a session of them one request past what receivers
    take (4 MB): each attribute is now capped, saying how much was cut, the message JSON stays
    valid, and spans go in requests under the limit (#48.10)."""
    from nbagent.analysis.otel_spans import MAX_ATTRIBUTE_CHARS

    state = synthetic_state(5, 40)
    huge = "tell me about this log: " + "é-line of a 3 MB paste\n" * 130_000  # ~3 MB of UTF-8
    big = "tell me about this log: " + "é-line of a paste\n" * 4_000  # 72 KB: the other turns
    for step in state.steps:
        if step.content:  # prompts, answers and tool results
            step.content = huge if step.turn == 0 else big
    for record in state.turns:
        record.prompt = huge if record.turn == 0 else big
    path = save_conversation(state, tmp_path / "huge.json")
    with OtlpReceiver() as receiver:
        result = nbagent.to_otel(path, endpoint=receiver.url, include_content=True)
    sizes = [r.ByteSize() for r in receiver.requests]
    assert result.spans == len(receiver.spans()) and len(sizes) >= 2
    assert max(sizes) < 4_000_000, sizes
    strings = [v for s in receiver.spans() for v in s.attributes.values() if isinstance(v, str)]
    assert max(len(v) for v in strings) <= MAX_ATTRIBUTE_CHARS + 60
    inputs = [s.attributes["gen_ai.input.messages"] for s in receiver.spans() if "gen_ai.input.messages" in s.attributes]
    assert len(inputs) == 40
    for text in inputs:
        content = json.loads(text)[0]["parts"][0]["content"]  # still JSON: the content was cut, not the JSON
        assert content.startswith("tell me about this log: é-line") and content.endswith("more characters cut]")
