"""history_df reads each step once: the declared attributes in one pass (tables.Table, read_columns).

The one-pass read must give exactly the frame attribute-by-attribute reading gives, across the
chunks it reads in, with steps that carry no usage, no finish time, several tool calls or none.
"""

from __future__ import annotations

import math

import pytest

pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")

from nbagent.analysis.columns import HISTORY, HISTORY_INDEX, HISTORY_READS  # noqa: E402
from nbagent.analysis.tables import READ_CHUNK, Form, Table, read_columns  # noqa: E402
from nbagent.analysis.frames import build_frame, history_frame  # noqa: E402
from nbagent.core.steps import (  # noqa: E402
    FinishReason,
    Step,
    StepSource,
    StepStatus,
    StepTarget,
    StepType,
    ToolCall,
    UsageMetadata,
)

T0 = 1_767_225_600.0


def mixed_steps(n: int) -> list[Step]:
    """Prompts, model calls (with and without usage, one or two tool calls), tool runs and finishes."""
    steps = []
    for i in range(n):
        turn, kind = divmod(i, 7)
        t = T0 + 10.0 * i
        if kind == 0:
            s = Step(step_index=i, turn=turn, type=StepType.TEXT_RESPONSE, source=StepSource.USER,
                     status=StepStatus.DONE, content=f"question {i} costs $5 and $10", created_at=t, finished_at=t)
        elif kind in (1, 2):
            calls = [ToolCall(f"c{i}", "calculator", {"x": i})] + ([ToolCall("", "search", {})] if kind == 2 else [])
            s = Step(step_index=i, turn=turn, type=StepType.TOOL_CALL, source=StepSource.MODEL,
                     target=StepTarget.USER, status=StepStatus.DONE, thinking="think " * (i % 3), tool_calls=calls,
                     usage_metadata=UsageMetadata(100 + i, 5, 105 + i + 7, i % 4, 2) if i % 3 else None,
                     model="gpt-4.1-mini" if i % 2 else "", created_at=t, finished_at=t + 0.5,
                     finish_reason=FinishReason.STOP)
        elif kind == 3:
            s = Step(step_index=i, turn=turn, type=StepType.TOOL_CALL, source=StepSource.SYSTEM,
                     target=StepTarget.ENVIRONMENT, status=StepStatus.ERROR, content="",
                     tool_calls=[ToolCall(f"c{i - 2}", "calculator", {})], error="denied", created_at=t)
        elif kind == 4:
            s = Step(step_index=i, turn=turn, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL,
                     status=StepStatus.ERROR, http_code=429, refusal="no" if i % 2 else "", created_at=t,
                     finished_at=None, model="claude-sonnet-4-5")
        else:
            s = Step(step_index=i, turn=turn, type=StepType.FINISH, source=StepSource.SYSTEM,
                     status=StepStatus.DONE, created_at=t, finished_at=t, finish_reason="STOP")
        steps.append(s)
    return steps


@pytest.mark.parametrize("n", [0, 1, READ_CHUNK, 2 * READ_CHUNK + 5])
def test_read_columns_gives_each_attribute_of_each_object(n):
    steps = mixed_steps(n)
    names = ("step_index", "content", "usage_metadata", "tool_calls", "finished_at")
    columns = read_columns(steps, names)
    assert len(columns) == len(names)
    for name, column in zip(names, columns):
        assert len(column) == n
        assert all(got is getattr(s, name) for got, s in zip(column, steps)), name
    assert read_columns(steps, ("content",)) == [[s.content for s in steps]]
    assert read_columns(steps, ()) == []


def test_history_frame_read_in_one_pass_equals_reading_attribute_by_attribute():
    steps = mixed_steps(2 * READ_CHUNK + 5)
    planned = Table(steps, reads=HISTORY_READS)
    frame = build_frame(planned, HISTORY_INDEX, HISTORY)
    assert planned.unplanned == set()  # every attribute a history column reads is declared in HISTORY_READS
    by_attribute = Table(steps)
    pd.testing.assert_frame_equal(frame, build_frame(by_attribute, HISTORY_INDEX, HISTORY))
    assert by_attribute.unplanned  # that table did read attribute by attribute
    pd.testing.assert_frame_equal(history_frame(steps), frame)


def test_history_frame_across_read_chunks_shows_each_step():
    steps = mixed_steps(2 * READ_CHUNK + 5)
    df = history_frame(steps)
    assert df.index.tolist() == [s.step_index for s in steps]
    assert df["content"].tolist() == [s.content for s in steps]
    assert df["type"].astype(str).tolist() == [s.type.value for s in steps]
    assert df["model"].tolist() == [s.model or np.nan for s in steps]
    assert df["tool_names"].tolist() == [",".join(c.name for c in s.tool_calls) or pd.NA for s in steps]
    usage = [s.usage_metadata for s in steps]
    assert df["input_tokens"].tolist() == [u.prompt_token_count if u else pd.NA for u in usage]
    assert df["total_tokens"].tolist() == [u.total_token_count if u else pd.NA for u in usage]
    assert df["http_code"].tolist() == [s.http_code or pd.NA for s in steps]
    assert df["refusal"].tolist() == [s.refusal or pd.NA for s in steps]
    finished = [s.finished_at for s in steps]
    assert [x.timestamp() if x is not pd.NaT else None for x in df["finished"]] == finished
    assert [None if math.isnan(d) else round(d, 6) for d in df["duration_s"]] == \
        [None if f is None else round(f - s.created_at, 6) for f, s in zip(finished, steps)]


def test_a_path_outside_the_plan_is_read_alone_and_none_on_the_way_reads_none():
    steps = mixed_steps(14)
    table = Table(steps, reads=("turn",))
    assert table.values("usage_metadata.candidates_token_count") == \
        [s.usage_metadata.candidates_token_count if s.usage_metadata else None for s in steps]
    assert table.unplanned == {"usage_metadata", "usage_metadata.candidates_token_count"}
    floats = table.floats("usage_metadata.candidates_token_count")
    assert np.isnan(floats).sum() == sum(s.usage_metadata is None for s in steps)


def test_a_planned_path_under_an_attribute_that_is_sometimes_none_reads_none_there():
    steps = mixed_steps(2 * READ_CHUNK + 5)
    table = Table(steps, reads=HISTORY_READS)
    expected = [s.usage_metadata.prompt_token_count if s.usage_metadata else None for s in steps]
    floats = table.floats("usage_metadata.prompt_token_count")
    assert [None if math.isnan(f) else int(f) for f in floats] == expected
    assert table.values("content").to_pylist() == [s.content for s in steps]  # Form.TEXTS: Arrow strings
    assert table.ints("turn").tolist() == [s.turn for s in steps]
    assert table.values("tool_calls") == [s.tool_calls for s in steps]
    assert table.unplanned == set()
    # a planned path asked for in another form is read alone, as it is
    assert table.values("usage_metadata.prompt_token_count") == expected
    assert table.values("created_at") == [s.created_at for s in steps]
    assert table.unplanned == {"usage_metadata", "usage_metadata.prompt_token_count", "created_at"}


def test_planned_codes_number_the_combinations_by_first_appearance_across_chunks():
    steps = mixed_steps(2 * READ_CHUNK + 5)
    paths = tuple(p for p, form in HISTORY_READS.items() if form is Form.CODED)
    codes, rows = Table(steps, reads=HISTORY_READS).coded(paths)
    plain_codes, plain_rows = Table(steps).coded(paths)  # read in one pass after
    assert plain_rows == rows and np.array_equal(plain_codes, codes)
    assert [rows[c] for c in codes] == [tuple(getattr(s, p) for p in paths) for s in steps]
