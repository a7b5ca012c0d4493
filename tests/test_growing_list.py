"""The model history and the turn ledger grow at their end; a turn looks at what is new only.

``core/growing_list.py``: a list that counts its changes other than growth, and O(1) snapshots of
it for model requests and budget checks. These tests hold what that must keep: a hand edit of any
kind is still noticed, and a request's messages stay what was sent whatever happens to the history
afterwards.
"""

from __future__ import annotations

import copy
import gc
import pickle
import random

import pytest

from nbagent import Agent
from nbagent.core.chat_session import ChatSession
from nbagent.core.growing_list import GrowingList, ListSnapshot, growth_mark, snapshot
from nbagent.core.message_memo import MessageMemo
from nbagent.core.messages import Message, TextPart
from nbagent.core.steps import StepType
from nbagent.core.turn_log import TurnLog

from support.scripted import ScriptedProvider, text_call
from nbagent.core.conversation_state import plumbing_of

CHANGES = {
    "set": lambda xs: xs.__setitem__(1, "X"),
    "set a slice": lambda xs: xs.__setitem__(slice(0, 2), ["X"]),
    "del": lambda xs: xs.__delitem__(0),
    "del a slice": lambda xs: xs.__delitem__(slice(0, 2)),
    "insert": lambda xs: xs.insert(0, "X"),
    "pop": lambda xs: xs.pop(),
    "pop the first": lambda xs: xs.pop(0),
    "remove": lambda xs: xs.remove("b"),
    "clear": lambda xs: xs.clear(),
    "sort": lambda xs: xs.sort(reverse=True),
    "reverse": lambda xs: xs.reverse(),
    "multiply": lambda xs: xs.__imul__(2),
}


@pytest.mark.parametrize("name", list(CHANGES))
def test_every_change_but_growth_is_counted_and_leaves_earlier_snapshots_as_they_were(name):
    items = GrowingList(["a", "b", "c"])
    before = items.snapshot()
    items.append("d")
    grown = items.snapshot()
    assert items.changes == 0 and list(before) == ["a", "b", "c"]  # growth: not a change, not in the snapshot
    as_list = list(items)
    CHANGES[name](as_list)
    CHANGES[name](items)
    assert items.changes == 1
    assert items == as_list  # the list itself behaves as a list does
    assert list(before) == ["a", "b", "c"] and list(grown) == ["a", "b", "c", "d"]
    assert growth_mark(items) == (items, 1) and growth_mark(before) is None  # a frozen snapshot tells nothing


def test_growth_through_every_list_operator_is_not_a_change():
    items = GrowingList(["a"])
    items.append("b")
    items.extend(["c"])
    items += ["d"]
    assert items == ["a", "b", "c", "d"] and items.changes == 0 and isinstance(items, GrowingList)


def test_a_snapshot_reads_like_the_list_it_was():
    items = GrowingList(range(10))
    view = items.snapshot()
    items.extend(range(10, 20))
    reference = list(range(10))
    assert len(view) == 10 and list(view) == reference and view == reference and view == tuple(reference)
    assert view[-1] == 9 and view[0] == 0 and view[3:7] == reference[3:7] and view[::-3] == reference[::-3]
    assert view[-4:] == reference[-4:] and list(reversed(view)) == reference[::-1] and 5 in view
    with pytest.raises(IndexError):
        view[10]  # noqa: B018 - the list has it, the snapshot does not
    with pytest.raises(IndexError):
        view[-11]  # noqa: B018
    assert view != reference + [10] and view != "0123456789"
    with pytest.raises(TypeError):
        hash(view)


def test_snapshots_nobody_keeps_are_forgotten():
    items = GrowingList(["a"])
    for _ in range(10_000):
        items.snapshot()
        items.append("b")
    gc.collect()
    kept = items.snapshot()
    assert len(items._snapshots) < 64  # noqa: SLF001 - what the list holds on to stays bounded
    del items[0]
    assert kept[0] == "a"


def test_copies_and_pickles_are_plain_growing_lists_of_the_same_items():
    items = GrowingList([Message("user", [TextPart("hi")])])
    items.snapshot()
    del items[0:0]
    for other in (copy.copy(items), copy.deepcopy(items), pickle.loads(pickle.dumps(items))):
        assert isinstance(other, GrowingList) and other == items and other.changes == 0
    assert snapshot(["a"]) == ["a"] and isinstance(snapshot(items), ListSnapshot)


def test_a_chat_session_always_holds_a_growing_list_and_round_trips():
    session = ChatSession(messages=[Message("user", [TextPart("q")])])
    assert isinstance(session.messages, GrowingList)
    session.messages = [Message("user", [TextPart("again")])]
    assert isinstance(session.messages, GrowingList)
    session.push_assistant("a")
    loaded = ChatSession.from_dict(session.to_dict())
    assert loaded == session and isinstance(loaded.messages, GrowingList)
    assert copy.deepcopy(session) == session and isinstance(copy.deepcopy(session).messages, GrowingList)


def test_memo_values_equal_a_fresh_computation_when_snapshots_and_the_live_list_alternate():
    from test_incremental_bookkeeping import ops

    rng = random.Random(20261205)
    session = ChatSession()
    memo: MessageMemo[str] = MessageMemo(repr)
    views = []
    for step in range(600):
        ops(rng, session, step)
        seen = session.messages if step % 2 else snapshot(session.messages)
        if not isinstance(seen, list):
            views.append((seen, list(seen)))
        memo.update(seen)
        assert memo.values == [repr(m) for m in seen], step
    # a snapshot keeps the message objects it was taken with (their parts are theirs: edited in place)
    assert all(len(seen) == len(kept) and all(a is b for a, b in zip(seen, kept)) for seen, kept in views)


def recorded(provider: ScriptedProvider, sent: list) -> ScriptedProvider:
    """``provider``, each request it gets kept in ``sent`` with what its messages were then."""
    stream = provider.stream

    def recording(request):
        sent.append((request, [(m.role, repr(m.parts)) for m in request.messages]))
        return stream(request)

    provider.stream = recording  # type: ignore[method-assign]
    return provider


def test_each_request_keeps_the_messages_it_was_sent_with_through_edits_compaction_and_model_switches():
    sent: list = []
    first = recorded(ScriptedProvider([text_call("ok " * 30) for _ in range(40)]), sent)
    second = recorded(ScriptedProvider([text_call("fine " * 30) for _ in range(40)]), sent)
    second.model = "another-model"
    agent = Agent(model=first, compaction_budget=1_200)
    conv = agent.conversation
    for i in range(40):
        conv.ask(f"question {i} " + "x" * (30 * (i % 4)))
        messages = conv.connection.session.messages
        if i == 10:
            messages[0] = Message("user", [TextPart("replaced by hand")])
        elif i == 20:
            del messages[-2:]
        elif i == 30:
            agent.set_model(second)  # the history is rewritten for the other model
    assert any(s.type is StepType.COMPACTION for s in conv.history)
    assert len(sent) == 40 and all(isinstance(request.messages, ListSnapshot) for request, _ in sent)
    assert all([(m.role, repr(m.parts)) for m in request.messages] == wire for request, wire in sent)
    assert sent[11][1][0] == ("user", repr([TextPart("replaced by hand")]))  # the edit reached the wire


def test_a_ledger_snapshot_is_the_turns_so_far_and_costs_no_copy():
    log = TurnLog()
    for i in range(3):
        log.open_turn(f"p{i}", model="m", provider="p", context_window=None)
    view = log.ledger
    log.open_turn("p3", model="m", provider="p", context_window=None)
    assert [t.prompt for t in view] == ["p0", "p1", "p2"] and len(log.turns) == 4
    assert growth_mark(view) == growth_mark(log.ledger)  # the same ledger, only grown: nothing to re-read
    log.clear()
    assert [t.prompt for t in view] == ["p0", "p1", "p2"] and log.turns == []


def test_turns_after_the_first_never_compare_the_whole_history_or_ledger(monkeypatch):
    from nbagent.analysis.estimate import LedgerMemo

    walks: list[str] = []
    whole_messages, whole_ledger = MessageMemo._kept, LedgerMemo._starts_as_before
    monkeypatch.setattr(MessageMemo, "_kept", lambda self, *a: walks.append("messages") or whole_messages(self, *a))
    monkeypatch.setattr(LedgerMemo, "_starts_as_before", lambda self, t: walks.append("ledger") or whole_ledger(self, t))
    provider = ScriptedProvider([text_call("fine") for _ in range(301)])
    conv = Agent(model=provider, budget_usd=1e6, pricing={"scripted-1": {"input": 1.0, "output": 2.0}}).conversation
    for i in range(300):
        conv.ask(f"q {i}")
    assert conv.budget.spent_usd > 0 and len(conv.turns) == 300
    assert len(walks) <= 4, walks  # each memo's first look only (before: 3 walks of the history a turn)
    conv.connection.session.messages[0] = Message("user", [TextPart("edited by hand")])
    conv.ask("and now?")
    assert walks.count("messages") > 3  # a hand edit: the memos look again
    assert provider.requests[-1].messages[0].parts[0].text == "edited by hand"


def test_a_conversation_state_stays_what_it_was_while_the_chat_goes_on_and_trims():
    provider = ScriptedProvider([text_call(f"answer {i}") for i in range(40)])
    conv = Agent(model=provider, max_history_size=25).conversation
    for i in range(12):
        conv.ask(f"q {i}")
    state = plumbing_of(conv).to_state()
    kept = (list(state.steps), list(state.turn_starts), list(state.turns), state.trimmed)
    assert state.trimmed > 0 and state.steps[state.turn_starts[-1]].content == "q 11"
    for i in range(12, 40):
        conv.ask(f"q {i}")
    assert plumbing_of(conv).to_state().trimmed > state.trimmed  # the history was trimmed again meanwhile
    assert all(a is b for a, b in zip(state.steps, kept[0])) and len(state.steps) == len(kept[0])
    assert list(state.turn_starts) == kept[1] and state.turn_starts == kept[1] and list(state.turns) == kept[2]
    assert [state.steps[i].content for i in state.turn_starts] == [f"q {i}" for i in range(12 - len(kept[1]), 12)]
    assert conv.turn_start_indices == list(plumbing_of(conv).to_state().turn_starts)
