"""Prompt-cache analytics and the context gauge in usage_df: hit ratio, dollars saved, cache
busts with their cause (from the loop's prefix-change detection), context fill."""

from __future__ import annotations

import itertools
import math
import types

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("genai_prices")

import nbagent.core.turn_log as turn_log_mod  # noqa: E402
from nbagent import Agent, tool  # noqa: E402
from nbagent.analysis.pricing import get_price, reset_prices  # noqa: E402
from nbagent.analysis.sessions import export_frames, load_sessions  # noqa: E402
from nbagent.core.connection import MockConnection  # noqa: E402
from nbagent.conversation import Conversation  # noqa: E402
from nbagent.core.errors import NbagentError  # noqa: E402
from nbagent.core.steps import (FinishReason, PrefixChange, Step, StepSource, StepStatus, StepTarget,  # noqa: E402
                                StepType, ToolCall, UsageMetadata)
from nbagent.providers.base import Finish, TextDelta, Usage  # noqa: E402

from support.scripted import ScriptedProvider, text_call, tool_call  # noqa: E402

MODEL = "claude-sonnet-4-5"
_ids = itertools.count()


@pytest.fixture(autouse=True)
def _catalog_prices():
    reset_prices()
    yield
    reset_prices()


@pytest.fixture
def clock(monkeypatch):
    """The conversation's clock: each reading advances 1 s; ``clock.skip(s)`` jumps ahead."""
    state = types.SimpleNamespace(now=1_767_225_600.0)

    def now() -> float:
        state.now += 1.0
        return state.now

    state.skip = lambda seconds: setattr(state, "now", state.now + seconds)
    monkeypatch.setattr(turn_log_mod, "time", types.SimpleNamespace(time=now))
    return state


def model_step(inp, cached=0, written=0, out=100, thinking=0, change=None, calls=()):
    i = next(_ids)
    return Step(id=f"m{i}", step_index=i, type=StepType.TOOL_CALL if calls else StepType.TEXT_RESPONSE,
                source=StepSource.MODEL, target=StepTarget.USER, status=StepStatus.DONE,
                content="" if calls else "ok", thinking="hmm" if thinking else "", tool_calls=list(calls),
                usage_metadata=UsageMetadata(inp, out, inp + out + thinking, cached, thinking, written),
                model=MODEL, prefix_change=change, finish_reason=FinishReason.TOOL_CALLS if calls else FinishReason.STOP)


def tool_step(call, content):
    i = next(_ids)
    return Step(id=f"t{i}", step_index=i, type=StepType.TOOL_CALL, source=StepSource.SYSTEM,
                target=StepTarget.ENVIRONMENT, status=StepStatus.DONE, content=content, tool_calls=[call])


def scripted_turns():
    search = ToolCall("c1", "search", {"q": "pandas"})
    return [
        [model_step(3_100, written=3_000, out=200)],  # 0: writes the cache
        [model_step(3_600, cached=3_000, written=500, out=50, thinking=300, calls=[search]),  # 1: reads, tools
         tool_step(search, "results " * 200),
         model_step(5_000, cached=3_500, written=1_400, out=250)],
        [model_step(5_400, written=5_300, out=120, change=PrefixChange.SYSTEM)],  # 2: system prompt changed
        [model_step(5_700, written=5_600, out=120, change=PrefixChange.TOOLS)],  # 3: a tool was added
        [model_step(5_200, written=5_100, out=120, change=PrefixChange.HISTORY)],  # 4: history edited
        [NbagentError("overloaded", kind="server", http_code=529)],  # 5: fails before any usage
        [model_step(5_500, written=5_400, out=90)],  # 6: after a 6-minute pause, nothing changed
        [model_step(5_800, cached=5_400, written=300, out=80)],  # 7: a warm cache again
    ]


def run_scripted(clock) -> Conversation:
    conv = Conversation(MockConnection(scripted_turns()))
    for i in range(8):
        if i == 6:
            clock.skip(360)
        try:
            conv.ask(f"prompt {i}")
        except NbagentError:
            assert i == 5
    return conv


def test_cache_columns_on_a_scripted_conversation(clock):
    conv = run_scripted(clock)
    df = conv.usage_df()
    assert len(df) == 8 and df.loc[5, "status"] == "error"  # the failed turn keeps its row
    assert df["cache_busted"].tolist() == [False, False, True, True, True, False, True, False]
    causes = df["cache_bust_cause"].astype(object).where(df["cache_bust_cause"].notna(), None).tolist()
    assert causes == [None, None, "system", "tools", "history", None, "expired", None]
    assert df["cache_bust_cause"].dtype == "category" and "compaction" in df["cache_bust_cause"].cat.categories
    # hit ratio: the turn's cache reads over its input tokens (both calls of turn 1)
    assert df.loc[1, "cache_hit_ratio"] == pytest.approx((3_000 + 3_500) / (3_600 + 5_000))
    assert df.loc[0, "cache_hit_ratio"] == 0.0 and math.isnan(df.loc[5, "cache_hit_ratio"])
    # saved: reads at the cache rate instead of input, writes at the write premium
    p = get_price(MODEL)
    saved = [(c * (p.input - p.cached_rate) - w * (p.cache_write_rate - p.input)) / 1e6
             for c, w in zip(df["cached_tokens"].astype(float), df["cache_write_tokens"].astype(float))]
    assert df["cache_saved_usd"].drop(index=5).tolist() == pytest.approx(saved[:5] + saved[6:])
    assert df.loc[0, "cache_saved_usd"] < 0 < df.loc[1, "cache_saved_usd"]  # a write costs, a read pays back
    assert math.isnan(df.loc[5, "cache_saved_usd"])  # the failed turn has no model, so no price
    no_cache = df["cost_usd"] + df["cache_saved_usd"]
    full = [(i * p.input + (o + t) * p.output) / 1e6 for i, o, t in
            zip(df["input_tokens"], df["output_tokens"], df["thinking_tokens"])]
    assert no_cache.drop(index=5).tolist() == pytest.approx(full[:5] + full[6:])


def test_context_gauge_columns(clock):
    conv = run_scripted(clock)
    df = conv.usage_df()
    # tokens in context after the turn: the last call's input + output; the window from the catalog
    assert df.loc[1, "context_tokens"] == 5_000 + 250 and df.loc[0, "context_tokens"] == 3_100 + 200
    assert pd.isna(df.loc[5, "context_tokens"]) and math.isnan(df.loc[5, "context_fill"])
    assert df.loc[0, "context_window"] == 200_000
    assert df.loc[1, "context_fill"] == pytest.approx(5_250 / 200_000)
    assert df["price_source"].drop(index=5).str.startswith("genai-prices").all()
    assert pd.isna(df.loc[5, "price_source"])


def test_json_rows_and_many_sessions_keep_the_columns(clock, tmp_path):
    conv = run_scripted(clock)
    rows = export_frames(conv.history, conv.turns)["usage"]
    assert [r["cache_busted"] for r in rows] == [False, False, True, True, True, False, True, False]
    assert rows[2]["cache_bust_cause"] == "system" and rows[0]["cache_bust_cause"] is None
    assert rows[1]["context_window"] == 200_000 and rows[5]["cache_saved_usd"] is None
    for name in ("a", "b"):
        conv.save(tmp_path / f"{name}.json")
    many = load_sessions(str(tmp_path / "*.json"))
    assert len(many) == 16
    # busts never reach across sessions: each session's first turn starts afresh
    assert many["cache_busted"].tolist() == [False, False, True, True, True, False, True, False] * 2
    assert many["cache_bust_cause"].isna().tolist()[8:11] == [True, True, False]
    assert many.loc[10, "cache_bust_cause"] == "system"


def test_a_bust_without_a_prefix_change_or_a_pause_is_unknown():
    records = [model_step(4_000, written=3_900), model_step(4_400, cached=0, written=4_300)]
    conv = Conversation(MockConnection([[s] for s in records]))
    conv.ask("a")
    conv.ask("b")
    df = conv.usage_df()
    assert df["cache_busted"].tolist() == [False, True]
    assert df.loc[1, "cache_bust_cause"] == "unknown"


# --- the loop detects what changed in the request prefix ----------------------------------


def cached_call(text, inp, cached, written):
    return [TextDelta(text), Usage(UsageMetadata(inp, 20, inp + 20, cached, 0, written)),
            Finish(FinishReason.STOP, "stop")]


@tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


@tool
def extra(x: int) -> int:
    """Doubles x."""
    return 2 * x


def model_steps(conv):
    return [s for s in conv.history if s.source == StepSource.MODEL]


def test_the_loop_sets_prefix_change_on_model_steps():
    provider = ScriptedProvider([
        text_call("one"), tool_call(("k1", "lookup", {"key": "a"})), text_call("two"),  # turns 0 and 1
        text_call("three"), text_call("four"), text_call("five"), text_call("six"), text_call("seven"),
        text_call("eight"), text_call("nine"),
    ])
    agent = Agent(model=provider, system="Be brief.", tools=[lookup])
    conv, conn = agent.conversation, agent.conversation.connection
    conv.ask("first")
    conv.ask("use the tool")  # two model calls: the second extends the first, intact
    conn.session.with_system("Be very brief.")
    conv.ask("after a system change")
    conn.tool_runner.tools["extra"] = extra
    conv.ask("after a tool was added")
    conn.session.messages[0].parts[0].text = "an edited first prompt"
    conv.ask("after an edit")
    conv.ask("nothing changed")
    del conn.session.messages[:4]
    conv.ask("after trimming")
    provider.model = "scripted-2"
    conv.ask("after a model switch")
    conn.compaction_budget = 300  # the history is larger: the next call compacts it first
    conv.ask("after a compaction " + "x" * 2_000)
    changes = [s.prefix_change for s in model_steps(conv)]
    assert changes == [None, None, None, PrefixChange.SYSTEM, PrefixChange.TOOLS, PrefixChange.HISTORY, None,
                       PrefixChange.HISTORY, PrefixChange.MODEL, PrefixChange.COMPACTION]
    assert [t.prefix_change for t in conv.turns] == [None, None, PrefixChange.SYSTEM, PrefixChange.TOOLS,
                                                     PrefixChange.HISTORY, None, PrefixChange.HISTORY,
                                                     PrefixChange.MODEL, PrefixChange.COMPACTION]
    assert any(s.type == StepType.COMPACTION for s in conv.history)


def test_a_system_change_in_the_loop_shows_as_a_system_bust_in_usage_df():
    provider = ScriptedProvider([cached_call("a", 3_000, 0, 2_900), cached_call("b", 3_200, 2_900, 250),
                                 cached_call("c", 3_400, 0, 3_300)])
    provider.model = MODEL
    agent = Agent(model=provider, system="You are terse.")
    conv = agent.conversation
    conv.ask("one")
    conv.ask("two")
    conv.connection.session.with_system("You are verbose.")
    conv.ask("three")
    df = conv.usage_df()
    assert df["cache_busted"].tolist() == [False, False, True]
    assert df.loc[2, "cache_bust_cause"] == "system"
    assert df.loc[1, "cache_hit_ratio"] == pytest.approx(2_900 / 3_200)
    assert df.loc[2, "context_window"] == 100_000  # the provider's window wins over the catalog's
