"""The first text of a model step goes to the views at once; the text after it is coalesced.

The prompt's own echo opens a flush window; the model's first token must not wait it out (it did:
Enter -> first text took 52-109 ms in JupyterLab). Driven by a fake clock (the event loop's time
and the widget's ``time.monotonic``), so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import asyncio
import types

import pytest

pytest.importorskip("anywidget")

import nbagent.notebook.widget as widget_module  # noqa: E402
from nbagent import Conversation, MockConnection  # noqa: E402
from nbagent.core.conversation_state import ConversationEvent  # noqa: E402
from nbagent.core.ledger import TurnRecord  # noqa: E402
from nbagent.core.steps import Step, StepSource, StepStatus, StepTarget, StepType  # noqa: E402
from nbagent.notebook.widget import FLUSH_INTERVAL, ChatWidget  # noqa: E402

from support.widget_messages import customs  # noqa: E402


class FakeClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose time moves only when the test moves it."""

    now = 1000.0

    def time(self) -> float:
        return self.now


def prompt(text: str) -> Step:
    return Step(step_index=0, turn=0, type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content=text)


def answer(text: str) -> Step:
    return Step(step_index=1, turn=0, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                target=StepTarget.USER, content=text)


def deltas(sent: list) -> list:
    return [m["items"] for m in sent if m.get("type") == "deltas"]


@pytest.fixture
def clock(monkeypatch):
    loop = FakeClockLoop()
    monkeypatch.setattr(widget_module, "time", types.SimpleNamespace(monotonic=lambda: loop.now))
    yield loop
    loop.close()


def test_first_model_text_is_sent_at_once_and_later_text_is_coalesced(clock):
    async def scenario() -> None:
        async def turn_loop() -> None:  # lets timers that are due run
            for _ in range(3):
                await asyncio.sleep(0)

        w = ChatWidget(Conversation(MockConnection([])))
        sent = customs(w)
        w._on_event(ConversationEvent.TURN_STARTED, TurnRecord(turn=0, prompt="Hi"))
        w._on_event(ConversationEvent.STEP, prompt("Hi"))  # the echo opens the flush window
        await turn_loop()
        assert deltas(sent) == []  # the prompt's echo waits for the window

        clock.now += 0.01
        w._on_event(ConversationEvent.STEP, answer("Hel"))  # the model's first token
        first = deltas(sent)
        assert len(first) == 1 and [1, "c", 0, "Hel"] in first[0]  # sent at once, window or not
        assert [0, "c", 0, "Hi"] in first[0]  # the queued echo went with it

        clock.now += 0.005
        w._on_event(ConversationEvent.STEP, answer("Hello"))
        w._on_event(ConversationEvent.STEP, answer("Hello wor"))
        clock.now += FLUSH_INTERVAL - 0.015  # past the window the echo opened, not the first token's
        await turn_loop()
        assert len(deltas(sent)) == 1  # held: coalesced into the next window

        clock.now += 0.011  # a whole window after the first token
        await turn_loop()
        assert deltas(sent)[1:] == [[[1, "c", 3, "lo wor"]]]  # both deltas, one message

    clock.run_until_complete(scenario())


def test_a_later_step_first_text_in_the_same_turn_is_sent_at_once_too(clock):
    async def scenario() -> None:
        w = ChatWidget(Conversation(MockConnection([])))
        sent = customs(w)
        w._on_event(ConversationEvent.TURN_STARTED, TurnRecord(turn=0, prompt="Hi"))
        w._on_event(ConversationEvent.STEP, answer("One"))
        assert len(deltas(sent)) == 1
        clock.now += 0.001
        later = Step(step_index=3, turn=0, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                     target=StepTarget.USER, content="Two")
        w._on_event(ConversationEvent.STEP, later)  # the answer after a tool run: its first text
        assert deltas(sent)[-1] == [[3, "c", 0, "Two"]]

    clock.run_until_complete(scenario())
