"""Conversation semantics: upserts, chunk rules, turns, usage ledger, trimming, persistence."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from nbagent import (ApprovalDecision, ChatResponse, Conversation, FinishReason, MockConnection, NbagentError, Step,
                     StepSource, StepStatus, StepTarget, StepType, Text, Thought, ToolCall,
                     UsageMetadata)


def user(i: int, text: str = "hi") -> Step:
    return Step(step_index=i, type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content=text)


def streamed(i: int, pieces: list[str], usage: UsageMetadata | None = None, thinking: list[str] = ()) -> list[Step]:
    """One model step streamed as many updates, the last one DONE with usage."""
    out, content, thought = [], "", ""
    for t in thinking:
        thought += t
        out.append(Step(step_index=i, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                        target=StepTarget.USER, thinking=thought, thinking_delta=t))
    for p in pieces:
        content += p
        out.append(Step(step_index=i, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                        target=StepTarget.USER, content=content, content_delta=p, thinking=thought))
    out.append(Step(step_index=i, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                    target=StepTarget.USER, content=content, thinking=thought,
                    status=StepStatus.DONE, usage_metadata=usage))
    return out


def finish(i: int, reason: FinishReason = FinishReason.STOP) -> Step:
    return Step(step_index=i, type=StepType.FINISH, source=StepSource.SYSTEM, target=StepTarget.USER,
                status=StepStatus.DONE, finish_reason=reason)


async def test_500_deltas_are_one_history_entry_with_full_content():
    pieces = [f"w{i} " for i in range(500)]
    conv = Conversation(MockConnection([[user(0), *streamed(1, pieces), finish(2)]]))
    texts = [c.text async for c in conv.chat("hi") if isinstance(c, Text)]
    assert texts == pieces
    assert len(conv.history) == 3
    assert conv.history[1].content == "".join(pieces)
    assert conv.last_response == "".join(pieces)


async def test_chunk_filtering_rules():
    call = ToolCall("c1", "search", {"q": "x"})
    anon = ToolCall("", "anon", {})
    steps = [
        user(0),
        Step(step_index=1, source=StepSource.MODEL, target=StepTarget.USER, thinking="t", thinking_delta="t"),
        Step(step_index=1, source=StepSource.MODEL, target=StepTarget.USER, thinking="t", content="a", content_delta="a"),
        Step(step_index=1, source=StepSource.MODEL, target=StepTarget.USER, content="a", content_delta=""),  # empty delta
        Step(step_index=2, source=StepSource.SYSTEM, target=StepTarget.USER, content="sys", content_delta="sys"),  # not MODEL
        Step(step_index=3, source=StepSource.MODEL, target=StepTarget.USER, tool_calls=[call, anon]),
        Step(step_index=3, source=StepSource.MODEL, target=StepTarget.USER, tool_calls=[call, anon]),  # re-sent
        Step(step_index=4, source=StepSource.MODEL, target=StepTarget.ENVIRONMENT, content="env",
             content_delta="env", tool_calls=[ToolCall("c2", "hidden", {})]),
    ]
    conv = Conversation(MockConnection([steps]))
    chunks = [c async for c in conv.chat("go")]
    assert chunks == [Thought(1, "t"), Text(1, "a"), call, anon, anon]
    assert any(s.step_index == 4 for s in conv.history)  # environment steps stay in history


async def test_turn_boundaries_compactions_and_usage_ledger():
    compaction = Step(step_index=2, type=StepType.COMPACTION, source=StepSource.SYSTEM,
                      target=StepTarget.ENVIRONMENT, status=StepStatus.DONE)
    t1 = [user(0), *streamed(1, ["a"], UsageMetadata(10, 2, 12, 4, 1)), finish(3)]
    t2 = [user(4), compaction, *streamed(5, ["b"], UsageMetadata(20, 3, 23, 0, 0)), finish(6)]
    conv = Conversation(MockConnection([t1, t2]))
    r1 = await conv.chat_to_completion("one")
    assert isinstance(r1, ChatResponse) and r1.text == "a"
    assert conv.last_turn_usage == UsageMetadata(10, 2, 12, 4, 1)
    await conv.chat_to_completion("two")
    assert conv.turn_count == 2
    assert conv.turn_start_indices == [0, 3]
    assert conv.compaction_indices == [4]
    assert conv.total_usage == UsageMetadata(30, 5, 35, 4, 1)
    assert conv.last_turn_usage == UsageMetadata(20, 3, 23, 0, 0)
    ledger = conv.turns
    assert [t.prompt for t in ledger] == ["one", "two"]
    assert [t.model_calls for t in ledger] == [1, 1]
    assert all(t.status == "done" and t.finished_at >= t.started_at for t in ledger)
    assert ledger[0].first_token_at is not None


async def test_usage_of_a_step_is_counted_once_from_its_last_update():
    steps = [
        Step(step_index=0, source=StepSource.MODEL, target=StepTarget.USER, usage_metadata=UsageMetadata(5, 1, 6)),
        Step(step_index=0, source=StepSource.MODEL, target=StepTarget.USER, usage_metadata=UsageMetadata(5, 9, 14)),
    ]
    conv = Conversation(MockConnection([steps]))
    await conv.chat_to_completion("x")
    assert conv.total_usage == UsageMetadata(5, 9, 14)


async def test_trimming_shifts_indices_and_keeps_usage():
    turns = []
    for t in range(4):
        base = t * 3
        turns.append([user(base), *streamed(base + 1, ["x"], UsageMetadata(1, 1, 2)), finish(base + 2)])
    turns[2].insert(1, Step(step_index=100, type=StepType.COMPACTION, source=StepSource.SYSTEM,
                            target=StepTarget.ENVIRONMENT, status=StepStatus.DONE))
    conv = Conversation(MockConnection(turns), max_history_size=5)
    for _ in range(4):
        await conv.chat_to_completion("p")
    hist = conv.history
    assert len(hist) == 5
    assert [s.step_index for s in hist] == [7, 8, 9, 10, 11]
    # 13 steps were produced, 8 drained: turn starts at 0,3,6,10 -> 10-8=2 survives; compaction 7-8<0 dropped
    assert conv.turn_start_indices == [2]
    assert conv.compaction_indices == []
    assert conv.total_usage == UsageMetadata(4, 4, 8)
    assert conv.turn_count == 4 and len(conv.turns) == 4


def test_max_history_size_defaults():
    assert Conversation(MockConnection([])).max_history_size == 10_000
    assert Conversation(MockConnection([]), max_history_size=0).max_history_size == 0
    with pytest.raises(NbagentError):
        Conversation(MockConnection([]), max_history_size=-1)


async def test_unlimited_history_never_trims():
    turn = [user(0)] + [Step(step_index=i, source=StepSource.MODEL, target=StepTarget.USER,
                             status=StepStatus.DONE, content=str(i)) for i in range(1, 12_001)]
    conv = Conversation(MockConnection([turn]), max_history_size=0)
    await conv.chat_to_completion("x")
    assert len(conv.history) == 12_001


async def test_clear_history_resets_everything():
    conv = Conversation(MockConnection([[user(0), *streamed(1, ["a"], UsageMetadata(1, 1, 2)), finish(2)]]))
    await conv.chat_to_completion("x")
    conv.clear_history()
    assert conv.history == [] and conv.turn_count == 0 and conv.compaction_indices == []
    assert conv.total_usage == UsageMetadata() and conv.last_turn_usage is None
    assert conv.last_response == ""


async def test_a_failed_turn_keeps_partial_steps_raises_and_stays_usable():
    boom = NbagentError("connection reset", kind="network")
    partial = streamed(1, ["par", "tial"])[:-1]
    conv = Conversation(MockConnection([[user(0), *partial, boom], [user(3), *streamed(4, ["ok"]), finish(5)]]))
    with pytest.raises(NbagentError) as info:
        async for _ in conv.chat("x"):
            pass
    assert info.value.kind == "network"
    assert conv.history[1].content == "partial"
    assert conv.history[1].status == StepStatus.ERROR and "connection reset" in conv.history[1].error
    assert conv.turns[0].status == "error" and conv.turns[0].finish_reason == "ERROR"
    resp = await conv.chat_to_completion("again")
    assert resp.text == "ok" and conv.turns[1].status == "done"


async def test_state_can_be_read_from_another_task_and_thread_while_streaming():
    gate = asyncio.Event()
    conv = Conversation(MockConnection([[user(0), *streamed(1, ["x"] * 2000), finish(2)]]))
    seen: list[int] = []
    errors: list[BaseException] = []

    def reader():
        try:
            for _ in range(200):
                seen.append(len(conv.history))
                conv.total_usage, conv.turn_count, conv.compaction_indices
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    async def task_reader():
        while not gate.is_set():
            conv.history
            await asyncio.sleep(0)

    t = threading.Thread(target=reader)
    reading = asyncio.ensure_future(task_reader())
    t.start()
    await conv.chat_to_completion("go")
    gate.set()
    await reading
    t.join()
    assert not errors and conv.history[1].content == "x" * 2000


async def test_save_and_load_round_trip_exactly(tmp_path):
    steps = [user(0, "hé 👋"), *streamed(1, ["an", "swer"], UsageMetadata(7, 3, 10, 2, 1), thinking=["hm"]),
             Step(step_index=2, type=StepType.TOOL_CALL, source=StepSource.SYSTEM, target=StepTarget.ENVIRONMENT,
                  status=StepStatus.DONE, tool_calls=[ToolCall("c", "f", {"a": [1, 2]})], content="3",
                  approval=ApprovalDecision.AUTO),
             finish(3)]
    conv = Conversation(MockConnection([steps]))
    await conv.chat_to_completion("hé 👋")
    path = conv.save(tmp_path / "s.json")
    loaded = Conversation.load(path)
    assert [s.to_dict() for s in loaded.history] == [s.to_dict() for s in conv.history]
    assert [t.to_dict() for t in loaded.turns] == [t.to_dict() for t in conv.turns]
    assert loaded.total_usage == conv.total_usage
    assert loaded.turn_start_indices == conv.turn_start_indices
    assert loaded.conversation_id == conv.conversation_id
    with pytest.raises(NbagentError) as info:
        await loaded.chat_to_completion("more")
    assert info.value.kind == "config" and "read-only" in str(info.value)
    assert not list(tmp_path.glob(".*tmp"))  # atomic write leaves no temp file


def test_loading_a_corrupt_or_foreign_file_is_an_io_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "nbagent.session", "version": 1, "steps": [')
    with pytest.raises(NbagentError) as info:
        Conversation.load(bad)
    assert info.value.kind == "io" and "bad.json" in str(info.value)
    other = tmp_path / "v9.json"
    other.write_text(json.dumps({"format": "nbagent.session", "version": 9}))
    with pytest.raises(NbagentError, match="version"):
        Conversation.load(other)


def test_ask_from_a_plain_thread():
    conv = Conversation(MockConnection([[user(0), *streamed(1, ["sync"]), finish(2)]]))
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", conv.ask("x")))
    t.start(); t.join()
    assert box["r"].text == "sync"


async def test_ask_inside_a_running_loop():
    conv = Conversation(MockConnection([[user(0), *streamed(1, ["in", " loop"]), finish(2)]]))
    assert conv.ask("x").text == "in loop"  # no "event loop already running"


def test_conversation_works_across_event_loops():
    conv = Conversation(MockConnection([[user(0), *streamed(1, ["a"]), finish(2)],
                                        [user(3), *streamed(4, ["b"]), finish(5)]]))
    assert asyncio.run(conv.chat_to_completion("1")).text == "a"
    assert asyncio.run(conv.chat_to_completion("2")).text == "b"


class SlowClosingConnection(MockConnection):
    """A connection that takes many event-loop ticks to close a stopped stream before it is idle
    again (a network stream going back to its pool, a remote runner confirming the stop)."""

    closing = False

    async def receive_steps(self):
        inner = super().receive_steps()
        try:
            async for step in inner:
                yield step
        finally:
            self.closing = True
            await inner.aclose()
            for _ in range(200):
                await asyncio.sleep(0)
            self.closing = False

    def is_idle(self) -> bool:
        return super().is_idle() and not self.closing


async def test_a_prompt_right_after_breaking_out_waits_for_the_dropped_turn_to_wind_down():
    conn = SlowClosingConnection([[user(0, "long"), *streamed(1, ["a"] * 50), finish(2)],
                                  [user(3, "next"), *streamed(4, ["b"]), finish(5)]])
    conv = Conversation(conn)
    async for chunk in conv.chat("long"):
        break
    chunks = [c async for c in conv.chat("next")]  # at once: the caller neither sleeps nor polls
    assert chunks == [Text(4, "b")] and conn.prompts == ["long", "next"]
    assert [t.status for t in conv.turns] == ["interrupted", "done"]
    assert [(s.step_index, s.status, s.content) for s in conv.history] == [
        (0, StepStatus.DONE, "long"), (1, StepStatus.CANCELED, "a"),
        (3, StepStatus.DONE, "next"), (4, StepStatus.DONE, "b"), (5, StepStatus.DONE, "")]
    assert conv.is_idle()


async def test_a_blocking_ask_right_after_breaking_out_is_refused_not_a_deadlock():
    # ask() runs on nbagent's own loop while this loop, where the dropped stream must close, is blocked
    conn = SlowClosingConnection([[user(0, "long"), *streamed(1, ["a"] * 50), finish(2)],
                                  [user(3, "next"), *streamed(4, ["b"]), finish(5)]])
    conv = Conversation(conn)
    async for chunk in conv.chat("long"):
        break
    with pytest.raises(NbagentError, match="already running") as err:
        conv.ask("next")
    assert err.value.kind == "config" and conn.prompts == ["long"]
    assert (await conv.chat_to_completion("next")).text == "b"  # here the dropped turn winds down first
    assert [t.status for t in conv.turns] == ["interrupted", "done"]


async def test_interrupt_ends_mock_turn_early():
    conn = MockConnection([[user(0), *streamed(1, ["a"] * 50), finish(2)]])
    conv = Conversation(conn)
    got = []
    async for chunk in conv.chat("x"):
        got.append(chunk)
        if len(got) == 3:
            conv.interrupt()
    assert len(got) == 3 and conv.is_idle()
    assert conv.history[-1].status == StepStatus.CANCELED and conv.history[-1].content == "aaa"
    assert conv.turns[0].status == "interrupted" and conv.turns[0].finish_reason == "INTERRUPTED"


async def test_widget_is_one_per_conversation():
    pytest.importorskip("anywidget")
    conv = Conversation(MockConnection([]))
    w = conv.widget()
    assert conv.widget() is w
    w.close()
    assert conv.widget() is not w
