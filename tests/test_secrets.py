"""API keys never leak, whatever form they come in (issue #14 items 1, 2, 7, 9).

One key is handed over in every accepted form -- plain, with the trailing newline of a key read
from a file, in the environment, in a ``base_url`` query -- to each provider; 401, 500 and
connection errors are triggered through a whole Agent; then every surface a user or a log could
see is scanned for the key in any form (raw, stripped, escaped, URL-encoded).
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from urllib.parse import quote

import pytest

from nbagent import Agent, NbagentError
from nbagent.core.errors import secret_forms
from nbagent.providers.openai_chat import OpenAIProvider

from support.fault_server import FaultServer, collect, reply, request_for, sse, stall_after
from support.wires import WIRES

KEY = "sk-leak-test-0123456789abcdefXYZ"
FORMS = ["plain", "newline", "env", "query"]
ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
       "openai-responses": "OPENAI_API_KEY"}


def make(wire, server, form, monkeypatch, **kwargs):
    kwargs.setdefault("retry_base_delay", 0.01)
    kwargs.setdefault("max_retries", 1)
    if form == "plain":
        return wire.make_provider(server.url, api_key=KEY, **kwargs)
    if form == "newline":
        return wire.make_provider(server.url, api_key=KEY + "\n", **kwargs)
    if form == "env":
        monkeypatch.setenv(ENV[wire.name], KEY)
        return wire.make_provider(server.url, **kwargs)
    provider = wire.make_provider(server.url + "/proxy?key=" + quote(KEY) + "&mode=test", api_key="unused-key-0000",
                                  **kwargs)
    return provider


def leaks(text: str) -> list[str]:
    return [form for form in secret_forms(KEY) | secret_forms(KEY + "\n") if form in text]


def surfaces(agent, error, tmp_path, caplog) -> dict[str, str]:
    conv = agent.conversation
    out = {
        "str(error)": str(error), "repr(error)": repr(error),
        "traceback": "".join(traceback.format_exception(error)),
        "repr(provider)": repr(agent.provider), "repr(agent)": repr(agent), "repr(conversation)": repr(conv),
        "saved file": conv.save(tmp_path / "s.json", frames=True).read_text(),
        "saved agent file": agent.save(tmp_path / "agent.json", frames=True).read_text(),
        "history_df": conv.history_df().to_csv(), "usage_df": conv.usage_df().to_csv(),
        "logs": "\n".join(r.getMessage() for r in caplog.records),
        "markdown fallback": json.dumps(conv._repr_mimebundle_(), default=str),
    }
    widget = conv.widget()
    out["widget state"] = json.dumps(widget.get_state(), default=str)
    return out


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("wire", WIRES, ids=[w.name for w in WIRES])
@pytest.mark.parametrize("fault", ["401", "500", "refused"])
def test_a_key_in_any_form_never_shows(wire, form, fault, monkeypatch, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with FaultServer() as server:
        if fault == "401":
            server.push(reply(401, wire.error_body(401, f"Incorrect API key provided: {KEY}")))
        elif fault == "500":
            server.push(*[reply(500, wire.error_body(500, f"upstream failed for key={KEY}"))] * 2)
        provider = make(wire, server, form, monkeypatch)
        if fault == "refused":
            server.stop()
        agent = Agent(model=provider)
        with pytest.raises(NbagentError) as err:
            agent.ask("hello")
        if form != "env" and fault != "refused":
            sent = server.requests[-1]
            assert KEY not in json.dumps(sent.json or {})  # the key travels in a header or the query only
            if form == "query":
                assert "key=" in sent.path and "/proxy" in sent.path.split("?")[0]  # path before the query
        found = {name: leaks(text) for name, text in surfaces(agent, err.value, tmp_path, caplog).items()}
        assert not {k: v for k, v in found.items() if v}, found


def test_a_key_with_a_break_inside_is_a_config_error_that_does_not_show_it():
    with pytest.raises(NbagentError) as err:
        OpenAIProvider("gpt-x", api_key="sk-abc\ndef0123456789", base_url="http://127.0.0.1:9/v1")
    assert err.value.kind == "config" and "line break" in str(err.value)
    assert "def0123456789" not in str(err.value) and "sk-abc" not in str(err.value)


def test_a_trailing_newline_is_stripped_and_the_call_works():
    with FaultServer() as server:
        server.push(sse(WIRES[0].text_body(["hi"])))
        provider = WIRES[0].make_provider(server.url, api_key=KEY + "\n")
        events, error = asyncio.run(collect(provider))
        assert error is None
        assert server.requests[-1].headers.get("authorization") == f"Bearer {KEY}"


def test_disconnecting_one_conversation_leaves_anothers_stream_alone():
    """Two conversations share one provider: one's disconnect() does not cut the other's stream."""
    wire = WIRES[0]

    async def main():
        with FaultServer() as server:
            server.push(sse(wire.text_body(["one ", "two ", "three"]), chunk_size=8, delay=0.05))
            provider = wire.make_provider(server.url, api_key=KEY)
            agent = Agent(model=provider)
            first, second = agent.conversation, agent.new_conversation()
            task = asyncio.ensure_future(second.chat_to_completion("stream please"))
            await asyncio.sleep(0.1)
            await first.disconnect()
            resp = await task
            assert resp.text == "one two three" and resp.finish_reason.value == "STOP"

    asyncio.run(main())


def test_a_server_that_never_answers_fails_at_the_first_byte_timeout_saying_how_long_it_waits():
    """The run found a server that takes the request and never answers took 90 s to fail (3 attempts)."""
    from nbagent.providers.base import Waiting

    wire = WIRES[0]

    async def main():
        with FaultServer() as server:
            server.push(lambda ex: ex.sleep(30))  # takes the request, never replies
            provider = wire.make_provider(server.url, api_key=KEY, first_byte_timeout=1.0, retry_base_delay=0.01)
            assert provider.max_retries == 2  # retries were left, and none was spent on the silent server
            provider.waiting_notice_after, provider.waiting_notice_every = 0.2, 0.2
            events, error = [], None
            try:
                async for batch in provider.stream_batches(request_for(provider)):
                    events += batch
            except NbagentError as exc:
                error = exc
            await provider.aclose()
            assert error is not None and error.kind == "timeout" and "within 1 s (first_byte_timeout)" in str(error)
            assert "not asked again" in str(error)
            assert len(server.requests) == 1  # the server holds the request: a retry would wait again
            waits = [e for e in events if isinstance(e, Waiting)]
            assert waits and all(isinstance(e, Waiting) for e in events)  # shown while it waited
            assert [w.waited_s for w in waits] == sorted(w.waited_s for w in waits) and waits[-1].waited_s < 1.0
            assert waits[0].notice.startswith("waiting for the first byte from 127.0.0.1 (") \
                and waits[0].notice.endswith(" s of 1 s)")
            # long silences between tokens stay allowed: that is read_timeout, not this one (the headers come
            # at once, but "at once" on a loaded machine can take longer than a few hundred ms: 1 s to get them)
            server.push(stall_after(wire.text_prefix(["slow"]), seconds=1.5))
            provider = wire.make_provider(server.url, api_key=KEY, first_byte_timeout=1.0, read_timeout=5.0)
            events, error = await collect(provider)
            assert error is not None and "first_byte_timeout" not in str(error)  # the stream ended unfinished
        assert wire.make_provider("http://127.0.0.1:9").first_byte_timeout == 30.0  # the documented default

    asyncio.run(main())


def test_the_wait_for_the_first_byte_is_the_model_steps_notice_until_the_answer_starts():
    from support.fault_server import Exchange

    wire = WIRES[0]

    def late(ex: Exchange) -> None:  # the first byte after 0.8 s, then the answer
        ex.sleep(0.8)
        sse(wire.text_body(["at", " last"]))(ex)

    with FaultServer() as server:
        server.push(late)
        provider = wire.make_provider(server.url, api_key=KEY, first_byte_timeout=5.0)
        provider.waiting_notice_after, provider.waiting_notice_every = 0.2, 0.2
        conv = Agent(provider).conversation

        async def steps() -> list:
            await conv.send("hi")
            return [(s.notice, s.content) async for s in conv.receive_steps() if s.is_model_call]

        seen = asyncio.run(steps())
    waiting = [n for n, c in seen if n.startswith("waiting for the first byte from 127.0.0.1")]
    assert waiting and all(n.endswith(" s of 5 s)") for n in waiting) and not any(c for n, c in seen if n)
    assert seen[-1] == ("", "at last")  # cleared once the reply started
    assert conv.turns[-1].status == "done"


def test_stop_while_waiting_for_the_first_byte_ends_the_turn_and_the_request():
    from nbagent import FinishReason

    wire = WIRES[0]
    with FaultServer() as server:
        server.push(lambda ex: ex.sleep(60))  # takes the request, never replies
        provider = wire.make_provider(server.url, api_key=KEY, first_byte_timeout=60.0)
        provider.waiting_notice_after, provider.waiting_notice_every = 0.1, 0.1
        conv = Agent(provider).conversation

        async def run():
            await conv.send("hi")
            async for step in conv.receive_steps():
                if step.notice.startswith("waiting for the first byte"):
                    conv.interrupt()  # Stop, while it waits

        asyncio.run(run())
    assert conv.turns[-1].finish_reason == FinishReason.INTERRUPTED and conv.turns[-1].status == "interrupted"
    assert len(server.requests) == 1 and conv.is_idle()


def test_a_busy_server_is_given_up_at_the_total_deadline():
    wire = WIRES[0]

    async def main():
        with FaultServer() as server:  # answers 503 "retry after 0.3 s" to every request
            server.push(*[reply(503, wire.error_body(503, "busy"), {"retry-after": "0.3"})] * 12)
            provider = wire.make_provider(server.url, api_key=KEY, max_retries=10, total_timeout=1.0)
            events, error = await collect(provider)
            assert error is not None and error.kind in ("server", "timeout")  # a 503, or the last wait cut short
            assert "total_timeout 1 s reached" in str(error)
            assert 1 <= len(server.requests) < 11  # 11 attempts 0.3 s apart never fit in 1 s
        assert wire.make_provider("http://127.0.0.1:9").total_timeout == 90.0  # the documented default

    asyncio.run(main())
