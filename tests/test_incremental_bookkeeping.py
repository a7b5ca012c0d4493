"""Per-turn bookkeeping kept incrementally gives what a from-scratch pass over the history gives.

The compaction token count and the prompt-cache prefix check keep per-message values between model
calls (``core/message_memo.py``); these tests run the same conversations and edits against a
computation over the whole history each call and compare every result.
"""

from __future__ import annotations

import math
import random

import pytest

from nbagent import Agent, tool
from nbagent.analysis.estimate import LedgerMemo, turn_cost
from nbagent.analysis.pricing import reset_prices, set_price
from nbagent.core.chat_session import ChatSession
from nbagent.core.compression import ApproxTokenizer
from nbagent.core.ledger import TurnRecord
from nbagent.core.message_memo import MessageMemo
from nbagent.core.messages import Message, TextPart, ToolResultPart, ToolUsePart, note_edit
from nbagent.core.steps import PrefixChange, StepSource, StepType, UsageMetadata
from nbagent.loop import request_prefix
from nbagent.loop.request_prefix import PrefixTracker, part_fingerprints

from support.scripted import ScriptedProvider, text_call, tool_call


def scratch_count(tokenizer: ApproxTokenizer, session: ChatSession) -> int:
    return (tokenizer.count(session.system) if session.system else 0) + sum(
        tokenizer.count_message(m) for m in session.messages)


class CheckedTokenizer(ApproxTokenizer):
    """Counts incrementally (the real code path) and records each count beside a from-scratch one."""

    def __init__(self) -> None:
        super().__init__()
        self.pairs: list[tuple[int, int]] = []

    def count_session(self, session) -> int:
        total = super().count_session(session)
        self.pairs.append((total, scratch_count(ApproxTokenizer(), session)))
        return total


class ScratchPrefix:
    """The prefix check over the whole history each call: fingerprints of every part, afresh."""

    def __init__(self) -> None:
        self.model = self.system = self.tools = None
        self.parts: list[int] | None = None
        self.compacted_flag = False

    def observe(self, model, system, tools, messages):
        tools_key = [(t.name, t.description, t.input_schema) for t in tools]
        parts = [f for m in messages for f in part_fingerprints(m)]
        previous, change = self.parts, None
        if previous is None:
            change = None
        elif model != self.model:
            change = PrefixChange.MODEL
        elif self.compacted_flag:
            change = PrefixChange.COMPACTION
        elif system != self.system:
            change = PrefixChange.SYSTEM
        elif tools_key != self.tools:
            change = PrefixChange.TOOLS
        elif parts[:len(previous)] != previous:
            change = PrefixChange.HISTORY
        self.model, self.system, self.tools, self.parts = model, system, tools_key, parts
        self.compacted_flag = False
        return change

    def replied(self, messages):
        if self.parts is not None:
            self.parts = [f for m in messages for f in part_fingerprints(m)]


class CheckedTracker(PrefixTracker):
    def __init__(self) -> None:
        super().__init__()
        self.scratch = ScratchPrefix()
        self.pairs: list[tuple] = []

    def compacted(self) -> None:
        super().compacted()
        self.scratch.compacted_flag = True

    def observe(self, model, system, tools, messages):
        change = super().observe(model, system, tools, messages)
        self.pairs.append((change, self.scratch.observe(model, system, tools, list(messages))))
        return change

    def replied(self, messages) -> None:
        super().replied(messages)
        self.scratch.replied(list(messages))


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def extra(x: int) -> int:
    """Double x."""
    return 2 * x


def checked_agent(provider: ScriptedProvider, **kw) -> tuple[Agent, CheckedTokenizer, CheckedTracker]:
    agent = Agent(model=provider, system="Be brief.", tools=[lookup], **kw)
    conn = agent.conversation.connection
    conn.tokenizer, conn.prefix_tracker = CheckedTokenizer(), CheckedTracker()
    return agent, conn.tokenizer, conn.prefix_tracker


def test_prefix_changes_and_counts_match_a_from_scratch_pass_through_every_kind_of_edit():
    provider = ScriptedProvider([text_call(f"answer {i}") if i != 1 else tool_call(("k1", "lookup", {"key": "a"}))
                                 for i in range(40)])
    agent, tok, tracker = checked_agent(provider)
    conv, conn = agent.conversation, agent.conversation.connection
    conv.ask("first")
    conv.ask("use the tool")  # a tool round: the second call extends the first
    for i in range(5):
        conv.ask(f"plain turn {i}")
    conn.session.with_system("Be very brief.")
    conv.ask("after a system change")
    conn.tool_runner.tools["extra"] = extra
    conv.ask("after a tool was added")
    conn.session.messages[0].parts[0].text = "firsT"  # an in-place edit of the same length
    conv.ask("after a same-length edit of the first prompt")
    conn.session.messages[2] = Message("user", [TextPart("a replaced message")])
    conv.ask("after a replaced message")
    conn.session.messages[4].parts.append(TextPart("an added part"))
    note_edit()  # a parts list of an older message changed in place
    conv.ask("after a part added to an older message")
    conv.ask("nothing changed")
    del conn.session.messages[:4]
    conv.ask("after trimming")
    conn.session.append_to_last_user("a note on the last user message")
    conv.ask("after append_to_last_user")
    provider.model = "scripted-2"
    conv.ask("after a model switch")
    conv.clear_history()  # the step history goes, the model history stays: the prefix is intact
    conv.ask("after clear_history")
    conn.compaction_budget = 300
    conv.ask("after a compaction " + "x" * 2_000)
    conn.compaction_budget = None
    conv.ask("after the compaction")
    agent.reset()  # a fresh model history
    conv.ask("after reset")
    conv.ask("after reset, again")

    assert tracker.pairs and all(ours == scratch for ours, scratch in tracker.pairs), tracker.pairs
    assert tok.pairs and all(ours == scratch for ours, scratch in tok.pairs), tok.pairs
    seen = {ours for ours, _ in tracker.pairs}
    assert seen == {None, *PrefixChange}, seen  # every cause happened, each one agreed
    H = PrefixChange.HISTORY
    assert [ours for ours, _ in tracker.pairs] == [
        None, None, None, *[None] * 5, PrefixChange.SYSTEM, PrefixChange.TOOLS,
        H, H, H,  # a same-length in-place edit, a replaced message, a part added to an older message
        None, H, H,  # nothing changed; a trim; append_to_last_user
        PrefixChange.MODEL, None, PrefixChange.COMPACTION, None,  # clear_history keeps the model history
        H, None]  # reset: a fresh model history


def test_a_model_switch_through_set_model_rewrites_the_history_and_both_agree():
    provider = ScriptedProvider([text_call(f"answer {i}", thinking="hm") for i in range(4)])
    agent, tok, tracker = checked_agent(provider)
    agent.conversation.ask("one")
    agent.conversation.ask("two")
    other = ScriptedProvider([text_call("three"), text_call("four")])
    other.model = "scripted-other"
    agent.set_model(other)  # thoughts leave the model history: every message is rewritten
    agent.conversation.ask("three")
    agent.conversation.ask("four")
    assert [ours for ours, _ in tracker.pairs] == [None, None, PrefixChange.MODEL, None]
    assert all(ours == scratch for ours, scratch in tracker.pairs)
    assert all(ours == scratch for ours, scratch in tok.pairs)


def test_compaction_triggers_on_the_same_call_as_a_from_scratch_count():
    provider = ScriptedProvider([text_call("ok " * 40) for _ in range(60)])
    agent, tok, _ = checked_agent(provider, compaction_budget=1_500)
    conv = agent.conversation
    for i in range(60):
        conv.ask(f"question {i} " + "y" * (37 * (i % 5)))
    compactions = [s for s in conv.history if s.type == StepType.COMPACTION]
    assert len(compactions) >= 2  # the budget was crossed again after compacting
    assert all(ours == scratch for ours, scratch in tok.pairs)
    for step in compactions:  # each compaction started from a count above the budget: the true one
        assert step.compaction.tokens_before > step.compaction.budget >= step.compaction.tokens_after


def ops(rng: random.Random, session: ChatSession, step: int) -> None:
    """One random edit of the kinds the loop, compressors and users make."""
    messages = session.messages
    kind = rng.randrange(20)
    if kind <= 7 or len(messages) < 3:
        session.push_user(f"prompt {step} " + "z" * rng.randrange(40))
        session.push_assistant(f"reply {step}")
    elif kind <= 9:
        session.push_user(f"prompt {step}")
        session.push_assistant(Message("assistant", [TextPart(f"reply {step}"),
                                                     ToolUsePart(f"c{step}", "lookup", {"k": step})]))
        session.push_tool_results([ToolResultPart(f"c{step}", "r" * rng.randrange(90), name="lookup")])
    elif kind <= 11:
        session.append_to_last_user(f"note {step}")
    elif kind <= 13:
        i = rng.randrange(len(messages))
        messages[i] = Message(messages[i].role, [TextPart(f"replaced {step}")])
    elif kind == 14:
        del messages[:rng.randrange(1, 3)]
    elif kind <= 17:
        part = rng.choice(rng.choice(messages).parts or [TextPart("")])
        if isinstance(part, TextPart):
            part.text = part.text[::-1] + "!"
    elif kind == 18:
        rng.choice(messages).parts.append(TextPart(f"added {step}"))
        note_edit()
    else:
        session.messages = list(messages)  # the same messages in a new list


def test_message_memo_values_always_equal_a_fresh_computation():
    rng = random.Random(20261201)
    session = ChatSession()
    computed = []

    def compute(message: Message) -> str:
        computed.append(message)
        return repr(message)

    memo: MessageMemo[str] = MessageMemo(compute)
    for step in range(600):
        ops(rng, session, step)
        memo.update(session.messages)
        assert memo.values == [repr(m) for m in session.messages], step
    assert len(session.messages) > 300
    assert len(computed) < 2_000  # values were kept: a pass over the whole history each step computes 170,000


def test_a_growing_history_computes_only_its_new_messages():
    session, computed = ChatSession(), []
    memo: MessageMemo[int] = MessageMemo(lambda m: computed.append(m) or len(m.parts))
    for i in range(300):
        session.push_user(f"q {i}")
        memo.update(session.messages)
        session.push_tool_results([ToolResultPart(f"c{i}", "result", name="t")])  # grows the last message
        memo.update(session.messages)
        session.push_assistant(f"a {i}")
        memo.update(session.messages)
    assert len(computed) == 900  # each message once, plus once again when its parts grew
    assert memo.values == [len(m.parts) for m in session.messages]


def test_the_loop_walks_only_new_messages_per_call(monkeypatch):
    calls = []
    monkeypatch.setattr(request_prefix, "part_fingerprints", lambda m: calls.append(m) or part_fingerprints(m))
    provider = ScriptedProvider([text_call("fine") for _ in range(200)])
    agent = Agent(model=provider)
    for i in range(200):
        agent.conversation.ask(f"q {i}")
    assert len(calls) <= 3 * 200  # each prompt at its request and again with its reply; each reply once
    assert [s.source for s in agent.conversation.history].count(StepSource.MODEL) == 200


# --- the ledger: spend and expected output, kept between estimates ----------------------------


def scratch_ledger(turns, pricing) -> tuple[float, int, int]:
    """Spend, unpriced turns and mean generated tokens over every turn, priced afresh."""
    total, unpriced = 0.0, 0
    for rec in turns:
        if not rec.usage.total_token_count and not rec.usage.prompt_token_count:
            continue
        cost = turn_cost(rec, pricing)
        if math.isnan(cost):
            unpriced += 1
        else:
            total += cost
    generated = [t.usage.candidates_token_count + t.usage.thoughts_token_count for t in turns
                 if t.usage.candidates_token_count or t.usage.thoughts_token_count]
    return total, unpriced, round(sum(generated) / len(generated)) if generated else 0


def test_spend_and_expected_output_match_a_from_scratch_pass_through_price_changes():
    script = [text_call("ok " * (i % 7 + 1), usage=(100 + 40 * i, 3 + i % 4)) for i in range(40)]
    script[3:3] = [tool_call(("k1", "lookup", {"key": "a"}), usage=(500, 50))]  # the budget is checked mid-turn
    provider = ScriptedProvider(script)
    provider.model = "ledger-model-a"
    prices = {"ledger-model-a": {"input": 1.0, "output": 4.0}}
    agent = Agent(model=provider, budget_usd=1e6, pricing=prices, tools=[lookup])
    conv = agent.conversation
    checks = []

    def check():
        est = conv.estimate("next")
        ours = (est.spent_usd, est.unpriced_turns, est.expected_output_tokens)
        checks.append((ours, scratch_ledger(conv.turns, conv.budget.pricing)))
        checks.append(((conv.budget.spent_usd, 0, 0), (scratch_ledger(conv.turns, conv.budget.pricing)[0], 0, 0)))

    try:
        for i in range(40):
            conv.ask(f"question {i}")
            check()
            if i == 8:
                prices["ledger-model-a"] = {"input": 2.0, "output": 4.0}  # the override edited in place
            elif i == 14:
                set_price("ledger-model-b", input=3.0, output=9.0)
                provider.model = "ledger-model-b"  # later turns on another model, priced by set_price
            elif i == 20:
                set_price("ledger-model-b", input=5.0, output=9.0)  # its price changes
            elif i == 26:
                provider.model = "ledger-model-unpriced"  # turns without a price
            elif i == 30:
                conv.budget.pricing = {"ledger-model-a": {"input": 0.5, "output": 1.0}}  # new overrides
            elif i == 34:
                conv.clear_history()
    finally:
        reset_prices("ledger-model-b")
    assert all(ours == scratch for ours, scratch in checks), [c for c in checks if c[0] != c[1]]
    spent = [ours[0] for ours, _ in checks[::2]]
    assert spent[9] > 2 * spent[8] - spent[7] and checks[-2][0][1] > 0  # the edits moved the figures
    assert len({ours[0] for ours, _ in checks[::2]}) > 20


def test_a_ledger_prices_each_finished_turn_once():
    priced = []

    class Counted(dict):  # a pricing mapping that counts how often a model's price is looked up
        def __contains__(self, key):
            priced.append(key)
            return super().__contains__(key)

    records = []
    memo = LedgerMemo()
    pricing = Counted({"m": {"input": 1.0, "output": 2.0}})
    for i in range(300):
        records.append(TurnRecord(turn=i, model="m", usage=UsageMetadata(100, 10, 110), model_calls=1))
        memo.totals(list(records), pricing)
    assert len(priced) < 3 * 300  # one price check per call, not one per turn per call
    assert memo.totals(records, pricing).spent.usd == pytest.approx(scratch_ledger(records, pricing)[0])
