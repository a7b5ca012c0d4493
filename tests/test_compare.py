"""nbagent.compare: the same prompts against several models, one DataFrame (offline: demo, scripted, no-key)."""

from __future__ import annotations

import pytest

pd = pytest.importorskip("pandas")

import nbagent  # noqa: E402
from nbagent import Agent, NbagentError  # noqa: E402
from nbagent.comparison import COMPARE_COLUMNS  # noqa: E402
from nbagent.analysis.pricing import Price  # noqa: E402
from nbagent.providers.local import INSTALL_COMMAND, local_runtime_available  # noqa: E402

from support.audit_script import answer, audit_conversation, calls, read_file, usage  # noqa: E402
from support.scripted import ScriptedProvider  # noqa: E402

PRICE = Price(2.0, 8.0, cached_input=0.5)


def scripted(*answers: str) -> ScriptedProvider:
    """A model answering each prompt in turn, with cached and thinking tokens."""
    return ScriptedProvider([answer(a, usage(100, 10, cached=40, thoughts=5), thinking="hmm") for a in answers])


def test_one_row_per_prompt_and_model_with_numbers_from_the_ledger():
    provider = scripted("first answer", "second answer")
    df = nbagent.compare(["q one", "q two"], models=["demo", provider], pricing={"scripted-1": PRICE},
                         delay=0)  # provider options reach a model given by name (the demo streams at once)
    assert list(df.columns) == list(COMPARE_COLUMNS) and len(df) == 4
    assert df.model.cat.categories.tolist() == ["demo", "scripted:scripted-1"]
    assert (df.status == "done").all() and df.error.isna().all()
    mine = df[df.model == "scripted:scripted-1"].set_index("prompt_index")
    assert mine.answer.tolist() == ["first answer", "second answer"]
    assert mine.prompt.tolist() == ["q one", "q two"]
    assert mine.input_tokens.tolist() == [100, 100] and mine.cached_tokens.tolist() == [40, 40]
    assert mine.thinking_tokens.tolist() == [5, 5] and mine.output_tokens.tolist() == [10, 10]
    assert mine.cost_usd.tolist() == pytest.approx([PRICE.cost(100, 40, 0, 5, 10)] * 2)
    assert (mine.ttft_s >= 0).all() and (mine.duration_s >= mine.ttft_s).all()
    # the second prompt is sent in the same conversation: the model sees its first answer
    second = provider.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "user"] and "first answer" in second[1].text
    demo = df[df.model == "demo"]
    assert demo.answer.str.contains("demo model").all() and (demo.output_tokens > 0).all()
    assert (demo.cost_usd == 0).all()  # the demo runs locally: free


def test_a_failing_model_gives_error_rows_and_the_others_still_answer(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    flaky = ScriptedProvider([[NbagentError("overloaded", kind="server", http_code=503)],
                              answer("back again", usage(30, 3))])
    df = nbagent.compare(["a", "b"], models=["openai:gpt-4.1-mini", "nosuch:model", flaky, scripted("x", "y")])
    rows = {(r.model, r.prompt_index): r for r in df.itertuples()}
    no_key = rows[("openai:gpt-4.1-mini", 0)]
    assert no_key.status == "error" and "no OpenAI API key" in no_key.error
    assert rows[("openai:gpt-4.1-mini", 1)].model_calls == 0  # an auth error is not sent again
    assert "no OpenAI API key" in rows[("openai:gpt-4.1-mini", 1)].error
    assert "unknown model" in rows[("nosuch:model", 0)].error and pd.isna(rows[("nosuch:model", 1)].answer)
    # a server error fails one prompt; the next prompt is still sent
    assert rows[("scripted:scripted-1", 0)].status == "error" and rows[("scripted:scripted-1", 0)].http_code == 503
    assert rows[("scripted:scripted-1", 1)].answer == "back again"
    assert rows[("scripted:scripted-1 #2", 1)].answer == "y"  # the same label twice gets a suffix


def test_replays_a_saved_session_or_a_conversation(tmp_path):
    import asyncio

    conv = asyncio.run(audit_conversation()).conversation
    path = conv.save(tmp_path / "session.json")
    prompts = [t.prompt for t in conv.turns]
    for source in (path, str(path), conv):
        provider = scripted(*[f"answer {i}" for i in range(len(prompts))])
        df = nbagent.compare(source, models=[provider], system="be brief")
        assert df.prompt.tolist() == prompts and df.answer.tolist() == [f"answer {i}" for i in range(4)]
        assert provider.requests[0].system == "be brief"
    # without system=, the session's own system prompt is used
    agent = Agent(model=scripted("hi"), system="you are terse")
    agent.ask("hello")
    provider = scripted("again")
    nbagent.compare(agent.conversation, models=[provider])
    assert provider.requests[0].system == "you are terse"


def test_tools_and_agent_options_reach_every_model():
    provider = ScriptedProvider([calls(("r", "read_file", {"path": "f"}), use=usage(50, 5)),
                                 answer("read it", usage(900, 4))])
    df = nbagent.compare("read f", models=[provider], tools=[read_file], policy="deny_all")
    row = df.iloc[0]
    assert row.tool_calls == 1 and row.model_calls == 2 and row.answer == "read it"
    assert "denied by policy deny_all" in provider.requests[1].messages[-1].tool_results[0].content


def test_bad_arguments_are_config_errors():
    with pytest.raises(NbagentError) as e:
        nbagent.compare(42, models=["demo"])
    assert e.value.kind == "config"
    with pytest.raises(NbagentError, match="at least one model"):
        nbagent.compare("hi", models=[])
    with pytest.raises(NbagentError, match="no prompt"):
        nbagent.compare([], models=["demo"])


@pytest.mark.local_model
@pytest.mark.skipif(not local_runtime_available(), reason=f"local model runtime missing: {INSTALL_COMMAND}")
def test_local_model_against_demo():
    df = nbagent.compare(["Say hello."], models=["local", "demo"], max_tokens=8)
    local = df[df.model == "local"].iloc[0]
    assert local.status == "done" and local.output_tokens > 0 and local.answer
    assert local.ttft_s > 0 and local.cost_usd == 0
    assert df[df.model == "demo"].iloc[0].status == "done"


def test_a_budget_applies_to_each_model_with_the_same_prices():
    """pricing= prices the frame and each Agent, so budget_usd= refuses a turn that would go over."""
    pricey = {"scripted-1": Price(1000.0, 1000.0)}  # $0.001 a token: one scripted turn costs $0.115
    df = nbagent.compare(["one", "two"], models=[scripted("a", "b")], pricing=pricey, budget_usd=0.15)
    first, second = df.iloc[0], df.iloc[1]
    assert first.status == "done" and first.cost_usd == pytest.approx(0.115)
    assert second.status == "error" and "budget" in second.error and second.model_calls == 0  # nothing sent
