"""A read's JSON data decoded in one pass agrees with ``json.loads`` event by event; what it cannot
decode is left to ``parse_json``, so a bad event fails as it would alone."""

from __future__ import annotations

import json

import pytest

from nbagent import NbagentError
from nbagent.core.messages import Message, TextPart
from nbagent.providers.base import Finish, ModelRequest, TextDelta
from nbagent.providers.sse import SSEEvent
from nbagent.providers.stream_json import UNDECODED, decode_payloads, parse_json

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def payloads(*datas: str) -> list:
    return [payload for _, payload in decode_payloads([SSEEvent(data=d) for d in datas])]


def test_each_value_is_decoded_and_what_is_not_one_value_is_left_undecoded():
    datas = ['{"a": [1, {"b": null}]}', '"text"', "[DONE]", "", " {}", "{} ", "\ufeff{}", "1,2", '{"a":', "{}{}"]
    assert payloads(*datas) == [{"a": [1, {"b": None}]}, "text"] + [UNDECODED] * 8


def test_parse_json_decodes_padded_values_and_names_garbage():
    assert parse_json(" {} ") == {}
    with pytest.raises(NbagentError) as info:
        parse_json("not json {", provider="openai")
    assert info.value.kind == "protocol" and "'not json {'" in str(info.value)


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet='{}[]",:0123456789.eE+-tfnrulas \n\t\\', max_size=12)
                | st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                               lambda inner: st.lists(inner, max_size=3)
                               | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                               max_leaves=8).map(json.dumps), max_size=12))
def test_a_decoded_payload_is_what_json_loads_gives_and_nothing_parse_json_rejects_is_decoded(datas):
    for data, payload in zip(datas, payloads(*datas), strict=True):
        try:
            expected = json.loads(data)
        except ValueError:
            assert payload is UNDECODED
            with pytest.raises(NbagentError):
                parse_json(data)
            continue
        assert payload is UNDECODED or _same(payload, expected)
        assert payload is not UNDECODED or data != data.strip()  # only padded values are left to parse_json


# --- a plugin's parser written before the decoded payload existed ------------------------------


class EventOnlyParser:
    """A plugin's parser: ``feed`` takes the SSE event alone and decodes it itself."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.fed = 0

    def feed(self, event):
        self.fed += 1
        return self.inner.feed(event)

    def close(self):
        return self.inner.close()


async def test_a_parser_whose_feed_takes_the_event_only_is_still_fed(fault_server):
    from nbagent.providers.http import takes_payload
    from nbagent.providers.openai_chat import OpenAIProvider
    from support.fault_server import sse
    from support.wires import openai_text

    parsers = []

    class PluginProvider(OpenAIProvider):
        def new_parser(self, request):
            parsers.append(EventOnlyParser(super().new_parser(request)))
            return parsers[-1]

    fault_server.push(sse(openai_text(["Hel", "lo"])))
    provider = PluginProvider("m", api_key="sk-plugin-0123456789abcdef", base_url=fault_server.url)
    request = ModelRequest(model="m", messages=[Message("user", [TextPart("hi")])])
    events = [e async for e in provider.stream(request)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello"
    assert isinstance(events[-1], Finish) and parsers[0].fed == 6  # role, 2 texts, finish, usage, [DONE]
    assert not takes_payload(parsers[0]) and takes_payload(OpenAIProvider.new_parser(provider, request))
