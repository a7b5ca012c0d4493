"""Property-based fuzzing (hypothesis) of what reads untrusted input.

- the SSE decoder: any bytes, split anywhere, decode to the same events and raise nothing;
- the session loader: a saved file with any value replaced anywhere loads or fails with
  ``NbagentError(kind="io")`` -- never another exception;
- tool arguments: any JSON value is either accepted or reported as a readable problem, and a tool
  run never raises;
- text with lone surrogates and NULs: a conversation given such prompts and tool results stays
  usable and saves.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from nbagent import Agent, Conversation, NbagentError, tool  # noqa: E402
from nbagent.core.session_file import read_session  # noqa: E402
from nbagent.conversation import from_state  # noqa: E402
from nbagent.providers.sse import SSEDecoder  # noqa: E402

from support.scripted import ScriptedProvider, text_call, tool_call  # noqa: E402

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SESSIONS = Path(__file__).resolve().parent / "data" / "sessions"
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)


def decode(body: bytes, cuts: list[int]) -> list:
    decoder = SSEDecoder()
    events, start = [], 0
    for cut in sorted(set(c % (len(body) + 1) for c in cuts)) + [len(body)]:
        events += decoder.feed(body[start:cut])
        start = cut
    events += decoder.flush()
    return [(e.event, e.data, e.id) for e in events]


@FUZZ
@given(st.binary(max_size=400), st.lists(st.integers(min_value=0), max_size=8))
def test_sse_decoder_takes_any_bytes_split_anywhere(body, cuts):
    assert decode(body, cuts) == decode(body, [])


@FUZZ
@given(st.lists(st.sampled_from([b"data: ", b"event: x", b"id: 7", b": c", b"\r", b"\n", b"\r\n", b"{}",
                                 "é€😀".encode(), b"\xff", b"retry: 5"]), max_size=40),
       st.lists(st.integers(min_value=0), max_size=8))
def test_sse_decoder_on_sse_like_bytes(pieces, cuts):
    body = b"".join(pieces)
    assert decode(body, cuts) == decode(body, [])


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


SAVED = json.loads((SESSIONS / "demo-tools-v1.json").read_text(encoding="utf-8"))
SAVED.pop("frames")
PATHS = [p for p in _paths(SAVED) if p]


@FUZZ
@given(st.sampled_from(PATHS), JSON, st.sampled_from([1, 2]))
def test_session_loader_never_raises_anything_but_io_errors(tmp_path, path, value, version):
    doc = json.loads(json.dumps(SAVED))
    doc["version"] = version
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    file = tmp_path / "mutated.json"
    file.write_text(json.dumps(doc))
    try:
        state = read_session(file)
    except NbagentError as err:
        assert err.kind == "io"
    else:
        conv = from_state(state)
        conv.save(tmp_path / "again.json")  # what loads also saves


@tool
def typed(count: int, names: list[str], ratio: float = 0.5, mode: str = "fast") -> str:
    """A tool with typed arguments."""
    return f"{count} {len(names)} {ratio} {mode}"


@FUZZ
@given(st.dictionaries(st.sampled_from(["count", "names", "ratio", "mode", "extra"]), JSON, max_size=5) | JSON)
def test_tool_arguments_are_accepted_or_reported(args):
    problems = typed.validate(args)
    output = asyncio.run(typed.run(args))
    assert isinstance(output.text, str)
    if problems:
        assert output.is_error and all(isinstance(p, str) and p for p in problems)


WEIRD = st.text(alphabet=st.sampled_from(["a", " ", "\x00", "\ud800", "\udfff", "é", "😀", "\n"]), max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(WEIRD, WEIRD)
def test_surrogates_and_nuls_never_break_a_conversation(tmp_path, prompt, result):
    @tool
    def odd() -> str:
        """Returns odd text."""
        return result

    agent = Agent(model=ScriptedProvider([tool_call(("c", "odd", {})), text_call("ok"), text_call("again")]),
                  tools=[odd])
    agent.ask(prompt or "x")
    assert agent.ask("next").text.strip() == "again"
    agent.conversation.save(tmp_path / "weird.json")
    for step in Conversation.load(tmp_path / "weird.json").history:
        step.content.encode("utf-8")
