"""Prices from genai-prices: the same dollars as genai-prices' own calculation, overrides,
unknown and free models, the price version, and context windows."""

from __future__ import annotations

import math

import pytest

pd = pytest.importorskip("pandas")
genai_prices = pytest.importorskip("genai_prices")

from nbagent import Agent  # noqa: E402
from nbagent.analysis import pricing  # noqa: E402
from nbagent.analysis.frames import usage_frame  # noqa: E402
from nbagent.analysis.pricing import context_window, cost, get_price, price_source, reset_prices, set_price  # noqa: E402
from nbagent.analysis.report import usage_summary  # noqa: E402
from nbagent.analysis.sessions import export_frames  # noqa: E402
from nbagent.core.ledger import TurnRecord  # noqa: E402
from nbagent.core.steps import UsageMetadata  # noqa: E402
from nbagent.loop.model_connection import ModelConnection  # noqa: E402
from nbagent.providers.base import Provider  # noqa: E402

from support.scripted import ScriptedProvider, text_call  # noqa: E402

T0 = 1_767_225_600.0
VERSION = f"genai-prices {genai_prices.__version__}"


@pytest.fixture(autouse=True)
def _no_user_prices():
    reset_prices()
    yield
    reset_prices()


def _usage(inp, cached=0, written=0, thinking=0, out=0) -> UsageMetadata:
    return UsageMetadata(inp, out, inp + out + thinking, cached, thinking, written)


def _genai_usd(model, provider_id, inp, cached, written, thinking, out) -> float:
    usage = genai_prices.Usage(input_tokens=inp, cache_read_tokens=cached, cache_write_tokens=written,
                               output_tokens=thinking + out)
    return float(genai_prices.calc_price(usage, model, provider_id=provider_id).total_price)


CASES = [  # nbagent model, nbagent provider, genai-prices provider, input, cached, written, thinking, output
    ("gpt-4.1-mini", "openai", "openai", 12_000, 8_000, 0, 0, 700),
    ("gpt-5-mini-2025-08-07", "openai-responses", "openai", 9_000, 4_096, 0, 1_200, 300),
    ("claude-sonnet-4-5-20250929", "anthropic", "anthropic", 20_000, 12_000, 6_000, 400, 900),
    ("claude-sonnet-4-5", "anthropic", "anthropic", 250_000, 100_000, 20_000, 0, 2_000),  # the >200k tier
    ("models/gemini-2.5-flash", "gemini", "google", 30_000, 20_000, 0, 2_500, 800),
    ("gemini-2.5-pro", "gemini", "google", 210_000, 0, 0, 1_000, 500),  # the >200k tier
]


@pytest.mark.parametrize("model, provider, genai_provider, inp, cached, written, thinking, out", CASES)
def test_cost_equals_genai_prices_own_calculation(model, provider, genai_provider, inp, cached, written,
                                                  thinking, out):
    expected = _genai_usd(model.removeprefix("models/"), genai_provider, inp, cached, written, thinking, out)
    assert expected > 0
    assert cost(model, inp, cached, written, thinking, out, provider=provider) == pytest.approx(expected)
    rec = TurnRecord(0, "p", model, provider, T0, T0 + 1, usage=_usage(inp, cached, written, thinking, out),
                     model_calls=1)
    df = usage_frame([rec])
    assert df.loc[0, "cost_usd"] == pytest.approx(expected)
    assert df.loc[0, "price_source"] == VERSION == pricing.PRICES_VERSION


def test_anthropic_cache_writes_cost_a_premium_openai_writes_do_not():
    claude = get_price("claude-sonnet-4-5", "anthropic")
    gpt = get_price("gpt-4.1-mini", "openai")
    assert claude.cache_write_rate == pytest.approx(1.25 * claude.input)
    assert claude.cached_rate == pytest.approx(0.1 * claude.input)
    assert gpt.cache_write_rate == gpt.input  # genai-prices lists no write rate: billed as input


def test_a_turn_of_several_calls_takes_the_tier_of_its_input_per_call():
    # 300k input over two calls is 150k a call: the base tier, not the >200k one
    rec = TurnRecord(0, "p", "claude-sonnet-4-5", "anthropic", T0, T0 + 1, usage=_usage(300_000, out=1_000),
                     model_calls=2)
    one_call = TurnRecord(1, "p", "claude-sonnet-4-5", "anthropic", T0, T0 + 1, usage=_usage(300_000, out=1_000),
                          model_calls=1)
    df = usage_frame([rec, one_call])
    assert df.loc[0, "cost_usd"] == pytest.approx((300_000 * 3.0 + 1_000 * 15.0) / 1e6)
    assert df.loc[1, "cost_usd"] == pytest.approx(_genai_usd("claude-sonnet-4-5", "anthropic", 300_000, 0, 0, 0,
                                                             1_000))
    summary = usage_summary([rec, one_call])  # the summary prices tiers alike
    assert summary.cost_usd == pytest.approx(df["cost_usd"].sum())
    assert summary.price_sources == [VERSION] and VERSION in str(summary)


def test_overrides_win_and_say_so():
    recs = [TurnRecord(0, "p", "claude-sonnet-4-5", "anthropic", T0, T0 + 1, usage=_usage(100_000, out=100_000)),
            TurnRecord(1, "p", "my-finetune", "openai", T0, T0 + 1, usage=_usage(100_000, out=100_000))]
    df = usage_frame(recs, pricing={"my-finetune": {"input": 1.0, "output": 2.0}})
    assert df["cost_usd"].tolist() == pytest.approx([1.8, 0.3])
    assert df["price_source"].tolist() == [VERSION, "override"]
    set_price("claude-sonnet-4-5", input=1.0, output=1.0)
    df = usage_frame(recs, pricing={"my-finetune": (0.5, 0.5)})
    assert df["cost_usd"].tolist() == pytest.approx([0.2, 0.1])
    assert df["price_source"].tolist() == ["override", "override"]
    # the per-call mapping wins over set_price, which wins over the catalog
    assert cost("claude-sonnet-4-5-20250929", 1_000_000, pricing={"claude-sonnet-4-5": (9.0, 1.0)}) == 9.0
    reset_prices()
    assert price_source("claude-sonnet-4-5", "anthropic") == VERSION


def test_unknown_models_cost_nan_and_local_models_are_free():
    recs = [TurnRecord(0, "p", "my-finetune", "openai", T0, T0 + 1, usage=_usage(100, out=10)),
            TurnRecord(1, "p", "gpt-5-ultra", "openai", T0, T0 + 1, usage=_usage(100, out=10)),
            TurnRecord(2, "p", "smollm2", "local", T0, T0 + 1, usage=_usage(100, out=10)),
            TurnRecord(3, "p", "demo", "demo", T0, T0 + 1, usage=_usage(100, out=10)),
            TurnRecord(4, "p", "gpt-4o", "local", T0, T0 + 1, usage=_usage(100, out=10))]  # a local file named so
    df = usage_frame(recs)
    assert df["cost_usd"].isna().tolist() == [True, True, False, False, False]
    assert df.loc[2:, "cost_usd"].tolist() == [0.0, 0.0, 0.0]
    assert df["price_source"].isna().tolist() == [True, True, False, False, False]
    assert df.loc[2:, "price_source"].tolist() == ["free"] * 3
    assert math.isnan(df.loc[0, "cache_saved_usd"]) and df.loc[2, "cache_saved_usd"] == 0.0
    assert get_price("gpt-5-ultra") is None and get_price("") is None


def test_the_price_version_travels_with_exported_frames():
    rec = TurnRecord(0, "p", "gpt-4.1-mini", "openai", T0, T0 + 1, usage=_usage(100, out=10))
    out = export_frames([], [rec])
    assert out["prices_version"] == VERSION
    assert out["usage"][0]["price_source"] == VERSION


def test_context_window_comes_from_the_catalog():
    info = genai_prices.data_snapshot.get_snapshot().find_provider_model("claude-sonnet-4-5", None, "anthropic", None)[1]
    assert context_window("claude-sonnet-4-5-20250929", "anthropic") == info.context_window == 200_000
    assert context_window("gpt-4.1-mini", "openai") == 1_000_000
    assert context_window("my-finetune", "openai") is None
    assert context_window("smollm2", "local") is None and context_window("") is None


def test_providers_report_their_window_and_the_turn_records_it():
    class Bare(Provider):
        async def stream(self, request):  # pragma: no cover - never called
            yield None

    assert Bare().context_window is None  # unknown unless the provider knows it
    provider = ScriptedProvider([text_call("hi", usage=(2_000, 500))], context_window=10_000)
    assert ModelConnection(provider).context_window == 10_000
    agent = Agent(model=provider)
    agent.conversation.ask("hello")
    assert agent.conversation.turns[0].context_window == 10_000
    df = agent.conversation.usage_df()
    assert df.loc[0, "context_tokens"] == 2_500 and df.loc[0, "context_window"] == 10_000
    assert df.loc[0, "context_fill"] == pytest.approx(0.25)
