"""ChatSession: building, alternation-safe injection, compression, save/load."""

from __future__ import annotations

import json

import pytest

from nbagent import ChatSession, NbagentError
from nbagent.core.compression import (
    ApproxTokenizer,
    BpeOpenaiTokenizer,
    DropOldestTurns,
    ShrinkToolResults,
    exact_tokenizer,
)
from nbagent.core.messages import Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart

from support.scripted import assert_history_valid


def tool_turn(i: int, result_size: int = 50) -> list[Message]:
    return [
        Message("user", [TextPart(f"question {i} " + "q" * 200)]),
        Message("assistant", [ThinkingPart("hmm", {"signature": f"sig{i}"}),
                              ToolUsePart(f"c{i}", "lookup", {"i": i})]),
        Message("user", [ToolResultPart(f"c{i}", "r" * result_size, name="lookup")]),
        Message("assistant", [TextPart(f"answer {i} " + "a" * 200)]),
    ]


def session_with(turns: int, result_size: int = 50) -> ChatSession:
    s = ChatSession().with_system("You are terse.")
    for i in range(turns):
        s.messages += tool_turn(i, result_size)
    s.push_user("latest question")
    return s


def test_building_a_session():
    s = ChatSession().with_system("sys").with_cache_strategy("none")
    assert s.is_empty() and len(s) == 0
    s.push_user("hi")
    s.push_assistant(Message("assistant", [TextPart("hello"), ToolUsePart("1", "f", {})]))
    s.push_tool_results([ToolResultPart("1", "ok")])
    assert len(s) == 3 and s.messages[2].role == "user" and s.messages[2].tool_results[0].content == "ok"
    assert s.system == "sys" and s.cache_strategy == "none"
    with pytest.raises(NbagentError):
        s.with_cache_strategy("sometimes")


def test_append_to_last_user_and_its_fallback():
    s = ChatSession()
    s.append_to_last_user("first")  # empty history: becomes a user message
    assert [m.role for m in s.messages] == ["user"]
    s.push_assistant("ok")
    s.push_tool_results([])  # nothing to push
    s.append_to_last_user("more")  # lands on the last user message, no bare user message after assistant
    assert [m.role for m in s.messages] == ["user", "assistant"]
    assert [p.text for p in s.messages[0].parts] == ["first", "more"]


def test_compress_drops_oldest_turns_but_keeps_pairs_system_and_latest_turn():
    s = session_with(10)
    tok = ApproxTokenizer()
    before = tok.count_session(s)
    after = s.compress(before // 3, DropOldestTurns(), tok)
    assert after <= before // 3
    assert s.system == "You are terse."
    assert s.messages[-1].text == "latest question"
    assert_history_valid(s)


def test_compress_cannot_go_below_the_latest_turn():
    s = ChatSession()
    s.push_user("x" * 4000)
    after = s.compress(10)
    assert after > 10 and s.messages[0].text.endswith("x" * 100)


def test_shrink_large_tool_results_first():
    s = session_with(3, result_size=20_000)
    tok = ApproxTokenizer()
    n_before = len(s.messages)
    after = s.compress(tok.count_session(s) // 4, ShrinkToolResults(), tok)
    assert len(s.messages) == n_before  # nothing dropped
    assert all(len(r.content) < 2_000 for m in s.messages for r in m.tool_results)
    assert "characters removed" in s.messages[2].tool_results[0].content
    assert after == tok.count_session(s)


def test_save_load_round_trip_is_exact(tmp_path):
    s = session_with(2)
    s.messages[1].parts[0].provider_details["signature"] = "EvMC+/=="  # must survive byte-identically
    path = s.save(tmp_path / "chat.json")
    loaded = ChatSession.load(path)
    assert loaded == s
    assert loaded.messages[1].parts[0].provider_details["signature"] == "EvMC+/=="
    assert json.loads(path.read_text())["version"] == 1


@pytest.mark.parametrize("content,match", [
    ("{not json", "not valid JSON"),
    (json.dumps({"format": "nbagent.chat_session", "version": 2}), "version"),
    (json.dumps({"format": "something-else"}), "not an nbagent chat session"),
    (json.dumps({"format": "nbagent.chat_session", "version": 1, "session_id": "x",
                 "messages": [{"role": "user", "parts": [{"type": "video"}]}]}), "damaged"),
])
def test_bad_files_raise_io_errors(tmp_path, content, match):
    p = tmp_path / "s.json"
    p.write_text(content)
    with pytest.raises(NbagentError, match=match) as info:
        ChatSession.load(p)
    assert info.value.kind == "io"


def test_missing_file_is_an_io_error(tmp_path):
    with pytest.raises(NbagentError) as info:
        ChatSession.load(tmp_path / "nope.json")
    assert info.value.kind == "io"


def test_exact_tokenizer_counts_o200k_offline(monkeypatch):
    """bpe-openai ships o200k_base: exact counts with no network (hosts made unreachable)."""
    pytest.importorskip("bpe_openai", reason='the "tokens" extra is not installed')
    import socket

    def no_network(*args, **kwargs):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    tok = exact_tokenizer()
    assert isinstance(tok, BpeOpenaiTokenizer)
    # o200k_base ids checked against tiktoken (bench/bench_tokens.py compares thousands of strings)
    assert tok.count("hello world") == 2
    assert tok.count("日本語のテキストです。") == 8
    assert tok.count("<|endoftext|>") == 7  # special tokens count as the text a user wrote
    assert tok.count("") == 0
    assert tok.count_session(session_with(1)) > ApproxTokenizer().count_session(session_with(0))


def test_exact_tokenizer_counts_texts_longer_than_one_call(monkeypatch):
    """A text cut into several calls counts as one: cuts fall where o200k splits anyway."""
    pytest.importorskip("bpe_openai", reason='the "tokens" extra is not installed')
    tok = BpeOpenaiTokenizer()
    text = "".join(f"line {i}: x = {i * 7919} # naïve café 🙂\n" for i in range(4000))
    whole = tok.count(text)
    assert whole == 62_872  # tiktoken's count of the same text
    prose = text.replace("\n", " ")
    assert tok.count(prose) == 62_873  # tiktoken's count: no newlines, cut at spaces
    monkeypatch.setattr(BpeOpenaiTokenizer, "PIECE_CHARS", 1000)
    assert tok.count(text) == whole and tok.count(prose) == 62_873
    assert tok.count("a" * 1_200_000) > 0  # bpe-openai alone refuses a million characters


def test_exact_tokenizer_is_a_config_error_when_nothing_can_count(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "bpe_openai", None)
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(NbagentError) as info:
        exact_tokenizer()
    assert info.value.kind == "config" and "jupyter-nbagent[tokens]" in str(info.value)


def test_compaction_counts_each_tools_name_description_and_schema():
    """The request's tool definitions count in full, as conv.estimate counts them (one definition)."""
    from nbagent import tool
    from nbagent.core.compression import count_tools
    from nbagent.loop.compaction import compact_if_needed

    @tool
    def lookup(city: str) -> str:
        """Looks up the weather of a city, with a long description the provider is sent too."""
        return city

    tok = ApproxTokenizer()
    session = ChatSession()
    for i in range(6):
        session.push_user(f"question {i} " * 20)
        session.push_assistant(f"answer {i} " * 20)
    history = tok.count_session(session)
    stats = compact_if_needed(session, tok, [lookup.spec], budget=history)  # the history alone fits
    assert stats is not None and stats.tokens_before == history + count_tools(tok, [lookup.spec])
    assert count_tools(tok, [lookup.spec]) > tok.count(json.dumps(lookup.spec.input_schema))
