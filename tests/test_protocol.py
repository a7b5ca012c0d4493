"""The widgets' protocol (nbagent/notebook/protocol.py): every request has a handler, a malformed
message is a clear error that loses nothing, the wire shapes stay as the front end reads them, and
js/src/protocol.json is the declaration as it is now."""

from __future__ import annotations

import dataclasses
import json

import pytest

pytest.importorskip("anywidget")

from nbagent import Agent, Conversation  # noqa: E402
from nbagent.notebook import protocol  # noqa: E402
from nbagent.notebook.protocol import (BROWSER, CHAT, AssetRequest, Deltas, HistoryRequest, Names,  # noqa: E402
                                      NamesRequest, Resync, Send, TurnsPage)
from nbagent.notebook.session_browser import SessionActions, SessionBrowser  # noqa: E402
from nbagent.notebook.widget import ChatWidget  # noqa: E402
from support.widget_messages import customs, deliver, deliver_raw, until_idle  # noqa: E402


def test_the_schema_and_type_files_are_the_declaration():
    stale = "is stale: run `python -m nbagent.notebook.protocol` and commit it"
    assert json.loads(protocol.SCHEMA_PATH.read_text(encoding="utf-8")) == protocol.schema(), f"js/src/protocol.json {stale}"
    assert protocol.TS_PATH.read_text(encoding="utf-8") == protocol.typescript(), f"js/src/protocol.d.ts {stale}"
    assert protocol.MODULE_PATH.read_text(encoding="utf-8") == protocol.module(), f"js/src/protocol_data.js {stale}"


async def test_what_the_kernel_sends_in_a_turn_matches_the_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    events = protocol.schema()["chat"]["events"]
    w = ChatWidget(Agent(model="demo", delay=0, save_to=tmp_path))
    sent = customs(w)
    deliver(w, Send(prompt="What is 12 * 7?"))
    await until_idle(w)
    deliver(w, Resync())
    await until_idle(w)
    deliver(w, HistoryRequest(id="h1"))
    deliver(w, AssetRequest(name="math"))
    assert {m["type"] for m in sent} >= {"deltas", "turns", "history", "asset"}
    for message in sent:
        jsonschema.validate(message, events[message["type"]])


def test_every_request_has_a_handler(tmp_path):
    chat = ChatWidget(Agent(model="demo", delay=0, save_to=tmp_path))
    assert chat.handlers.missing() == []
    browser = SessionBrowser(tmp_path, SessionActions(resume=lambda p: None, export=lambda p, f: p, trash=lambda p: p))
    assert browser.handlers.missing() == []
    assert set(CHAT.requests) >= {"send", "stop", "approve", "deny", "resync", "asset", "names", "new_chat", "history",
                                  "open_session", "next"}
    assert set(BROWSER.requests) == {"refresh", "search", "asset", "open", "export", "trash", "restore", "resume"}


def test_events_keep_their_wire_shape():
    assert CHAT.encode(Deltas([[1, "c", 0, "hi"]])) == {"type": "deltas", "items": [[1, "c", 0, "hi"]]}  # no patches: left out
    assert CHAT.encode(TurnsPage([], first=True, last=False)) == {"type": "turns", "turns": [], "first": True,
                                                                   "last": False}
    assert CHAT.encode(Names("box-1", [["df", "DataFrame"]])) == {"type": "names", "id": "box-1",
                                                                   "names": [["df", "DataFrame"]]}


@pytest.mark.parametrize("content, says", [
    ({"type": "approve"}, "lacks 'call_id'"),
    ({"type": "approve", "call_id": 7}, "'call_id' must be str, got int"),
    ({"type": "send", "prompt": ["x"]}, "'prompt' must be str, got list"),
    ({"type": "send", "prompt": "x", "over_budget": "yes"}, "'over_budget' must be bool"),
    ({"type": "bogus"}, "unknown chat request 'bogus'"),
    ({"type": "send", "prompt": "x", "over_budjet": True}, "has no field 'over_budjet'"),  # as the schema rejects it
    ({"type": "stop", "now": True}, "has no field 'now'"),
])
def test_a_malformed_chat_message_is_a_clear_notice(content, says):
    w = ChatWidget(Conversation(None))
    sent = customs(w)
    deliver_raw(w, content)
    assert says in w.notice and w.notice.startswith(f"{content['type']} failed:")
    assert sent == [] and w.prompts.task is None  # nothing ran, nothing else sent


def test_a_malformed_browser_request_is_answered_with_the_reason(tmp_path):
    browser = SessionBrowser(tmp_path, SessionActions(resume=lambda p: None, export=lambda p, f: p, trash=lambda p: p))
    sent = []
    browser.send = lambda content, buffers=None: sent.append(content)
    deliver_raw(browser, {"type": "search", "id": "r1", "text": 5})
    assert sent == [{"type": "reply", "id": "r1", "ok": False, "error": "[invalid_request] the 'search' message's 'text' must be str, got int"}]
    deliver_raw(browser, {"type": "refresh", "id": "r2"})
    assert sent[-1] == {"type": "reply", "id": "r2", "ok": True}


def test_a_request_is_answered_with_its_answer_class():
    w = ChatWidget(Conversation(None))
    w.namespace = {"sales": [1, 2]}
    sent = customs(w)
    deliver(w, NamesRequest(id="box-9"))
    assert sent == [{"type": "names", "id": "box-9", "names": [["sales", "list"]]}]
    assert CHAT.requests["names"].answer is Names and CHAT.requests["send"].answer is None
    assert Send.KIND == "send"


def test_every_answer_carries_the_id_of_the_request_it_answers():
    """One correlation style: a request with an answer has an ``id`` and its answer carries it back
    (an asset answer used to be matched by its name alone)."""
    for proto in (CHAT, BROWSER, protocol.CLASS):
        for kind, spec in proto.requests.items():
            if spec.answer is not None:
                assert "id" in {f.name for f in spec.fields}, f"{proto.widget} {kind!r}"
    w = ChatWidget(Conversation(None))
    sent = customs(w)
    deliver(w, AssetRequest(name="math", id="math-1"))
    deliver(w, NamesRequest(id="box-1"))
    assert [(m["type"], m["id"]) for m in sent] == [("asset", "math-1"), ("names", "box-1")]
    with pytest.raises(ValueError, match="need an 'id'"):
        @protocol.Protocol("test").request("ping", answer=Names)
        @dataclasses.dataclass(frozen=True)
        class Ping(protocol.Message):
            pass
