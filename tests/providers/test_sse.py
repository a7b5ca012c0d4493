"""The SSE decoder follows the WHATWG rules on raw bytes, whatever the read boundaries."""

from __future__ import annotations

import json

import pytest

from support.replay import fixture_names, load_fixture, split_body
from nbagent.providers.sse import SSEDecoder, SSEEvent, aiter_sse


def decode(body: bytes, split: str = "whole", raw_lines: bool = False) -> list[SSEEvent]:
    decoder = SSEDecoder(raw_lines=raw_lines)
    events = []
    for chunk in split_body(body, split, seed=7):
        events.extend(decoder.feed(chunk))
    events.extend(decoder.flush())
    return events


def datas(body: bytes, split: str = "whole", raw_lines: bool = False) -> list[str]:
    return [e.data for e in decode(body, split, raw_lines)]


ALL_SPLITS = ["whole", "1", "2", "7", "random"]


@pytest.mark.parametrize("split", ALL_SPLITS)
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_line_endings(newline, split):
    body = newline.join([b"data: one", b"", b"data: two", b"", b""])
    assert datas(body, split) == ["one", "two"]


def test_cr_at_end_of_read_and_lf_at_start_of_next_is_one_break():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    # a second blank line here would be a bug only if CR|LF counted as two breaks
    events = decoder.feed(b"\ndata: b\r")
    events += decoder.feed(b"\n\r\n")
    assert [e.data for e in events] == ["a\nb"]


def test_lone_cr_then_other_text_is_a_line_break():
    decoder = SSEDecoder()
    events = decoder.feed(b"data: a\r")
    events += decoder.feed(b"\rdata: b\r\r")
    assert [e.data for e in events] == ["a", "b"]


@pytest.mark.parametrize("split", ALL_SPLITS)
def test_comments_are_ignored(split):
    body = b": OPENROUTER PROCESSING\n\n:\n\ndata: x\n: mid-event comment\n\n"
    assert datas(body, split) == ["x"]


@pytest.mark.parametrize("split", ALL_SPLITS)
def test_multi_line_data_is_joined_with_newline(split):
    body = b"data: first\ndata:second\ndata:  third\ndata\n\n"
    assert datas(body, split) == ["first\nsecond\n third\n"]


def test_exactly_one_space_is_stripped_after_the_colon():
    assert datas(b"data:  two spaces\n\n") == [" two spaces"]
    assert datas(b"data:none\n\n") == ["none"]


def test_event_id_and_retry_fields():
    body = b"event: error\nid: 42\nretry: 1500\ndata: {}\n\ndata: next\n\n"
    first, second = decode(body)
    assert (first.event, first.data, first.id, first.retry) == ("error", "{}", "42", 1500)
    assert (second.event, second.id, second.retry) == ("message", "42", None)


def test_invalid_retry_and_unknown_fields_are_ignored():
    (event,) = decode(b"retry: soon\nfoo: bar\ndata: x\n\n")
    assert event.retry is None and event.data == "x"


def test_empty_events_are_not_dispatched():
    assert decode(b"event: ping\n\n\n\nid: 1\n\n") == []


@pytest.mark.parametrize("split", ALL_SPLITS)
def test_last_event_without_trailing_blank_line_is_dispatched_at_eof(split):
    assert datas(b"data: one\n\ndata: last", split) == ["one", "last"]
    assert datas(b"data: one\n\ndata: last\n", split) == ["one", "last"]


@pytest.mark.parametrize("split", ["1", "2", "random"])
def test_utf8_split_across_reads(split):
    text = "° 😊 漢字 👋"
    body = f"data: {json.dumps(text, ensure_ascii=False)}\n\n".encode()
    assert [json.loads(d) for d in datas(body, split)] == [text]


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u0085", "\x1c", "\x0b", "\x0c"])
def test_unicode_line_separators_do_not_split_lines(char):
    payload = json.dumps({"text": f"a{char}b"}, ensure_ascii=False)
    body = f"data: {payload}\n\n".encode()
    (data,) = datas(body, "1")
    assert json.loads(data) == {"text": f"a{char}b"}


def test_line_starting_with_a_space_is_not_a_data_field():
    assert datas(b' data: {"ignored": true}\n\ndata: kept\n\n') == ["kept"]


def test_leading_bom_is_skipped():
    assert datas(b"\xef\xbb\xbfdata: x\n\n", "1") == ["x"]


def test_invalid_utf8_is_replaced_not_fatal():
    assert datas(b"data: \xff\n\n") == ["\ufffd"]


def test_raw_json_lines_are_dropped_without_raw_lines():
    assert datas(b'data: a\n\n{"error": {"code": 503}}\n') == ["a"]


@pytest.mark.parametrize("split", ALL_SPLITS)
def test_raw_json_lines_single_and_multi_line(split):
    body = (
        b'data: a\n\n{"error": {"code": 503}}\n'
        b'[{\n  "error": {\n    "message": "x: y"\n  }\n}]\n'
        b"data: b\n\n"
    )
    events = decode(body, split, raw_lines=True)
    assert [(e.event, e.data) for e in events] == [
        ("message", "a"),
        ("raw", '{"error": {"code": 503}}'),
        ("raw", '[{\n  "error": {\n    "message": "x: y"\n  }\n}]'),
        ("message", "b"),
    ]


def test_unterminated_raw_json_ends_at_blank_line_or_eof():
    events = decode(b'{\n  "error": 1\n\ndata: after\n\n{"cut": ', raw_lines=True)
    assert [(e.event, e.data) for e in events] == [
        ("raw", '{\n  "error": 1'),
        ("message", "after"),
        ("raw", '{"cut": '),
    ]


@pytest.mark.parametrize("split", ALL_SPLITS)
def test_gemini_raw_error_fixture(split):
    fx = load_fixture("gemini", "error-mid-stream-raw-json")
    events = decode(fx.body, split, raw_lines=True)
    assert [e.event for e in events] == ["message", "message", "raw"]
    assert json.loads(events[-1].data)["error"] == fx.expected["error"]


@pytest.mark.parametrize("provider", ["openai", "openai_compat", "anthropic", "gemini"])
def test_every_fixture_decodes_the_same_in_any_split(provider):
    names = fixture_names(provider)
    for name in names:
        body = load_fixture(provider, name).body
        whole = decode(body, "whole", raw_lines=True)
        assert whole, name
        assert decode(body, "random", raw_lines=True) == whole, name
        assert decode(body, "7", raw_lines=True) == whole, name


async def test_aiter_sse():
    async def chunks():
        for piece in (b"data: a\r", b"\n\r\ndata: ", b"b"):
            yield piece

    assert [e.data async for e in aiter_sse(chunks())] == ["a", "b"]


# --- reads of many lines take a faster path for the usual events: it must agree with line by line ---

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

PIECES = [b"data: ", b"data:", b"event: ", b"event: x", b"id: 7", b"retry: 5", b": c", b"{}", b'{"a": 1}',
          b"[1,", b"2]", b" ", b"x", b"\r", b"\n", b"\r\n", b"\n\n", b"\r\n\r\n", "é😀".encode(), b"\xff"]


def fields(body: bytes, split: str, raw_lines: bool) -> list[tuple]:
    return [(e.event, e.data, e.id, e.retry) for e in decode(body, split, raw_lines)]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=60), st.booleans(), st.sampled_from(["whole", "7", "random"]))
def test_reads_of_many_lines_decode_as_line_by_line(pieces, raw_lines, split):
    """One byte a read is the line-by-line path (a read then holds one line at most)."""
    body = b"".join(pieces)
    assert fields(body, split, raw_lines) == fields(body, "1", raw_lines)


def test_usual_events_keep_the_id_and_the_retry_once():
    body = b"id: 9\nretry: 50\n\nevent: a\ndata: 1\n\ndata: 2\r\n\r\n\n\ndata: 3\n\n"
    assert fields(body, "whole", False) == [("a", "1", "9", 50), ("message", "2", "9", None),
                                            ("message", "3", "9", None)]


def test_a_lone_cr_before_a_crlf_is_two_line_breaks_in_a_read_of_many_lines():
    body = b"data: a\r\r\ndata: b\n\n"
    assert fields(body, "whole", False) == fields(body, "1", False) == [("message", "a", None, None),
                                                                          ("message", "b", None, None)]
