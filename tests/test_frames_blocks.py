"""usage_df and history_df at scale work a piece at a time; the frame must not depend on the pieces.

Text goes to Arrow ``ARROW_CHUNK`` rows at a time (the prompt cut in Arrow, as bytes when every text
is ASCII), costs are priced ``row_prices.BLOCK`` rows at a time, numbers are read straight from the
records into arrays and counts turn into ``Int64`` without float temporaries. Each test builds the
same frame with pieces of a few rows and with one piece, and they must be equal, value for value.
"""

from __future__ import annotations

import math

import pytest

pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")

from nbagent.analysis import column_values, columns, row_prices  # noqa: E402
from nbagent.analysis.column_values import count_ints, shorten, shortened_arrow, text_array  # noqa: E402
from nbagent.analysis.frames import history_frame, usage_frame  # noqa: E402
from nbagent.core.ledger import TurnRecord  # noqa: E402
from nbagent.core.steps import FinishReason, PrefixChange, Step, StepSource, StepType, UsageMetadata  # noqa: E402

T0 = 1_767_225_600.0
MODELS = [("gpt-4.1-mini", "openai"), ("claude-sonnet-4-5-20250929", "anthropic"), ("demo", "demo"),
          ("my-local-finetune", "openai"), ("", "")]


def records(n: int) -> list[TurnRecord]:
    """Turns of every shape: running (no finish), no first token, a window, huge counts, a tier above
    200k input tokens a call, unknown models, non-ASCII, empty and exactly-80-character prompts."""
    out = []
    for i in range(n):
        model, provider = MODELS[i % len(MODELS)]
        prompt = ["é" * (i % 120) + " $5 and $10", "", "x" * 80, "y" * 81, f"Prompt {i} " * 12][i % 5]
        start = T0 + 30.0 * i
        usage = UsageMetadata(250_000 * 2 if i % 9 == 0 else 2500 + i, 300, 3100 + i, 2048 if i % 3 else 0, 30,
                              0 if i % 3 else 1024)
        if i % 17 == 0:
            usage.prompt_token_count = 2**64  # beyond int64: NA, never wrapped
        out.append(TurnRecord(
            turn=i, prompt=prompt, model=model, provider=provider, started_at=start,
            finished_at=None if i % 7 == 0 else start + 3.5, first_token_at=None if i % 11 == 0 else start + 0.6,
            usage=usage, model_calls=2, tool_calls=i % 3, finish_reason=FinishReason.STOP,
            status="done", context_tokens=5000 + i if i % 4 else 0,
            context_window=128_000 if i % 13 == 0 else None,
            prefix_change=list(PrefixChange)[0] if i % 19 == 0 else None))
    return out


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of a few rows: every frame below is cut into many."""
    def use() -> None:
        monkeypatch.setattr(column_values, "ARROW_CHUNK", 7)
        monkeypatch.setattr(row_prices, "BLOCK", 5)
    return use


def test_usage_frame_in_pieces_equals_the_frame_in_one(small_pieces):
    recs = records(120)
    whole = usage_frame(recs)
    small_pieces()
    pieces = usage_frame(recs)
    pd.testing.assert_frame_equal(pieces, whole, check_exact=True)
    assert pieces["prompt"].array._pa_array.num_chunks > 1  # it was built in pieces
    assert isinstance(pieces["prompt"].dtype, pd.StringDtype) and pieces["prompt"].dtype.storage == "pyarrow"
    assert pieces["prompt"].tolist() == shorten([r.prompt for r in recs], columns.PROMPT_CHARS)
    priced = pieces["cost_usd"].notna()
    assert priced.any() and (~priced).any()  # known and unknown models both among the rows


def test_usage_frame_reads_the_records_values(small_pieces):
    small_pieces()
    recs = records(60)
    df = usage_frame(recs)
    assert df["input_tokens"].tolist() == [pd.NA if u.prompt_token_count >= 2**63 else u.prompt_token_count
                                           for u in (r.usage for r in recs)]
    assert df["finished"].isna().tolist() == [r.finished_at is None for r in recs]
    assert df["ttft_s"].isna().tolist() == [r.first_token_at is None for r in recs]
    windows = df["context_window"]
    assert all(windows[r.turn] == 128_000 for r in recs if r.context_window)
    assert df.index.tolist() == list(range(60)) and df.index.dtype == np.int64


def test_history_text_in_pieces_equals_one_piece(small_pieces):
    steps = [Step(step_index=i, turn=i // 3, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                  content=f"answer {i} ü" if i % 2 else "", thinking="hm " * (i % 4), created_at=T0 + i)
             for i in range(50)]
    whole = history_frame(steps)
    small_pieces()
    pd.testing.assert_frame_equal(history_frame(steps), whole, check_exact=True)


@pytest.mark.parametrize("texts", [
    ["ascii " * 30, "short", "", None, "z" * 80, "z" * 81],  # ASCII: cut as bytes
    ["naïve " * 30, "ascii " * 30, None, "é" * 80, "é" * 81, "日本" * 50],  # not ASCII: cut as characters
    ["all long " * 20] * 9,  # every row cut
    ["short"] * 9,  # none cut
    [],
])
def test_shortened_arrow_cuts_as_shorten_does(monkeypatch, texts):
    want = shorten([t or "" for t in texts], 80)
    assert shortened_arrow(texts, 80).to_pylist() == want
    monkeypatch.setattr(column_values, "ARROW_CHUNK", 2)
    got = shortened_arrow(texts, 80)
    assert got.to_pylist() == want and got.type == pa.string()


def test_text_array_in_chunks_keeps_none_as_na(monkeypatch):
    monkeypatch.setattr(column_values, "ARROW_CHUNK", 3)
    arr = text_array(["a", None, "b", "c", None, "d", "e"])
    assert arr.dtype == pd.StringDtype("pyarrow")
    assert [None if x is pd.NA else x for x in arr] == ["a", None, "b", "c", None, "d", "e"]


def test_count_ints_marks_nan_and_what_int64_cannot_hold():
    data = np.array([0.0, 5.0, math.nan, 2.0**63, -(2.0**63), 2.0**63 - 1024, -7.0, math.inf])
    ints, mask = count_ints(data)
    assert mask.tolist() == [False, False, True, True, True, False, False, True]
    assert ints[~mask].tolist() == [0, 5, 2**63 - 1024, -7] and (ints[mask] == 0).all()
    assert ints.dtype == np.int64 and mask.dtype == bool


def test_building_a_frame_leaves_the_garbage_collector_as_it_found_it():
    import gc

    recs = records(10)
    assert gc.isenabled()
    usage_frame(recs)
    assert gc.isenabled()
    gc.disable()
    try:
        usage_frame(recs)
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()
    with pytest.raises(AttributeError):
        usage_frame([object()])  # not a turn record: fails inside, the collector still comes back on
    assert gc.isenabled()
