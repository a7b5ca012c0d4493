"""The turn codec tested as a pair: turns encoded in Python (notebook/turn_codec.py) and applied by the
real js/src/reducer.js in node rebuild, at every flush, every turn as the kernel has it (in what a view
shows: each step's fields and text, each record's fields; a running turn's footer waits for its end).

Scripted conversations come from hypothesis (steps of every kind appear, stream text, change status,
get tool calls, usage, notices, are rewritten; turns end, a finished turn changes later, a view asks for
a resync, the history is cleared; flushes fall anywhere); the recorded provider bodies of
tests/fixtures run through a real Conversation. One node process per test reads the flushes as JSON lines.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from nbagent import Conversation, providers  # noqa: E402
from nbagent.core.conversation_state import ConversationEvent as E, plumbing_of  # noqa: E402
from nbagent.core.ledger import TurnRecord  # noqa: E402
from nbagent.core.steps import (FinishReason, Step, StepSource, StepStatus, StepTarget, StepType,  # noqa: E402
                                ToolCall, TurnStatus)
from nbagent.core.usage import UsageMetadata  # noqa: E402
from nbagent.core.session_settings import AgentSettings  # noqa: E402
from nbagent.loop.model_connection import ModelConnection  # noqa: E402
from nbagent.notebook.protocol import CHAT, Deltas  # noqa: E402
from nbagent.notebook.turn_codec import FOOTER_ONLY, TurnCodec, bare_record, live_step, silent_finish  # noqa: E402
from support.replay import fixture_names, load_fixture, mock_client, split_body  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
pytestmark = [pytest.mark.skipif(NODE is None, reason="node is not installed"), pytest.mark.timeout(120)]


class Reducer:
    """The real reducer in one node process: ``apply`` sends a flush's messages, returns the view."""

    def __init__(self) -> None:
        assert NODE is not None
        self.proc = subprocess.Popen([NODE, str(ROOT / "tests" / "support" / "reducer_lines.mjs")], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def apply(self, messages: list[dict] | None) -> dict:
        """Apply the kernel's ``messages`` (None: start a new view) and return the view's turns."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(messages) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture
def reducer():
    r = Reducer()
    yield r
    r.close()


def shown_record(record: dict | None, running: bool) -> dict | None:
    """A record as a view shows it: its rendered fields (turn_codec.bare_record; the prompt shows as the
    prompt step), null ones as missing; a running turn's footer figures wait for its end."""
    if record is None:
        return None
    out = bare_record(record, [{"kind": "prompt"}]) or {}
    return {k: v for k, v in out.items() if v is not None and not (running and k in FOOTER_ONLY)}


def shown_steps(steps: list[dict]) -> list[dict]:
    """Steps as a live view shows them (turn_codec.live_step), with their text; a finish that says
    nothing is not shown. A usage is structural by its presence (core/steps.py): while its step is
    active, a provider that reports usage in every chunk is not re-sent each time (the counts come
    with the step's end)."""
    out = []
    for step in sorted(steps, key=lambda s: s["step_index"]):
        if silent_finish(step):
            continue
        fields = {k: v for k, v in live_step(step).items()
                  if v is not None and k not in ("n", "id", "turn", "content", "thinking")}
        if "usage_metadata" in fields and fields.get("status", "ACTIVE") == "ACTIVE":
            fields["usage_metadata"] = "counting"  # its presence shows at once, its counts with the step's end
        out.append({**fields, "text": [step.get("content") or "", step.get("thinking") or ""]})
    return out


def check_flush(codec: TurnCodec, reducer: Reducer) -> None:
    """Flush the codec, apply what it sends in node, and compare every turn."""
    out = codec.flush()
    messages = [CHAT.encode(Deltas(out.items, out.patches))] if out.items or out.patches else []
    messages += [CHAT.encode(m) for m in out.messages]
    view = reducer.apply(json.loads(json.dumps(messages)))
    assert not view["gap"] and view["pending"] == 0, "the view found text or structure missing"
    kernel = {n: codec.turns[n].to_dict() for n in sorted(codec.turns)}
    assert [t["turn"] for t in view["turns"]] == list(kernel), "the view's turns are the kernel's"
    for turn in view["turns"]:
        want = kernel[turn["turn"]]
        running = turn["turn"] == codec.live
        assert shown_record(turn["record"], running) == shown_record(want["record"], running), f"turn {turn['turn']}'s record"
        assert shown_steps(turn["steps"]) == shown_steps(want["steps"]), f"turn {turn['turn']}'s steps"
        assert turn["done"] == (not running), f"turn {turn['turn']} ended in the view as in the kernel"


# --- scripted conversations -------------------------------------------------------------------------

SHAPES = {  # a step of each kind: type, source, target
    "prompt": (StepType.TEXT_RESPONSE, StepSource.USER, StepTarget.UNSPECIFIED),
    "model_call": (StepType.TEXT_RESPONSE, StepSource.MODEL, StepTarget.USER),
    "tool_run": (StepType.TOOL_CALL, StepSource.SYSTEM, StepTarget.ENVIRONMENT),
    "finish": (StepType.FINISH, StepSource.SYSTEM, StepTarget.USER),
    "system": (StepType.SYSTEM_MESSAGE, StepSource.SYSTEM, StepTarget.USER),
    "odd_model": (StepType.TOOL_CALL, StepSource.MODEL, StepTarget.USER),  # a model step of an unusual shape
}
TEXT = st.text(alphabet=st.sampled_from(list("ab é\n") + ["😀", "𝛼", "中"]), min_size=1, max_size=6)
STEP = st.tuples(st.just("step"), st.sampled_from(sorted(SHAPES)))
TEXT_OP = st.tuples(st.just("text"), st.sampled_from(["content", "thinking"]), TEXT)
OPS = st.one_of(
    st.tuples(st.just("turn"), st.sampled_from(["m1", "m2"])),
    STEP, STEP, TEXT_OP, TEXT_OP,
    st.tuples(st.just("rewrite"), TEXT),
    st.tuples(st.just("status"), st.sampled_from([StepStatus.DONE, StepStatus.WAITING_FOR_USER, StepStatus.ERROR,
                                                  StepStatus.CANCELED])),
    st.tuples(st.just("tool_call"), st.sampled_from(["calc", "read_cell"])),
    st.tuples(st.just("usage"), st.integers(0, 50), st.integers(0, 9)),
    st.tuples(st.just("notice"), st.sampled_from(["", "retrying", "cut short"])),
    st.tuples(st.just("end"), st.sampled_from([TurnStatus.DONE, TurnStatus.ERROR, TurnStatus.INTERRUPTED]),
              st.sampled_from([None, FinishReason.STOP, FinishReason.LENGTH])),
    st.tuples(st.just("late")),
    st.tuples(st.just("resync")),
    st.tuples(st.just("clear")),
    st.tuples(st.just("flush")), st.tuples(st.just("flush")), st.tuples(st.just("flush")),
)


class Script:
    """Plays scripted operations as the conversation would send them to the codec."""

    def __init__(self, codec: TurnCodec) -> None:
        self.codec = codec
        self.turn = -1
        self.live: TurnRecord | None = None
        self.steps: dict[int, dict[int, Step]] = {}  # turn -> step_index -> its latest state
        self.model = ""

    def send(self, event: E, payload: object) -> None:
        self.codec.take_event(event, copy.deepcopy(payload))

    def step(self, step: Step) -> None:
        self.steps.setdefault(step.turn, {})[step.step_index] = step
        self.send(E.STEP, step)

    def last(self) -> Step | None:
        steps = self.steps.get(self.turn, {}) if self.live is not None else {}
        return steps[max(steps)] if steps else None

    def play(self, op: tuple) -> None:
        kind, *args = op
        last = self.last()
        if kind == "turn":
            if self.live is not None:
                self.play(("end", TurnStatus.DONE, None))
            self.turn += 1
            self.model = args[0]
            self.live = TurnRecord(self.turn, prompt="q", model=self.model, provider="p", started_at=time.time())
            self.send(E.TURN_STARTED, self.live)
        elif kind == "step" and self.live is not None:
            index = max([s.step_index for t in self.steps.values() for s in t.values()], default=-1) + 1
            type_, source, target = SHAPES[args[0]]
            status = StepStatus.DONE if args[0] in ("prompt", "finish") else StepStatus.ACTIVE
            self.step(Step(type=type_, source=source, target=target, status=status, turn=self.turn, step_index=index,
                           model=self.model if source == StepSource.MODEL else ""))
        elif kind == "end" and self.live is not None:
            status, reason = args
            self.live.status, self.live.finish_reason = status, reason
            self.live.finished_at = time.time()
            self.live.usage = UsageMetadata(prompt_token_count=7, candidates_token_count=3, total_token_count=10)
            self.send(E.TURN_FINISHED, self.live)
            self.live = None
        elif kind == "late":  # a finished turn's step changes (a manual tool result given after its end)
            done = [s for t, steps in self.steps.items() if self.live is None or t != self.turn for s in steps.values()]
            if done:
                self.step(Step(**{**done[0].__dict__, "content": done[0].content + " result", "status": StepStatus.DONE}))
        elif kind == "resync":
            self.codec.ask_resync()
        elif kind == "clear":
            self.steps.clear()
            self.live = None
            self.send(E.CLEARED, None)
        elif last is not None and kind in ("text", "rewrite", "status", "tool_call", "usage", "notice"):
            self.change(last, kind, args)

    def change(self, last: Step, kind: str, args: list) -> None:
        """The live turn's latest step changes (its text, status, tool calls, usage or notice)."""
        changed = copy.deepcopy(last)
        if kind == "text":
            setattr(changed, args[0], getattr(changed, args[0]) + args[1])
        elif kind == "rewrite":
            changed.content = args[0][:1]
        elif kind == "status":
            changed.status = args[0]
            changed.finished_at = time.time()
        elif kind == "tool_call":
            changed.tool_calls = [*changed.tool_calls, ToolCall(f"c{len(changed.tool_calls)}", args[0], {"x": 1})]
        elif kind == "usage":  # once a step, as a model call's usage comes (a structural change is its presence)
            if changed.usage_metadata is not None:
                return
            changed.usage_metadata = UsageMetadata(prompt_token_count=args[0], candidates_token_count=1,
                                                   total_token_count=args[0] + 1, thoughts_token_count=args[1])
        else:
            changed.notice = args[0]
        self.step(changed)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=40))
def test_every_turn_is_rebuilt_at_every_flush_of_a_scripted_conversation(reducer, ops):
    codec = TurnCodec()
    reducer.apply(None)  # a new example: a new view
    script = Script(codec)
    for op in [("turn", "m1"), ("step", "prompt"), *ops]:
        if op[0] == "flush":
            check_flush(codec, reducer)
        else:
            script.play(op)
    script.play(("end", TurnStatus.DONE, FinishReason.STOP))
    check_flush(codec, reducer)


# --- recorded provider bodies through a real Conversation ----------------------------------------------

WIRES = {"anthropic": ("anthropic", "claude-test"), "gemini": ("gemini", "gemini-test"),
         "openai": ("openai", "gpt-test"), "openai_responses": ("openai-responses", "gpt-test")}
RECORDED = [(folder, name) for folder in WIRES for name in fixture_names(folder)]


async def recorded_events(folder: str, name: str) -> list[tuple[E, object]]:
    """The conversation events of one turn answered by a recorded body (split at random chunk sizes)."""
    prefix, model = WIRES[folder]
    provider = providers.create(prefix, model, api_key="k-123456", base_url="http://127.0.0.1:9")
    provider.http_client = mock_client(split_body(load_fixture(folder, name).body, "random", seed=1))
    conv = Conversation(ModelConnection(provider, AgentSettings(max_tool_iterations=1)))
    events: list[tuple[E, object]] = []
    plumbing_of(conv).add_listener(lambda event, payload: events.append((event, copy.deepcopy(payload))))
    try:
        await conv.chat_to_completion("hi")
    except Exception:  # noqa: BLE001 - a recorded error ends the turn as an error card: that is synced too
        pass
    return events


@pytest.mark.parametrize("every", [1, 3, 1000], ids=["flush-each-event", "flush-every-3", "flush-at-end"])
@pytest.mark.parametrize("folder, name", RECORDED, ids=[f"{f}/{n}" for f, n in RECORDED])
async def test_every_turn_is_rebuilt_at_every_flush_of_a_recorded_answer(reducer, folder, name, every):
    events = await recorded_events(folder, name)
    assert any(e == E.STEP for e, _ in events)
    codec = TurnCodec()
    for i, (event, payload) in enumerate(events, 1):
        codec.take_event(event, payload)
        if i % every == 0:
            check_flush(codec, reducer)
    check_flush(codec, reducer)
