"""A read's JSON data decoded in one pass agrees with ``json.loads`` event by event; what it cannot
decode is left to ``parse_json``, so a bad event fails as it would alone."""

from __future__ import annotations

import json

import pytest

from nbagent import NbagentError
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
