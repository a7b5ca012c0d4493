"""ChatWidget without a kernel: what it sends, how it coalesces, what its traits hold."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("anywidget")

from nbagent import Agent, Conversation, MockConnection, tool  # noqa: E402
from nbagent.core.steps import (Step, StepSource, StepStatus, StepTarget, StepType,  # noqa: E402
                           ToolCall, UsageMetadata)
from support.widget_messages import deliver, deliver_raw  # noqa: E402
from support.waiting import until  # noqa: E402
from nbagent.notebook.protocol import Approve, AssetRequest, Deny, Resync, Send, Stop  # noqa: E402
from nbagent.notebook.widget import FLUSH_INTERVAL, ChatWidget  # noqa: E402
from nbagent.notebook.turn_codec import silent_finish, step_dict  # noqa: E402

from support.streams import StreamConnection, words  # noqa: E402
from nbagent.core.conversation_state import plumbing_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SYNCED = ("current", "running", "notice", "finished")


class Recorder:
    """Captures every comm message the widget sends: ("update", state) or ("custom", content)."""

    def __init__(self, widget: ChatWidget):
        self.log: list[tuple[float, str, dict]] = []
        self.initial = {k: json.loads(json.dumps(getattr(widget, k))) for k in SYNCED}
        widget._send = self._send

    def _send(self, msg, buffers=None):
        kind = "custom" if msg["method"] == "custom" else "update"
        body = msg["content"] if kind == "custom" else msg["state"]
        self.log.append((time.monotonic(), kind, json.loads(json.dumps(body))))

    @property
    def messages(self):
        return [("update", self.initial)] + [(k, b) for _, k, b in self.log]

    @property
    def bytes(self) -> int:
        return sum(len(json.dumps(b)) for _, _, b in self.log)

    def deltas(self):
        return [it for _, k, b in self.log if k == "custom" and b["type"] == "deltas" for it in b["items"]]


def user(i, text):
    return Step(step_index=i, type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content=text)


def finish(i, reason="STOP"):
    return Step(step_index=i, type=StepType.FINISH, source=StepSource.SYSTEM, target=StepTarget.USER,
                status=StepStatus.DONE, finish_reason=reason)


def streamed(i, pieces, thinking=""):
    out, text = [], ""
    if thinking:
        out.append(Step(step_index=i, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                        target=StepTarget.USER, thinking=thinking, thinking_delta=thinking))
    for p in pieces:
        text += p
        out.append(Step(step_index=i, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                        target=StepTarget.USER, thinking=thinking, content=text, content_delta=p))
    out.append(Step(step_index=i, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER,
                    status=StepStatus.DONE, thinking=thinking, content=text,
                    usage_metadata=UsageMetadata(10, len(pieces), 10 + len(pieces))))
    return out


async def settle(w: ChatWidget):
    await asyncio.sleep(FLUSH_INTERVAL * 3)


def finished(w: ChatWidget) -> list:
    """The finished turns whole, as a resync sends them, oldest first."""
    return w.finished_turns()


def plain(w: ChatWidget):
    """The transcript the kernel holds, in the shape js/src/reducer.js transcript() gives."""
    live = w.codec.turns.get(w.codec.live) if w.codec.live is not None else None
    turns = finished(w) + ([live.to_dict()] if live is not None else [])
    return [{"turn": t["record"]["turn"], "status": t["record"]["status"],
             "steps": [{"step_index": s["step_index"], "status": s["status"], "content": s.get("content", ""),
                        "thinking": s.get("thinking", "")} for s in t["steps"]]} for t in turns]


def from_history(conv: Conversation, live: bool = False):
    """The conversation's turns in the shape js/src/reducer.js transcript() gives; ``live``: as a view
    that followed them through patches has them (a finish that says nothing is not sent)."""
    by_turn: dict[int, list] = {}
    for s in conv.history:
        if live and silent_finish(step_dict(s)):
            continue
        by_turn.setdefault(s.turn, []).append({"step_index": s.step_index, "status": s.status.value,
                                               "content": s.content, "thinking": s.thinking})
    return [{"turn": r.turn, "status": r.status, "steps": by_turn.get(r.turn, [])} for r in conv.turns]


# --- coalescing and re-sync ------------------------------------------------------------------

async def test_ten_thousand_deltas_are_coalesced_in_order_each_once():
    pieces = words(10_000)
    conv = Conversation(StreamConnection(pieces, thinking=["Let me ", "think."], pace=0.002, batch=20))
    w = ChatWidget(conv)
    rec = Recorder(w)
    t0 = time.monotonic()
    await conv.chat_to_completion("go")
    await settle(w)
    elapsed = time.monotonic() - t0
    text = "".join(pieces)
    items = [it for it in rec.deltas() if it[1] == "c" and it[0] == 1]  # the answer (step 0: the prompt)
    # each delta's text exactly once, in order: contiguous offsets from what the first sync carried
    assert items and items[0][2] + sum(len(it[3]) for it in items) == len(text)
    for a, b in zip(items, items[1:]):
        assert b[2] == a[2] + len(a[3])
    assert text[: items[0][2]] + "".join(it[3] for it in items) == text
    customs = [t for t, k, _ in rec.log if k == "custom"]
    assert len(customs) < 10_000 / 50
    assert len(customs) <= elapsed / FLUSH_INTERVAL + 2
    stamps = [t for t, _, _ in rec.log]
    assert max(sum(1 for s in stamps if t <= s < t + 1.0) for t in stamps) <= 30  # messages per second
    # the finished step is re-synced whole, and the turn moved to history
    model = finished(w)[-1]["steps"][1]
    assert model["status"] == "DONE" and model["content"] == text and model["thinking"] == "Let me think."
    assert w.current is None and w.running is False
    assert rec.bytes <= 2.5 * len(text)


async def test_structural_changes_resync_but_text_goes_as_deltas():
    conv = Conversation(MockConnection([[user(0, "hi"), *streamed(1, ["Hel", "lo ", "there"]), finish(2)]]))
    w = ChatWidget(conv)
    rec = Recorder(w)
    await conv.chat_to_completion("hi")
    await settle(w)
    assert plain(w) == from_history(conv)
    assert finished(w)[0]["record"]["status"] == "done"
    assert finished(w)[0]["steps"][1]["usage_metadata"]["candidates_token_count"] == 3
    # no trait sync per delta: one or two syncs for the whole turn
    assert sum(1 for _, k, _ in rec.log if k == "update") <= 3


async def test_listener_on_another_thread_still_streams():
    """conv.ask() runs the turn on nbagent's own loop thread; the widget flushes there."""
    pieces = words(2_000)
    conv = Conversation(StreamConnection(pieces, pace=0.002, batch=20))
    w = ChatWidget(conv)
    rec = Recorder(w)
    await asyncio.to_thread(conv.ask, "go")
    await asyncio.sleep(0.2)
    items = rec.deltas()
    assert len(items) > 3  # streamed while the turn ran, not only at the end
    assert finished(w)[-1]["steps"][1]["content"] == "".join(pieces)


async def test_each_turn_crosses_the_wire_about_once_however_long_the_conversation():
    conv = Conversation(StreamConnection(words(300)))
    w = ChatWidget(conv)
    rec = Recorder(w)
    text = len(json.dumps("".join(words(300))))
    sizes = []
    for _ in range(32):
        start = len(rec.log)
        await conv.chat_to_completion("again")
        await asyncio.sleep(FLUSH_INTERVAL * 1.5)
        sizes.append(sum(len(json.dumps(b)) for _, _, b in rec.log[start:]))
    assert len(finished(w)) == 32 and w.finished == 32
    assert plain(w) == from_history(conv)
    # finished turns leave the traits: nothing old is re-sent (the binary-counter levels re-sent
    # turns at each merge: turn 32 cost ~30x turn 2), and an answer's text crosses once
    # (a turn's bytes vary by one sync of the running turn, depending on when flushes fall)
    assert sizes[31] <= 2 * sizes[1] and max(sizes) <= 2.5 * text, (sizes, text)


def test_two_event_loops_in_a_script():
    """asyncio.run twice (each loop closed after): every turn still reaches the traits."""
    conv = Conversation(MockConnection([[user(0, "a"), *streamed(1, ["x"]), finish(2)],
                                        [user(3, "b"), *streamed(4, ["y"]), finish(5)]]))
    w = ChatWidget(conv)
    asyncio.run(conv.chat_to_completion("a"))
    asyncio.run(conv.chat_to_completion("b"))
    assert plain(w) == from_history(conv) and len(finished(w)) == 2 and w.running is False


# --- the transcript from traits alone, and the JS mirror ----------------------------------------

async def test_transcript_rebuilt_from_traits_alone():
    conv = Conversation(MockConnection([[user(0, "a"), *streamed(1, ["x", "y"], thinking="t"), finish(2)],
                                        [user(3, "b"), *streamed(4, ["z"]), finish(5)]]))
    w = ChatWidget(conv)
    await conv.chat_to_completion("a")
    await conv.chat_to_completion("b")
    await settle(w)
    late = ChatWidget(conv)  # a new view, built from the conversation
    assert finished(late) == finished(w) and late.current is None
    assert plain(late) == from_history(conv)


async def test_a_resync_sends_every_turn_whole_in_pages_and_the_whole_state_carries_them(monkeypatch):
    """A late view (a reloaded page, another page) asks once and gets every turn with its text, in
    pages; the whole state (a page's state request, an embedded page) carries them too."""
    import nbagent.notebook.turn_codec as codec_module

    answers = [[user(3 * i, f"q{i}"), *streamed(3 * i + 1, [f"answer {i} " * 40]), finish(3 * i + 2)] for i in range(5)]
    conv = Conversation(MockConnection(answers))
    w = ChatWidget(conv)
    for i in range(5):
        await conv.chat_to_completion(f"q{i}")
    await settle(w)
    monkeypatch.setattr(codec_module, "PAGE_CHARS", 1_500)  # a page holds about one turn here
    rec = Recorder(w)
    deliver(w, Resync())
    await settle(w)
    pages = [b for _, k, b in rec.log if k == "custom" and b["type"] == "turns"]
    assert len(pages) >= 3 and [p["first"] for p in pages] == [True] + [False] * (len(pages) - 1)
    assert [p["last"] for p in pages] == [False] * (len(pages) - 1) + [True]
    assert [t for p in pages for t in p["turns"]] == finished(w)
    assert "answer 4 answer 4" in json.dumps(pages[-1])
    assert w.get_state()["turns"] == finished(w) and "turns" not in w.get_state(["running"])


NODE = shutil.which("node")


def replay(messages, reorder=False):
    out = subprocess.run([NODE, str(ROOT / "js" / "tools" / "replay.mjs")], check=True, capture_output=True,
                         input=json.dumps({"messages": messages, "reorder": reorder}).encode(), timeout=60)
    return json.loads(out.stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("reorder", [False, True], ids=["in-order", "updates-late"])
async def test_js_reducer_builds_the_same_transcript(reorder):
    conv = Conversation(StreamConnection(words(3_000), thinking=["a ", "b"], pace=0.001, batch=25,
                                         tool=ToolCall("c1", "calc", {"x": 1})))
    w = ChatWidget(conv)
    rec = Recorder(w)
    task = asyncio.ensure_future(conv.chat_to_completion("first"))
    # the call is waiting before it is approved (approved before the turn's send, it would wait for ever)
    await until(lambda: any(s.status == StepStatus.WAITING_FOR_USER for s in conv.history), "the call waiting")
    conv.approve("c1")
    await task
    conv.connection.tool = None
    await conv.chat_to_completion("second")
    await settle(w)
    got = replay(rec.messages, reorder)
    assert got["gap"] is False
    assert got["transcript"] == from_history(conv, live=True) and plain(w) == from_history(conv)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
async def test_js_reducer_keeps_text_beyond_the_bmp_whole():
    """Offsets count UTF-16 units as the view's strings do: emoji split across deltas arrive intact
    (a finished turn's text is never re-sent to correct them)."""
    conv = Conversation(StreamConnection(["a😀", "b", "😀🎉c", " ü", "x😀", "y"], thinking=["🤔", "😀"], pace=0.06, batch=1))
    w = ChatWidget(conv)
    rec = Recorder(w)
    await conv.chat_to_completion("é 😀?")
    await conv.chat_to_completion("again")
    assert len(rec.deltas()) >= 8  # split across flushes
    await settle(w)
    got = replay(rec.messages)
    assert got["transcript"] == from_history(conv, live=True) and got["gap"] is False


@pytest.mark.skipif(NODE is None, reason="node is not installed")
async def test_js_reducer_mid_stream_view_asks_for_resync_and_catches_up():
    """A view made mid-stream (a reloaded page) sees a gap, asks for a resync and catches up."""
    conv = Conversation(StreamConnection(words(3_000), pace=0.002, batch=25))
    w = ChatWidget(conv)
    task = asyncio.ensure_future(conv.chat_to_completion("go"))
    await asyncio.sleep(0.15)
    rec = Recorder(w)  # the new view starts from the traits as they are now
    await asyncio.sleep(0.1)
    deliver(w, Resync())
    await task
    await settle(w)
    assert replay(rec.messages)["transcript"] == from_history(conv, live=True)


# --- front end -> kernel ----------------------------------------------------------------------

async def test_send_runs_a_turn_as_a_task_and_stop_keeps_partial_text():
    conv = Conversation(StreamConnection(words(5_000), pace=0.005, batch=10))
    w = ChatWidget(conv)
    deliver(w, Send(prompt="long please"))
    await asyncio.sleep(0.3)
    assert w.running is True and w.current is not None
    deliver(w, Send(prompt="again"))  # refused while running
    assert "already running" in w.notice
    deliver(w, Stop())
    await w.prompts.task
    await settle(w)
    rec = finished(w)[-1]["record"]
    model = finished(w)[-1]["steps"][1]
    assert rec["status"] == "interrupted" and rec["finish_reason"] == "INTERRUPTED"
    assert model["status"] == "CANCELED" and 0 < len(model["content"]) < len("".join(words(5_000)))
    assert w.running is False


async def test_a_prompt_the_kernel_does_not_run_is_answered_so_no_view_waits():
    conv = Conversation(StreamConnection(words(50), pace=0.005, batch=5))
    w = ChatWidget(conv)
    rec = Recorder(w)
    for _ in range(2):  # the same notice twice still reaches the view: a "refused" message each time
        deliver(w, Send(prompt="   "))
    refused = [b for _, k, b in rec.log if k == "custom" and b["type"] == "refused"]
    assert len(refused) == 2 and "empty" in refused[0]["text"] and "empty" in w.notice
    assert w.running is False
    sent = len(rec.log)
    deliver(w, Send(prompt="go"))
    assert w.running is True  # at once: the other views show Stop (the sending one shows its echo already)
    assert [b for _, k, b in rec.log[sent:]] == [{"notice": ""}, {"running": True}]  # alone: no unchanged gauge
    await w.prompts.task
    await settle(w)
    assert w.running is False and w.notice == ""


def test_a_view_that_meets_math_gets_the_temml_module():
    w = ChatWidget(Conversation(MockConnection([])))
    rec = Recorder(w)
    deliver(w, AssetRequest(name="math"))
    (kind, body), = [(k, b) for _, k, b in rec.log]
    assert kind == "custom" and body["type"] == "asset" and body["name"] == "math"
    assert "export" in body["code"] and "MathML" in body["code"] and len(body["code"]) > 50_000


def test_a_view_that_meets_a_sql_block_gets_the_grammars_and_unknown_assets_get_nothing():
    w = ChatWidget(Conversation(MockConnection([])))
    rec = Recorder(w)
    deliver(w, AssetRequest(name="grammars"))
    deliver(w, AssetRequest(name="../widget.js"))  # only the named modules are ever sent
    (kind, body), = [(k, b) for _, k, b in rec.log]
    assert kind == "custom" and body["type"] == "asset" and body["name"] == "grammars"
    assert "SELECT" in body["code"].upper() and "export" in body["code"]


@pytest.mark.parametrize("steps_between", [0, 1, 2, 3, 5])
async def test_stop_right_after_send_never_leaves_the_widget_running(steps_between):
    """A busy kernel delivers Send and Stop back to back: whenever the Stop lands, the turn ends
    (a prompt not begun is dropped, a begun one interrupted) and nothing stays running."""
    agent = Agent(model="demo")
    w = ChatWidget(agent)
    deliver(w, Send(prompt="hello"))
    for _ in range(steps_between):
        await asyncio.sleep(0)
    deliver(w, Stop())
    done, _ = await asyncio.wait([w.prompts.task], timeout=10)
    assert done  # never hangs
    await settle(w)
    assert w.running is False and w.current is None
    turns = agent.conversation.turns
    assert not turns or turns[-1].status == "interrupted"
    assert agent.conversation.is_idle()


async def test_approve_and_deny_from_the_front_end():
    conv = Conversation(StreamConnection(["Done."], tool=ToolCall("c1", "calc", {"x": 1}), tool_result="2"))
    w = ChatWidget(conv)
    for kind, expect, decide in (("approve", "approved", Approve(call_id="c1")),
                                 ("deny", "denied", Deny(call_id="c1", reason="no"))):
        deliver(w, Send(prompt=kind))
        await until(lambda: len((w.current or {}).get("steps", [])) > 2, "the tool run in the widget's state")
        tool_step = w.current["steps"][2]
        assert tool_step["status"] == "WAITING_FOR_USER" and tool_step["approval"] == "pending"
        deliver(w, decide)
        await w.prompts.task
        await settle(w)
        assert finished(w)[-1]["steps"][2]["approval"] == expect


async def test_errors_become_records_not_tracebacks():
    boom = RuntimeError("HTTP 503 from the server")
    conv = Conversation(MockConnection([[user(0, "x"), boom]]))
    w = ChatWidget(conv)
    deliver(w, Send(prompt="x"))
    await w.prompts.task
    await settle(w)
    rec = finished(w)[-1]["record"]
    assert rec["status"] == "error" and "503" in rec["error"]
    deliver(w, Send(prompt="again"))  # no scripted turn left: error record, no raise
    await w.prompts.task
    await settle(w)
    assert finished(w)[-1]["record"]["status"] == "error"
    deliver(w, Approve(call_id="nope"))  # MockConnection accepts anything
    deliver_raw(w, {"type": "bogus"})
    ro = ChatWidget(Conversation(None))
    deliver(ro, Send(prompt="x"))
    await ro.prompts.task
    assert "read-only" in ro.notice


# --- the demo model, display, secrets ---------------------------------------------------------

@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return str(eval(expression, {"__builtins__": {}}))  # noqa: S307 - test tool


async def test_demo_agent_turn_under_ask_policy():
    agent = Agent(model="demo", tools=[calculator], policy="ask")
    w = agent.widget()
    deliver(w, Send(prompt="What is 12 * 7?"))
    await until(lambda: any(s["status"] == "WAITING_FOR_USER" for s in (w.current or {}).get("steps", [])),
                "the call waiting in the widget's state")
    waiting = next(s for s in w.current["steps"] if s["status"] == "WAITING_FOR_USER")
    deliver(w, Approve(call_id=waiting["tool_calls"][0]["id"]))
    await w.prompts.task
    await settle(w)
    steps = finished(w)[-1]["steps"]
    assert any(s.get("thinking") for s in steps)
    assert any(s["target"] == "ENVIRONMENT" and s["content"] == "84" for s in steps)
    assert "**84**" in steps[-2]["content"]
    assert finished(w)[-1]["record"]["cost"] == 0.0


class FakeDisplay:
    """Stands in for IPython's display machinery in a kernel: records display / update_display,
    each display with the parent (the cell's request) it was sent under."""

    def __init__(self, monkeypatch, cell: str = "cell-1"):
        import IPython
        import IPython.display

        self.shown: list[tuple[dict, str]] = []
        self.parents: list[str] = []  # the cell each shown output went to
        self.updates: list[tuple[dict, str]] = []
        fake = self

        class Publisher:
            parent_header = {"msg_id": cell}
            current = parent_header

            def set_thread_parent(self, parent):
                old, fake.pub.current = fake.pub.current, parent
                return old

            def reset_thread_parent(self, token):
                fake.pub.current = token

        self.pub = Publisher()
        shell = type("Shell", (), {"kernel": object(), "display_pub": self.pub})()
        monkeypatch.setattr(IPython, "get_ipython", lambda: shell)

        def display(data, raw=False, display_id=None, **_kw):
            self.shown.append((data, display_id))
            self.parents.append(self.pub.current["msg_id"])

        monkeypatch.setattr(IPython.display, "display", display)
        monkeypatch.setattr(IPython.display, "update_display",
                            lambda data, raw=False, display_id=None: self.updates.append((data, display_id)))

    def now_in(self, cell: str) -> None:
        """The kernel now runs another request (a later cell, or the widget's own message)."""
        self.pub.parent_header = self.pub.current = {"msg_id": cell}


def test_showing_the_widget_also_shows_its_transcript_output(monkeypatch):
    fake = FakeDisplay(monkeypatch)
    conv = Conversation(MockConnection([[user(0, "hello <b>"), *streamed(1, ["**bold** answer"]), finish(2)]]))
    conv.ask("hello <b>")
    w = ChatWidget(conv)
    data, _meta = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data and "text/markdown" not in data
    assert data["text/plain"] == ""  # where widgets do not render, the transcript says it all: no stray line
    (shown, display_id), = fake.shown
    assert display_id and "**bold** answer" in shown["text/markdown"] and "hello" in shown["text/markdown"]
    assert shown["text/markdown"].startswith('<div class="nbagent-transcript">')
    assert "<b>" not in shown["text/markdown"]  # the prompt's HTML is text
    fake.now_in("cell-2")
    w._repr_mimebundle_()  # shown again (another cell): a head of its own there, with the turn too
    assert fake.parents == ["cell-1", "cell-2"] and fake.shown[1][1] != display_id
    assert "**bold** answer" in fake.shown[1][0]["text/markdown"]
    for owner in (conv, Agent(model="demo")):
        bundle = owner._repr_mimebundle_()
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        assert "application/vnd.jupyter.widget-view+json" in data


async def test_each_finished_turn_is_appended_once_to_the_cell_that_showed_the_widget(monkeypatch):
    fake = FakeDisplay(monkeypatch)
    pieces = words(2_000)
    conv = Conversation(StreamConnection(pieces, pace=0.001, batch=50))
    w = ChatWidget(conv)
    w._repr_mimebundle_()
    fake.now_in("widget-message")  # turns come from the widget's box, long after its cell ran
    await conv.chat_to_completion("first question")
    await conv.chat_to_completion("second question")
    await settle(w)
    assert len(fake.shown) == 3 and not fake.updates  # the head, then one output per turn, none per token
    assert fake.parents == ["cell-1"] * 3  # all in the widget's cell
    first, second = (data["text/markdown"] for data, _ in fake.shown[1:])
    assert "first question" in first and "w01999" in first and "second question" not in first
    assert "second question" in second and "first question" not in second  # nothing is re-sent
    ids = [display_id for _, display_id in fake.shown]
    assert len(set(ids)) == 3
    # a turn's output is its markdown alone (no empty text/plain) under a short id: bytes of every turn
    assert all(list(data) == ["text/markdown"] and len(i) < 20 for data, i in fake.shown[1:])
    conv.clear_history()  # the old outputs are blanked, a new head starts the transcript again
    assert [display_id for _, display_id in fake.updates] == ids
    assert all("question" not in data["text/markdown"] for data, _ in fake.updates)
    assert len(fake.shown) == 4 and fake.parents[-1] == "cell-1" and fake.shown[-1][1] not in ids
    await conv.chat_to_completion("third question")
    await settle(w)
    assert "third question" in fake.shown[-1][0]["text/markdown"] and len(fake.shown) == 5


async def test_another_conversation_in_the_widget_replaces_the_transcript(monkeypatch):
    """New chat / History rebind the widget: the old conversation's outputs are blanked, and a
    new head holds the other conversation's turns (sent once, as one output)."""
    fake = FakeDisplay(monkeypatch)
    conv = Conversation(StreamConnection(words(20)))
    w = ChatWidget(conv)
    w._repr_mimebundle_()
    await conv.chat_to_completion("old question")
    other = Conversation(StreamConnection(words(20)))
    await other.chat_to_completion("loaded question")
    fake.now_in("widget-message")
    w.rebind(other)
    assert sorted(display_id for _, display_id in fake.updates) == sorted(display_id for _, display_id in fake.shown[:2])
    head = fake.shown[-1][0]["text/markdown"]
    assert "loaded question" in head and "old question" not in head and fake.parents[-1] == "cell-1"
    await other.chat_to_completion("new question")
    await settle(w)
    assert "new question" in fake.shown[-1][0]["text/markdown"] and "loaded" not in fake.shown[-1][0]["text/markdown"]


async def test_a_manual_result_given_after_its_turn_updates_that_turns_output(monkeypatch):
    from support.scripted import ScriptedProvider, text_call, tool_call

    @tool
    def lookup(q: str) -> str:
        """Looks up."""
        raise AssertionError("manual mode runs no tools")

    fake = FakeDisplay(monkeypatch)
    agent = Agent(model=ScriptedProvider([tool_call(("m1", "lookup", {"q": "x"})), text_call("the answer is 42")]),
                  tools=[lookup], auto_execute_tools=False)
    w = agent.widget()
    w._repr_mimebundle_()
    await agent.conversation.chat_to_completion("find x")
    await settle(w)
    (piece, piece_id), = fake.shown[1:]
    assert "waiting" in piece["text/markdown"] and not fake.updates
    agent.conversation.add_tool_result("m1", "forty-two")
    (update, update_id), = fake.updates  # that turn's output once more, with the result
    assert update_id == piece_id and "forty-two" in update["text/markdown"] and "find x" in update["text/markdown"]
    await agent.conversation.chat_to_completion("")
    await settle(w)
    assert len(fake.updates) == 1 and "the answer is 42" in fake.shown[-1][0]["text/markdown"]


async def test_a_widget_shown_in_two_cells_gets_each_turn_in_both(monkeypatch):
    fake = FakeDisplay(monkeypatch)
    conv = Conversation(StreamConnection(words(50)))
    w = ChatWidget(conv)
    w._repr_mimebundle_()
    fake.now_in("cell-2")
    w._repr_mimebundle_()
    fake.now_in("cell-3")  # turns driven from code in a later cell
    await conv.chat_to_completion("a question")
    await settle(w)
    assert fake.parents == ["cell-1", "cell-2", "cell-1", "cell-2"]
    assert fake.shown[2] == fake.shown[3] and "a question" in fake.shown[2][0]["text/markdown"]


async def test_a_long_conversation_keeps_every_turn_each_sent_once(monkeypatch):
    """No cap drops the oldest turns: 30 turns of 3,000 words, about 600 KB of answers."""
    fake = FakeDisplay(monkeypatch)
    conv = Conversation(StreamConnection(words(3_000)))
    w = ChatWidget(conv)
    w._repr_mimebundle_()
    for i in range(30):
        await conv.chat_to_completion(f"question {i}")
    await settle(w)
    mds = [data["text/markdown"] for data, _ in fake.shown]
    assert len(mds) == 31 and all(f"question {i}" in mds[i + 1] for i in range(30))
    text = sum(len(s.content) for s in conv.history)
    assert text > 500_000 and sum(len(md) for md in mds) < 1.05 * text
    assert "question 0" in w.transcript_bundle()["text/markdown"]  # the transcript as a whole, too


def test_model_html_in_the_transcript_output_is_text():
    payload = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    conv = Conversation(MockConnection([[user(0, payload), *streamed(1, [payload, " [x](javascript:alert(3))"]), finish(2)]]))
    conv.ask(payload)
    md = ChatWidget(conv).transcript_bundle()["text/markdown"]
    tags = set(re.findall(r"<([a-zA-Z]+)", md))
    assert tags <= {"div", "code", "pre", "sub"}, tags  # ours only; the model's are text
    assert "&lt;img src=x" in md and "javascript:alert" not in md


def test_displaying_an_agent_gives_display_data_without_an_out_prompt(monkeypatch):
    """``agent`` as a cell's last line: the widget and its transcript as display data (no
    execute_result, so no ``Out[n]:`` beside a saved transcript), the widget naming its model."""
    fake = FakeDisplay(monkeypatch)
    agent = Agent(model="demo")
    agent._ipython_display_()
    (view, vid), (transcript, tid) = fake.shown
    assert "text/markdown" in transcript and tid and vid is None
    assert view["text/plain"] == ""
    widget = agent.widget()
    assert view["application/vnd.jupyter.widget-view+json"]["model_id"] == widget.model_id == widget._widget_id


def test_no_transcript_output_outside_a_kernel():
    conv = Conversation(MockConnection([]))
    w = ChatWidget(conv)
    data, _meta = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data and not w.transcript.shown


async def test_no_secrets_in_widget_state():
    secret = "sk-test-DO-NOT-LEAK-1234567890"
    agent = Agent(model="openai:gpt-4.1-mini", api_key=secret)
    w = ChatWidget(agent)
    agent2 = Agent(model="demo", tools=[calculator], api_key=secret)
    w2 = agent2.widget()
    await agent2.chat_to_completion("What is 2 + 2?")
    await settle(w2)
    for widget in (w, w2):
        state = json.dumps(widget.get_state(), default=str)
        assert secret not in state
        assert secret not in json.dumps(widget.transcript_bundle())


async def test_cleared_and_closed():
    conv = Conversation(MockConnection([[user(0, "a"), *streamed(1, ["x"]), finish(2)]]))
    w = ChatWidget(conv)
    await conv.chat_to_completion("a")
    await settle(w)
    assert len(finished(w)) == 1
    conv.clear_history()
    await settle(w)
    assert finished(w) == [] and w.current is None
    w.close()
    assert not plumbing_of(conv).has_listener(w._on_event)


async def test_provider_raw_usage_stays_in_the_kernel():
    """raw_usage is for analysis (history, saved files); the widget's state never carries it."""
    model = Step(step_index=1, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER,
                 status=StepStatus.DONE, content="ok", usage_metadata=UsageMetadata(7, 2, 9, 0, 0, 5),
                 raw_usage={"input_tokens": 2, "cache_creation_input_tokens": 5, "provider_note": "RAW-ONLY"},
                 model="claude-sonnet-4-5")
    conv = Conversation(MockConnection([[user(0, "hi"), model, finish(2)]]))
    w = ChatWidget(conv)
    rec = Recorder(w)
    await conv.chat_to_completion("hi")
    await settle(w)
    assert conv.history[1].raw_usage["provider_note"] == "RAW-ONLY"  # kept for analysis
    sent = json.dumps([b for _, _, b in rec.log]) + json.dumps({k: getattr(w, k) for k in SYNCED})
    assert "RAW-ONLY" not in sent and "raw_usage" not in sent
    step = finished(w)[0]["steps"][1]
    assert step["model"] == "claude-sonnet-4-5" and step["usage_metadata"]["cache_write_token_count"] == 5


# --- rich tool results -----------------------------------------------------------------------

async def test_a_dataframe_from_a_tool_reaches_the_card_as_an_escaped_table_and_the_model_as_text():
    import pandas as pd
    from support.scripted import ScriptedProvider, text_call, tool_call

    @tool
    def prices() -> object:
        """A small table."""
        return pd.DataFrame({"item": ["<script>alert(1)</script>", "tea"], "price": [3.5, 2.0]})

    provider = ScriptedProvider([tool_call(("c1", "prices", {})), text_call("Here they are.")])
    agent = Agent(model=provider, tools=[prices])
    w = agent.widget()
    await agent.chat_to_completion("prices?")
    await settle(w)
    run = next(s for s in agent.conversation.history if s.target == StepTarget.ENVIRONMENT)
    assert run.content.startswith("DataFrame: 2 rows x 2 columns") and "tea" in run.content  # the model's text
    html = run.display["text/html"]
    assert "<table" in html and "&lt;script&gt;" in html and "<script>" not in html
    step = next(s for s in finished(w)[-1]["steps"] if s.get("target") == "ENVIRONMENT")
    assert step["display"]["text/html"] == html  # in the widget's state, for the card
    sent = repr(provider.requests[-1].messages)  # what the model got back: the text only
    assert "DataFrame: 2 rows x 2 columns" in sent and "<table" not in sent
    again = Step.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again.display == run.display  # saved and loaded with the step


def test_figures_and_images_become_capped_pngs_and_a_short_text():
    import base64

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    from nbagent.loop.tools import IMAGE_MAX_PIXELS, format_result, rich_display

    fig, ax = plt.subplots(figsize=(20, 10), dpi=100)
    ax.plot([1, 2, 3], [3, 1, 2])
    ax.set_title("trend")
    png = base64.b64decode(rich_display(fig)["image/png"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(png[16:20], "big")
    assert 0 < width <= IMAGE_MAX_PIXELS * 1.05
    assert format_result(fig) == "[matplotlib figure, 2000x1000 px, 1 axes; titles: 'trend'; shown to the user as an image]"
    plt.close(fig)
    img = Image.new("RGB", (3000, 1500), (200, 30, 30))
    png = base64.b64decode(rich_display(img)["image/png"])
    assert int.from_bytes(png[16:20], "big") == IMAGE_MAX_PIXELS
    assert format_result(img) == "[image, 3000x1500 px, mode RGB; shown to the user]"
    assert rich_display("plain text") is None and rich_display({"a": 1}) is None
