"""History / usage / tool-call DataFrames, pricing, many sessions, summary and plot."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")

from nbagent.analysis import pricing as pricing_mod  # noqa: E402
from nbagent.core.errors import NbagentError  # noqa: E402
from nbagent.analysis.literal_frame import literal_html  # noqa: E402
from nbagent.analysis.frames import (  # noqa: E402
    HISTORY_COLUMNS,
    TOOL_CALL_COLUMNS,
    USAGE_COLUMNS,
    history_frame,
    tool_calls_frame,
    usage_frame,
)
from nbagent.analysis.sessions import export_frames, load_sessions  # noqa: E402
from nbagent.analysis.report import plot_usage, usage_summary  # noqa: E402
from nbagent.core.ledger import TurnRecord  # noqa: E402
from nbagent.analysis.pricing import Price, cost, get_price, reset_prices, set_price  # noqa: E402
from nbagent.core.steps import (  # noqa: E402
    ApprovalDecision,
    FinishReason,
    Step,
    StepSource,
    StepStatus,
    StepTarget,
    StepType,
    ToolCall,
    UsageMetadata,
)

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
UTC0 = pd.Timestamp("2026-01-01", tz="UTC")
LONG_PROMPT = "Tell me a long story about a dragon who learns to code in Python and pandas. " * 3


@pytest.fixture(autouse=True)
def _no_user_prices():
    reset_prices()
    yield
    reset_prices()


# --- the scripted conversation ----------------------------------------------------------


def _prompt(i, turn, text, t):
    return Step(id=f"s{i}", step_index=i, type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                target=StepTarget.UNSPECIFIED, status=StepStatus.DONE, content=text,
                created_at=t, finished_at=t, turn=turn)


def _finish(i, turn, t, reason, status=StepStatus.DONE):
    return Step(id=f"s{i}", step_index=i, type=StepType.FINISH, source=StepSource.SYSTEM,
                target=StepTarget.USER, status=status, created_at=t, finished_at=t, turn=turn,
                finish_reason=reason)


def scripted_steps() -> list[Step]:
    calc = ToolCall("call_1", "calculator", {"expression": "2+2"})
    rm = ToolCall("call_2", "delete_file", {"path": "/tmp/x", "force": True})
    story = ToolCall("call_3", "save_story", {"title": "Dragon"})
    return [
        # turn 0: a normal answer
        _prompt(0, 0, "What is the capital of France?", T0),
        Step(id="s1", step_index=1, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
             target=StepTarget.USER, status=StepStatus.DONE, content="Paris.",
             usage_metadata=UsageMetadata(100, 20, 120, 0, 0), created_at=T0 + 0.1, finished_at=T0 + 1.1,
             turn=0, model="gpt-4.1-mini", finish_reason="STOP"),
        _finish(2, 0, T0 + 1.1, "STOP"),
        # turn 1: thinking, two tool calls (one denied), then the answer
        _prompt(3, 1, "Compute 2+2 and delete /tmp/x", T0 + 10),
        Step(id="s4", step_index=4, type=StepType.TOOL_CALL, source=StepSource.MODEL,
             target=StepTarget.USER, status=StepStatus.DONE, thinking="I need the calculator.",
             tool_calls=[calc, rm], usage_metadata=UsageMetadata(200, 30, 280, 0, 50),
             created_at=T0 + 10.1, finished_at=T0 + 11.0, turn=1, model="gpt-4.1-mini"),
        Step(id="s5", step_index=5, type=StepType.TOOL_CALL, source=StepSource.SYSTEM,
             target=StepTarget.ENVIRONMENT, status=StepStatus.DONE, content="4", tool_calls=[calc],
             created_at=T0 + 11.0, finished_at=T0 + 11.25, turn=1, approval="auto", run_seconds=0.05),
        Step(id="s6", step_index=6, type=StepType.TOOL_CALL, source=StepSource.SYSTEM,
             target=StepTarget.ENVIRONMENT, status=StepStatus.ERROR, content="The user denied this call.",
             error="denied by the user", tool_calls=[rm], created_at=T0 + 11.0, finished_at=T0 + 13.0,
             turn=1, approval="denied"),
        Step(id="s7", step_index=7, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
             target=StepTarget.USER, status=StepStatus.DONE, content="2+2 = 4; I did not delete /tmp/x.",
             usage_metadata=UsageMetadata(300, 40, 340, 0, 0), created_at=T0 + 13.0, finished_at=T0 + 14.0,
             turn=1, model="gpt-4.1-mini"),
        _finish(8, 1, T0 + 14.0, "STOP"),
        # turn 2: cache reads and writes (Anthropic, dated model name)
        _prompt(9, 2, "Summarise the attached document", T0 + 20),
        Step(id="s10", step_index=10, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
             target=StepTarget.USER, status=StepStatus.DONE, content="A summary.",
             usage_metadata=UsageMetadata(1000, 50, 1050, 600, 0, 300), created_at=T0 + 20.1, finished_at=T0 + 22.0,
             turn=2, model="claude-sonnet-4-5-20250929"),
        _finish(11, 2, T0 + 22.0, "STOP"),
        # turn 3: HTTP 429
        _prompt(12, 3, "Again?", T0 + 30),
        Step(id="s13", step_index=13, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
             target=StepTarget.USER, status=StepStatus.ERROR, error="rate limited", http_code=429,
             created_at=T0 + 30.1, finished_at=T0 + 30.5, turn=3),
        _finish(14, 3, T0 + 30.5, "ERROR", StepStatus.ERROR),
        # turn 4: interrupted mid-stream; its tool call never ran
        _prompt(15, 4, LONG_PROMPT, T0 + 40),
        Step(id="s16", step_index=16, type=StepType.TOOL_CALL, source=StepSource.MODEL,
             target=StepTarget.USER, status=StepStatus.CANCELED, content="Once upon a time",
             thinking="A story about", tool_calls=[story], usage_metadata=UsageMetadata(50, 5, 55, 0, 0),
             created_at=T0 + 40.1, finished_at=None, turn=4),
        _finish(17, 4, T0 + 41.0, "INTERRUPTED"),
    ]


def scripted_records() -> list[TurnRecord]:
    return [
        TurnRecord(0, "What is the capital of France?", "gpt-4.1-mini", "openai", T0, T0 + 1.1, T0 + 0.6,
                   UsageMetadata(100, 20, 120, 0, 0), 1, 0, "STOP", "done"),
        TurnRecord(1, "Compute 2+2 and delete /tmp/x", "gpt-4.1-mini", "openai", T0 + 10, T0 + 14.0, T0 + 10.5,
                   UsageMetadata(500, 70, 620, 0, 50), 2, 2, "STOP", "done"),
        TurnRecord(2, "Summarise the attached document", "claude-sonnet-4-5-20250929", "anthropic", T0 + 20,
                   T0 + 22.0, T0 + 21.0, UsageMetadata(1000, 50, 1050, 600, 0, 300), 1, 0, "STOP", "done"),
        TurnRecord(3, "Again?", "gpt-4.1-mini", "openai", T0 + 30, T0 + 30.5, None, UsageMetadata(), 1, 0,
                   "ERROR", "error", "rate limited", 429),
        TurnRecord(4, LONG_PROMPT, "gpt-4o-2024-08-06", "openai", T0 + 40, T0 + 41.0, T0 + 40.5,
                   UsageMetadata(50, 5, 55, 0, 0), 1, 0, FinishReason.INTERRUPTED, "interrupted"),
    ]


# expected USD per turn (USD per 1M tokens from nbagent.analysis.pricing)
COSTS = [
    (100 * 0.40 + 20 * 1.60) / 1e6,  # gpt-4.1-mini
    (500 * 0.40 + (70 + 50) * 1.60) / 1e6,  # thinking billed as output
    (100 * 3.00 + 600 * 0.30 + 300 * 3.75 + 50 * 15.00) / 1e6,  # uncached + cache read + cache write
    0.0,  # the failed turn used no tokens
    (50 * 2.50 + 5 * 10.00) / 1e6,  # gpt-4o snapshot name
]


def _is_utc(dtype) -> bool:
    return isinstance(dtype, pd.DatetimeTZDtype) and str(dtype.tz) == "UTC"


def _cats(series) -> list:
    return list(series.cat.categories)


def _values(series) -> list:
    return [None if pd.isna(v) else v for v in series.tolist()]


# --- history ----------------------------------------------------------------------------


def test_history_frame_dtypes():
    df = history_frame(scripted_steps())
    assert tuple(df.columns) == HISTORY_COLUMNS
    assert df.index.name == "step_index" and df.index.dtype == np.int64
    assert df.index.tolist() == list(range(18))
    assert df["turn"].dtype == np.int64
    for col, enum in (("type", StepType), ("source", StepSource), ("target", StepTarget), ("status", StepStatus)):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
        assert _cats(df[col]) == [m.value for m in enum], col
    for col in ("content", "thinking", "tool_names", "error"):
        assert df[col].dtype == pd.StringDtype(), col
    for col in ("input_tokens", "cached_tokens", "cache_write_tokens", "thinking_tokens", "output_tokens",
                "total_tokens", "http_code"):
        assert df[col].dtype == pd.Int64Dtype(), col
    assert _is_utc(df["created"].dtype) and _is_utc(df["finished"].dtype)
    assert df["duration_s"].dtype == np.float64


def test_history_frame_values():
    df = history_frame(scripted_steps())
    assert df["turn"].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert df.loc[1, "type"] == "TEXT_RESPONSE" and df.loc[4, "type"] == "TOOL_CALL"
    assert df.loc[0, "source"] == "USER" and df.loc[1, "source"] == "MODEL" and df.loc[5, "source"] == "SYSTEM"
    assert df.loc[0, "target"] == "UNSPECIFIED" and df.loc[5, "target"] == "ENVIRONMENT"
    assert df.loc[6, "status"] == "ERROR" and df.loc[16, "status"] == "CANCELED"
    assert df["status"].value_counts()["WAITING_FOR_USER"] == 0  # every category present
    assert df.loc[1, "content"] == "Paris." and df.loc[16, "content"] == "Once upon a time"
    assert df.loc[4, "thinking"] == "I need the calculator." and df.loc[1, "thinking"] == ""
    assert _values(df["tool_names"]) == [None] * 4 + ["calculator,delete_file", "calculator", "delete_file"] + \
        [None] * 9 + ["save_story", None]
    assert _values(df["input_tokens"]) == [None, 100, None, None, 200, None, None, 300, None, None, 1000, None,
                                            None, None, None, None, 50, None]
    assert df.loc[10, "cached_tokens"] == 600 and df.loc[10, "cache_write_tokens"] == 300
    assert df.loc[1, "cache_write_tokens"] == 0 and pd.isna(df.loc[0, "cache_write_tokens"])
    assert df.loc[4, "thinking_tokens"] == 50 and df.loc[4, "output_tokens"] == 30
    assert df.loc[4, "total_tokens"] == 280
    assert pd.isna(df.loc[13, "input_tokens"])  # the failed call has no usage
    assert _values(df["http_code"]) == [None] * 13 + [429] + [None] * 4
    assert df.loc[13, "error"] == "rate limited" and df.loc[6, "error"] == "denied by the user"
    assert df["error"].notna().sum() == 2
    assert df.loc[0, "created"] == UTC0 and df.loc[1, "finished"] == UTC0 + pd.Timedelta(seconds=1.1)
    assert pd.isna(df.loc[16, "finished"]) and math.isnan(df.loc[16, "duration_s"])
    assert df.loc[6, "duration_s"] == pytest.approx(2.0)
    # the usage of every step sums to the ledger
    assert int(df["total_tokens"].sum()) == sum(r.usage.total_token_count for r in scripted_records())


def test_history_frame_empty_and_foreign_values():
    df = history_frame([])
    assert tuple(df.columns) == HISTORY_COLUMNS and len(df) == 0
    assert df["input_tokens"].dtype == pd.Int64Dtype() and _is_utc(df["created"].dtype)
    # plain strings instead of enum members, and a status outside the enum
    s = Step(step_index=3, type="TEXT_RESPONSE", source="MODEL", target=StepTarget.USER, status="PAUSED",
             created_at=T0, turn=0)
    df = history_frame([s])
    assert df.loc[3, "type"] == "TEXT_RESPONSE" and df.loc[3, "source"] == "MODEL"
    assert df.loc[3, "status"] == "PAUSED" and _cats(df["status"])[:7] == [m.value for m in StepStatus]


def test_history_frame_html_is_marked_for_mathjax_to_skip_and_stays_a_dataframe(tmp_path):
    """A notebook shows "$5 and $10" as written: the table's HTML sits in an element MathJax skips
    (mathjax_ignore: MathJax 3, JupyterLab 4 / Notebook 7; tex2jax_ignore: MathJax 2), and so does
    the HTML of frames derived from it. The frame is still a DataFrame for pandas and Parquet.
    (tests/test_frames_browser.py checks the real JupyterLab.)"""
    from html.parser import HTMLParser

    steps = scripted_steps()
    steps[0] = _prompt(0, 0, r"I paid $5 and $10, not \(x\)", T0)
    df = history_frame(steps)

    def ignored_text(html: str) -> str:
        """The text of ``html`` that is inside an element with class mathjax_ignore."""
        out: list[str] = []
        depth = [0]

        class P(HTMLParser):
            def handle_starttag(self, tag, attrs):
                if depth[0] or "mathjax_ignore" in (dict(attrs).get("class") or "").split():
                    depth[0] += 1

            def handle_endtag(self, tag):
                depth[0] = max(0, depth[0] - 1) if depth[0] else 0

            def handle_data(self, data):
                if depth[0]:
                    out.append(data)

        P().feed(html)
        return "".join(out)

    for frame in (df, df.head(2), df[["source", "content"]], df[df.source == "USER"], df.reset_index()):
        html = literal_html(frame)  # what IPython shows for it (literal_frame registers it in IPython)
        assert r"I paid $5 and $10, not \(x\)" in ignored_text(html)
        assert "tex2jax_ignore" in html
        assert type(frame) is pd.DataFrame
    assert "mathjax_ignore" not in literal_html(pd.DataFrame(df))  # the mark is the frame's own, not global
    pd.testing.assert_frame_equal(pd.DataFrame(df), df)  # a plain frame of the same data equals it, either way
    pd.testing.assert_frame_equal(df, pd.DataFrame(df))
    assert isinstance(df.groupby("source", observed=True).size(), pd.Series)
    df.to_parquet(tmp_path / "h.parquet")
    back = pd.read_parquet(tmp_path / "h.parquet")
    assert type(back) is pd.DataFrame and back.loc[0, "content"] == df.loc[0, "content"]


# --- usage ------------------------------------------------------------------------------


def test_usage_frame_dtypes():
    df = usage_frame(scripted_records())
    assert tuple(df.columns) == USAGE_COLUMNS
    assert df.index.name == "turn" and df.index.tolist() == [0, 1, 2, 3, 4]
    assert df["prompt"].dtype == pd.StringDtype() and df["error"].dtype == pd.StringDtype()
    for col in ("model", "provider", "finish_reason", "status"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
    assert _cats(df["finish_reason"]) == [m.value for m in FinishReason]
    assert _cats(df["status"]) == ["running", "done", "waiting", "error", "interrupted"]
    assert _is_utc(df["started"].dtype) and _is_utc(df["finished"].dtype)
    for col in ("duration_s", "ttft_s", "output_tokens_per_s", "cost_usd"):
        assert df[col].dtype == np.float64, col
    for col in ("model_calls", "tool_calls", "input_tokens", "cached_tokens", "cache_write_tokens",
                "thinking_tokens", "output_tokens", "total_tokens", "http_code"):
        assert df[col].dtype == pd.Int64Dtype(), col


def test_usage_frame_values():
    df = usage_frame(scripted_records())
    assert df.loc[0, "prompt"] == "What is the capital of France?"
    assert len(df.loc[4, "prompt"]) == 80 and df.loc[4, "prompt"].endswith("…")
    assert df.loc[4, "prompt"][:79] == LONG_PROMPT[:79]
    assert df["model"].tolist() == ["gpt-4.1-mini", "gpt-4.1-mini", "claude-sonnet-4-5-20250929",
                                    "gpt-4.1-mini", "gpt-4o-2024-08-06"]
    assert df["provider"].tolist() == ["openai", "openai", "anthropic", "openai", "openai"]
    assert df.loc[0, "started"] == UTC0 and df.loc[2, "finished"] == UTC0 + pd.Timedelta(seconds=22)
    assert df["duration_s"].tolist() == pytest.approx([1.1, 4.0, 2.0, 0.5, 1.0])
    assert df["ttft_s"].iloc[[0, 1, 2, 4]].tolist() == pytest.approx([0.6, 0.5, 1.0, 0.5])
    assert math.isnan(df.loc[3, "ttft_s"])
    assert df.loc[0, "output_tokens_per_s"] == pytest.approx(20 / 0.5)
    assert df.loc[1, "output_tokens_per_s"] == pytest.approx(120 / 3.5)  # thinking counts as generated
    assert math.isnan(df.loc[3, "output_tokens_per_s"])
    assert df["model_calls"].tolist() == [1, 2, 1, 1, 1] and df["tool_calls"].tolist() == [0, 2, 0, 0, 0]
    assert df["input_tokens"].tolist() == [100, 500, 1000, 0, 50]
    assert df["cached_tokens"].tolist() == [0, 0, 600, 0, 0]
    assert df["cache_write_tokens"].tolist() == [0, 0, 300, 0, 0]
    assert df["thinking_tokens"].tolist() == [0, 50, 0, 0, 0]
    assert df["output_tokens"].tolist() == [20, 70, 50, 0, 5]
    assert df["total_tokens"].tolist() == [120, 620, 1050, 0, 55]
    assert df["cost_usd"].tolist() == pytest.approx(COSTS)
    assert df["finish_reason"].tolist() == ["STOP", "STOP", "STOP", "ERROR", "INTERRUPTED"]
    assert df["status"].tolist() == ["done", "done", "done", "error", "interrupted"]
    assert _values(df["error"]) == [None, None, None, "rate limited", None]
    assert _values(df["http_code"]) == [None, None, None, 429, None]


def test_usage_totals_equal_total_usage():
    records = scripted_records()
    total = sum((r.usage for r in records), UsageMetadata())
    df = usage_frame(records)
    assert int(df["input_tokens"].sum()) == total.prompt_token_count
    assert int(df["cached_tokens"].sum()) == total.cached_content_token_count
    assert int(df["thinking_tokens"].sum()) == total.thoughts_token_count
    assert int(df["output_tokens"].sum()) == total.candidates_token_count
    assert int(df["total_tokens"].sum()) == total.total_token_count
    s = usage_summary(records)
    assert s.usage == total
    assert s.turns == 5 and s.model_calls == 6 and s.tool_calls == 2
    assert s.cache_write_tokens == 300
    assert s.cost_usd == pytest.approx(sum(COSTS)) and s.unpriced_turns == 0
    assert s.cost_usd == pytest.approx(df["cost_usd"].sum())
    assert s.errors == 1 and s.interrupted == 1
    assert s.mean_ttft_s == pytest.approx(df["ttft_s"].mean())
    assert s.mean_output_tokens_per_s == pytest.approx(df["output_tokens_per_s"].mean())
    assert s.models == ["gpt-4.1-mini", "claude-sonnet-4-5-20250929", "gpt-4o-2024-08-06"]
    html, md = s._repr_html_(), s._repr_markdown_()
    assert "<table" in html and "total tokens" in html and "1,845" in html
    assert "| total tokens | 1,845 |" in md
    assert "$0.0030" in str(s)  # 2,994 micro-USD
    series = s.to_series()
    assert series["total_tokens"] == 1845


def test_usage_frame_empty_and_unknown_models():
    df = usage_frame([])
    assert tuple(df.columns) == USAGE_COLUMNS and len(df) == 0 and df.index.name == "turn"
    recs = [
        TurnRecord(0, "hi", "my-finetune", "openai", T0, T0 + 1, usage=UsageMetadata(10, 5, 15)),
        TurnRecord(1, "hi", "", "", T0, T0 + 1, usage=UsageMetadata(10, 5, 15)),
        TurnRecord(2, "hi", "gpt-5-ultra", "openai", T0, None, usage=UsageMetadata(10, 5, 15), status="running"),
        TurnRecord(3, "hi", "demo", "demo", T0, T0 + 1, usage=UsageMetadata(10, 5, 15)),
        TurnRecord(4, "hi", "smollm2", "local", T0, T0 + 1, usage=UsageMetadata(10, 5, 15)),
    ]
    df = usage_frame(recs)
    assert math.isnan(df.loc[0, "cost_usd"]) and math.isnan(df.loc[1, "cost_usd"])
    assert math.isnan(df.loc[2, "cost_usd"])  # no prefix guessing: gpt-5-ultra is not gpt-5
    assert df.loc[3, "cost_usd"] == 0.0 and df.loc[4, "cost_usd"] == 0.0
    assert pd.isna(df.loc[1, "model"]) and pd.isna(df.loc[1, "provider"])
    assert pd.isna(df.loc[2, "finished"]) and df.loc[2, "status"] == "running"
    assert pd.isna(df.loc[0, "finish_reason"])
    s = usage_summary(recs)
    assert s.unpriced_turns == 3 and s.cost_usd == 0.0
    s = usage_summary(recs[:3])
    assert math.isnan(s.cost_usd) and "unknown" in str(s)


def test_usage_frame_pricing_override():
    recs = scripted_records()[:1] + [TurnRecord(1, "x", "my-finetune", "openai", T0, T0 + 1,
                                                usage=UsageMetadata(1_000_000, 1_000_000, 2_000_000))]
    df = usage_frame(recs, pricing={"gpt-4.1-mini": {"input": 1.0, "output": 2.0},
                                    "my-finetune": Price(input=3.0, output=4.0)})
    assert df["cost_usd"].tolist() == pytest.approx([(100 * 1.0 + 20 * 2.0) / 1e6, 7.0])
    set_price("openai:my-finetune", input=0.5, output=0.5, cached_input=0.1)
    assert usage_frame(recs).loc[1, "cost_usd"] == pytest.approx(1.0)
    assert usage_summary(recs).cost_usd == pytest.approx(COSTS[0] + 1.0)
    reset_prices("my-finetune")
    assert math.isnan(usage_frame(recs).loc[1, "cost_usd"])


# --- pricing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, base",
    [
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("openai:gpt-4.1-mini", "gpt-4.1-mini"),
        ("OpenAI:GPT-4.1-Mini", "gpt-4.1-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic:claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
        ("gemini:gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.0-flash-001", "gemini-2.0-flash"),
        ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
        ("o4-mini-2025-04-16", "o4-mini"),
        ("gpt-5-2025-08-07", "gpt-5"),
    ],
)
def test_price_lookup_tolerates_prefixes_and_dates(name, base):
    price = get_price(name)
    assert price is not None and price == get_price(base)
    assert price.source == pricing_mod.PRICES_VERSION


def test_price_table_and_cost():
    for name in ("gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o", "gpt-4o-mini", "o3", "o4-mini", "gpt-5",
                 "gpt-5-mini", "gpt-5-nano", "claude-opus-4-1", "claude-sonnet-4-5", "claude-sonnet-4",
                 "claude-haiku-4-5", "claude-3-5-haiku", "gemini-2.5-pro", "gemini-2.5-flash",
                 "gemini-2.5-flash-lite", "gemini-2.0-flash"):
        p = get_price(name)
        assert p.input > 0 and p.output > p.input and 0 < p.cached_rate < p.input, name
        assert p.source == pricing_mod.PRICES_VERSION == pricing_mod.PRICES_DATE, name
        assert p.source.startswith("genai-prices "), name
    for name in ("demo", "local", "smollm2"):
        assert get_price(name).cost(10, 0, 0, 10, 10) == 0.0
    assert get_price("local:anything") is not None and get_price("whatever", provider="local").input == 0.0
    assert get_price("gpt-5-ultra") is None and get_price("") is None
    assert math.isnan(cost("no-such-model", 100, output_tokens=5))
    # uncached input at the input rate, cache reads at the cached rate, writes at the write rate
    assert cost("claude-sonnet-4-5", 1000, 600, 300, 0, 50) == pytest.approx(COSTS[2])
    assert cost("gpt-4.1-mini", 500, 0, 0, 50, 70) == pytest.approx(COSTS[1])
    # a price without cached / write rates: cached at input, writes at 1.25x input
    p = Price(input=2.0, output=4.0)
    assert p.cost(1000, 400, 200, 0, 0) == pytest.approx((400 * 2 + 400 * 2 + 200 * 2.5) / 1e6)


def test_set_price_validation_and_override():
    set_price("claude-sonnet-4-5", input=1.0, output=1.0, cached_input=0.5, cache_write=2.0)
    assert cost("anthropic:claude-sonnet-4-5-20250929", 1000, 600, 300, 0, 50) == pytest.approx(
        (100 * 1.0 + 600 * 0.5 + 300 * 2.0 + 50 * 1.0) / 1e6)
    # the per-call mapping wins over set_price
    assert cost("claude-sonnet-4-5", 1_000_000, pricing={"claude-sonnet-4-5": (9.0, 1.0)}) == pytest.approx(9.0)
    with pytest.raises(NbagentError) as err:
        set_price("x", input=-1, output=1)
    assert err.value.kind == "config"
    with pytest.raises(NbagentError) as err:
        cost("x", 10, pricing={"x": {"output": 1}})
    assert err.value.kind == "config"


# --- tool calls -------------------------------------------------------------------------


def test_tool_calls_frame():
    df = tool_calls_frame(scripted_steps())
    assert tuple(df.columns) == TOOL_CALL_COLUMNS
    assert df.index.name == "call" and df.index.tolist() == [0, 1, 2]
    assert df["turn"].dtype == np.int64 and df["turn"].tolist() == [1, 1, 4]
    for col in ("call_id", "arguments", "result_preview", "error"):
        assert df[col].dtype == pd.StringDtype(), col
    for col in ("name", "approval", "status"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
    assert _cats(df["approval"]) == [m.value for m in ApprovalDecision]
    assert _cats(df["status"]) == [m.value for m in StepStatus] + ["pending"]
    assert df["duration_s"].dtype == np.float64
    assert df["request_step"].dtype == pd.Int64Dtype() and df["result_step"].dtype == pd.Int64Dtype()

    assert df["call_id"].tolist() == ["call_1", "call_2", "call_3"]
    assert df["name"].tolist() == ["calculator", "delete_file", "save_story"]
    assert [json.loads(a) for a in df["arguments"]] == [{"expression": "2+2"}, {"path": "/tmp/x", "force": True},
                                                         {"title": "Dragon"}]
    assert _values(df["approval"]) == ["auto", "denied", None]
    assert df["status"].tolist() == ["DONE", "ERROR", "pending"]
    assert df.loc[0, "duration_s"] == pytest.approx(0.05)  # run_seconds wins
    assert df.loc[1, "duration_s"] == pytest.approx(2.0)  # else finished - created
    assert math.isnan(df.loc[2, "duration_s"])
    assert _values(df["result_preview"]) == ["4", "The user denied this call.", None]
    assert _values(df["error"]) == [None, "denied by the user", None]
    assert _values(df["request_step"]) == [4, 4, 16]
    assert _values(df["result_step"]) == [5, 6, None]


def test_tool_calls_frame_orphans_and_empty():
    df = tool_calls_frame([])
    assert tuple(df.columns) == TOOL_CALL_COLUMNS and len(df) == 0
    steps = scripted_steps()[5:7]  # history trimmed: the model's request is gone
    waiting = Step(step_index=20, type=StepType.TOOL_CALL, source=StepSource.SYSTEM,
                   target=StepTarget.ENVIRONMENT, status=StepStatus.WAITING_FOR_USER,
                   tool_calls=[ToolCall("", "ask_me", {})], turn=5, approval="manual")
    df = tool_calls_frame(steps + [waiting])
    assert df["call_id"].tolist() == ["call_1", "call_2", ""]
    assert _values(df["request_step"]) == [None, None, None]
    assert df["status"].tolist() == ["DONE", "ERROR", "WAITING_FOR_USER"]
    assert _values(df["approval"]) == ["auto", "denied", "manual"]
    # calls without ids pair in order within the turn, by name
    ask = Step(step_index=30, type=StepType.TOOL_CALL, source=StepSource.MODEL, target=StepTarget.USER,
               status=StepStatus.DONE, tool_calls=[ToolCall("", "calc", {"x": 1}), ToolCall("", "calc", {"x": 2})],
               turn=6)
    runs = [Step(step_index=31 + i, type=StepType.TOOL_CALL, source=StepSource.SYSTEM,
                 target=StepTarget.ENVIRONMENT, status=StepStatus.DONE, content=str(i + 1),
                 tool_calls=[ToolCall("", "calc", {"x": i + 1})], turn=6) for i in range(2)]
    df = tool_calls_frame([ask] + runs)
    assert _values(df["result_step"]) == [31, 32] and _values(df["result_preview"]) == ["1", "2"]


# --- export, many sessions ----------------------------------------------------------------


def write_session(path: Path, conversation_id: str, steps, records, *, with_turns=True) -> Path:
    data = {
        "format": "nbagent.session",
        "version": 2,
        "conversation_id": conversation_id,
        "saved_at": T0 + 100,
        "model": records[0].model if records else "",
        "provider": records[0].provider if records else "",
        "steps": [s.to_dict() for s in steps],
        "turns": [r.to_dict() for r in records],
        "chat_session": {},
        "frames": export_frames(steps, records),
    }
    if not with_turns:
        del data["turns"]
    path.write_text(json.dumps(data, allow_nan=False))
    return path


def test_export_frames_is_json_safe_and_matches():
    steps, records = scripted_steps(), scripted_records()
    frames = export_frames(steps, records)
    text = json.dumps(frames, allow_nan=False)  # strict JSON: no NaN
    back = json.loads(text)
    assert [row["turn"] for row in back["usage"]] == [0, 1, 2, 3, 4]
    df = usage_frame(records)
    for row in back["usage"]:
        t = row["turn"]
        assert pd.Timestamp(row["started"]) == df.loc[t, "started"]
        assert row["cost_usd"] == pytest.approx(df.loc[t, "cost_usd"])
        assert row["prompt"] == df.loc[t, "prompt"]
        for col in ("input_tokens", "cached_tokens", "cache_write_tokens", "thinking_tokens", "output_tokens",
                    "total_tokens", "model_calls", "tool_calls"):
            assert row[col] == df.loc[t, col], col
    assert back["usage"][3]["ttft_s"] is None and back["usage"][3]["http_code"] == 429
    assert [c["call_id"] for c in back["tool_calls"]] == ["call_1", "call_2", "call_3"]
    assert back["tool_calls"][2]["status"] == "pending"
    assert len(back["history"]) == 18 and "content" not in back["history"][0]
    assert back["history"][13]["http_code"] == 429 and back["history"][16]["finished"] is None
    # no pandas needed to export (numpy is)
    code = ("import sys; sys.modules['pandas'] = None\n"
            "from nbagent.analysis.sessions import export_frames; print(len(export_frames([], [])['usage']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr


def test_load_sessions_glob(tmp_path):
    steps, records = scripted_steps(), scripted_records()
    write_session(tmp_path / "a.json", "conv-a", steps, records)
    write_session(tmp_path / "b.json", "conv-b", steps[:3], records[:1])
    (tmp_path / "notes.txt").write_text("not a session")
    df = load_sessions(str(tmp_path / "*.json"))
    assert list(df.columns[:3]) == ["session_id", "path", "turn"]
    assert tuple(df.columns[3:-2]) == USAGE_COLUMNS and list(df.columns[-2:]) == ["user", "source"]
    assert set(df["source"]) == {"nbagent"}
    assert len(df) == 6 and isinstance(df.index, pd.RangeIndex)
    assert isinstance(df["session_id"].dtype, pd.CategoricalDtype)
    assert df["session_id"].tolist() == ["conv-a"] * 5 + ["conv-b"]
    assert df["path"].dtype == pd.StringDtype() and df["path"].iloc[-1].endswith("b.json")
    assert df["turn"].tolist() == [0, 1, 2, 3, 4, 0]
    assert df["cost_usd"].tolist() == pytest.approx(COSTS + COSTS[:1])
    # "which model cost what"
    by_model = df.groupby("model", observed=True)["cost_usd"].sum()
    assert by_model["gpt-4.1-mini"] == pytest.approx(COSTS[0] * 2 + COSTS[1] + COSTS[3])
    # a list of paths, a directory, a pattern matching nothing
    assert len(load_sessions([tmp_path / "a.json", tmp_path / "b.json"])) == 6
    assert len(load_sessions(tmp_path)) == 6
    empty = load_sessions(str(tmp_path / "none-*.json"))
    assert len(empty) == 0 and list(empty.columns[:3]) == ["session_id", "path", "turn"]


def test_load_sessions_needs_the_turn_ledger(tmp_path):
    write_session(tmp_path / "frames-only.json", "c1", scripted_steps(), scripted_records(), with_turns=False)
    with pytest.raises(NbagentError) as err:
        load_sessions(tmp_path / "frames-only.json")
    assert err.value.kind == "io" and "turn ledger" in str(err.value)


@pytest.mark.parametrize(
    "content",
    ['{"format": "nbagent.session", "version": 2, "turns": [', '[1, 2]', '{"format": "other"}',
     '{"format": "nbagent.session", "version": 2, "turns": [{"turn": "x", "usage": 5}]}',
     '{"format": "nbagent.session", "version": 2, "turns": [{"turn": "x", "usage": {}}]}',
     '{"format": "nbagent.session", "version": 2, "turns": [{"turn": 0, "started_at": "yesterday"}]}',
     '{"format": "nbagent.session", "version": 2, "turns": [{"turn": 0, "status": "paused"}]}',
     '{"format": "nbagent.session", "version": 2}', '{"format": "nbagent.session", "version": 7, "turns": []}',
     ''],
)
def test_load_sessions_corrupt_file(tmp_path, content):
    good = write_session(tmp_path / "good.json", "g", scripted_steps(), scripted_records())
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(NbagentError) as err:
        load_sessions([good, bad])
    assert err.value.kind == "io" and "bad.json" in str(err.value)


def test_load_sessions_is_public():
    import nbagent

    assert nbagent.load_sessions is load_sessions


def test_load_sessions_missing_file(tmp_path):
    with pytest.raises(NbagentError) as err:
        load_sessions(tmp_path / "missing.json")
    assert err.value.kind == "io" and "missing.json" in str(err.value)


# --- plot, optional dependencies, import weight ------------------------------------------------


def test_plot_usage_returns_figure():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = plot_usage(scripted_records())
    assert isinstance(fig, Figure)
    axes = fig.get_axes()
    assert len(axes) == 3  # tokens, cost per turn, cumulative cost (twin)
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert labels == ["input (uncached)", "cached input", "thinking", "output"]
    fig.canvas.draw()
    # many turns switch to an area plot; unknown prices and no turns still draw
    many = [TurnRecord(i, "p", "my-model", "x", T0 + i, T0 + i + 1, usage=UsageMetadata(10, 5, 15))
            for i in range(100)]
    plot_usage(many).canvas.draw()
    plot_usage([]).canvas.draw()


def test_missing_optional_dependencies(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(NbagentError) as err:
        plot_usage(scripted_records())
    assert err.value.kind == "config" and "matplotlib" in str(err.value)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(NbagentError) as err:
        history_frame(scripted_steps())
    assert err.value.kind == "config" and "pandas" in str(err.value)


def test_import_stays_light():
    code = ("import sys, nbagent, nbagent.analysis.frames, nbagent.analysis.pricing\n"
            "heavy = [m for m in ('pandas', 'numpy', 'matplotlib') if m in sys.modules]\n"
            "assert not heavy, heavy")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr


# --- through a Conversation ---------------------------------------------------------------


def test_conversation_frames_match_total_usage():
    conversation = pytest.importorskip("nbagent.conversation")
    connection = pytest.importorskip("nbagent.core.connection")
    steps = scripted_steps()
    turns = [[s.copy(turn=-1) for s in steps if s.turn == t] for t in range(3)]  # the three clean turns
    conv = conversation.Conversation(connection.MockConnection(turns))
    for t in range(3):
        conv.ask(f"prompt {t}")
    usage = conv.usage_df()
    total = conv.total_usage
    assert int(usage["input_tokens"].sum()) == total.prompt_token_count
    assert int(usage["cached_tokens"].sum()) == total.cached_content_token_count
    assert int(usage["thinking_tokens"].sum()) == total.thoughts_token_count
    assert int(usage["output_tokens"].sum()) == total.candidates_token_count
    assert int(usage["total_tokens"].sum()) == total.total_token_count
    hist = conv.history_df()
    assert len(hist) == len(conv.history) and int(hist["total_tokens"].sum()) == total.total_token_count
    calls = conv.tool_calls_df()
    assert calls["call_id"].tolist() == ["call_1", "call_2"]


def test_usage_complete_after_trimming_and_save_load(tmp_path):
    conversation = pytest.importorskip("nbagent.conversation")
    connection = pytest.importorskip("nbagent.core.connection")
    steps = scripted_steps()
    turns = [[s.copy(turn=-1) for s in steps if s.turn == t] for t in range(3)]
    conv = conversation.Conversation(connection.MockConnection(turns), max_history_size=4)
    for t in range(3):
        conv.ask(f"prompt {t}")
    assert len(conv.history) == 4  # trimmed
    usage = conv.usage_df()
    assert usage.index.tolist() == [0, 1, 2]
    assert int(usage["total_tokens"].sum()) == conv.total_usage.total_token_count == 120 + 620 + 1050
    path = conv.save(tmp_path / "s.json")
    assert "frames" not in json.loads(Path(path).read_text())  # derived: embedded only on request
    loaded = conversation.Conversation.load(path)
    pd.testing.assert_frame_equal(loaded.usage_df(), usage)
    pd.testing.assert_frame_equal(loaded.history_df(), conv.history_df())
    many = load_sessions(path)
    assert many["total_tokens"].tolist() == usage["total_tokens"].tolist()
    assert many["session_id"].iloc[0] == conv.conversation_id
    saved = json.loads(Path(conv.save(tmp_path / "f.json", frames=True)).read_text())
    assert [row["turn"] for row in saved["frames"]["usage"]] == [0, 1, 2]
    assert [row["total_tokens"] for row in saved["frames"]["usage"]] == usage["total_tokens"].tolist()


def test_one_vocabulary_for_tokens():
    """Each token count has one name per place (core.usage.TOKEN_COUNTS), and the frames' columns
    are those names: history_df and usage_df never call one count two things."""
    import dataclasses

    from nbagent.core.usage import TOKEN_COUNTS, UsageMetadata

    assert [t.field for t in TOKEN_COUNTS] and {t.field for t in TOKEN_COUNTS} == {
        f.name for f in dataclasses.fields(UsageMetadata)}
    columns = [t.column for t in TOKEN_COUNTS]
    hist = history_frame([]).columns
    usage = usage_frame([]).columns
    assert [c for c in hist if c in columns] == columns == [c for c in usage if c in columns]
    assert "prompt_tokens" not in hist and "prompt_tokens" not in usage
    u = UsageMetadata(prompt_token_count=10, candidates_token_count=3, thoughts_token_count=4)
    assert u.generated_token_count == 7 and not hasattr(u, "output_token_count")


def test_plot_usage_says_free_models_cost_nothing_instead_of_an_empty_panel():
    pytest.importorskip("matplotlib")
    from nbagent import Agent

    agent = Agent(model="demo", delay=0)
    agent.ask("hello")
    fig = plot_usage(agent.conversation.turns)
    cost_panel = fig.axes[1]
    assert [t.get_text() for t in cost_panel.texts] == ["no cost: these models are free"]
    assert not cost_panel.patches  # no zero-height bars
