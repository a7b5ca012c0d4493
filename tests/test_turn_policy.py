"""The seam for policies (``nbagent/core/turn_policy.py``): nbagent's own agent, its tool loop, the
widget's footer and an outside agent over MCP all consult one ``TurnPolicy``, so a policy that is not
the course's is obeyed the same way. Real agents with the demo model; the MCP client is the official
SDK's, against a real server on loopback with a real ``.ipynb`` in file mode."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nbagent import Agent, BudgetExceeded, tool
from nbagent.core.conversation_state import plumbing_of
from nbagent.core.turn_policy import NO_POLICY, Rules, TurnPolicy
from nbagent.notebook.widget_usage import gauge_dict, policy_notice

pytestmark = pytest.mark.timeout(90)


class HouseRules(TurnPolicy):
    """A policy of this test's own: closed until ``opened``, no ``shout`` tool, and its rules text."""

    name = "House rules"
    rules = Rules("house.md", "/srv/house.md", "Answer in one line.")

    def __init__(self) -> None:
        self.opened = False
        self.asked: list[str] = []

    def refusal(self, turns, conversation_id, expected_usd):
        self.asked.append(conversation_id)
        return None if self.opened else BudgetExceeded("closed: the house opens at nine")

    def tool_refusal(self, tool):
        return "shouting is not allowed in this house" if tool.name == "shout" else ""


@tool
def shout(text: str) -> str:
    """Say ``text`` loudly."""
    return text.upper() + "!"


def test_nbagents_own_agent_obeys_a_policy_that_is_not_the_courses(tmp_path, monkeypatch):
    monkeypatch.delenv("NBAGENT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no course here
    agent = Agent(model="demo", delay=0, tools=[shout])
    conv = agent.conversation
    assert plumbing_of(conv).policy is agent.course  # no nbagent.toml: the course allows everything
    house = plumbing_of(conv).policy = HouseRules()
    assert policy_notice(conv) == "Not sent: closed: the house opens at nine"
    assert gauge_dict(conv)["rules"] == "house.md"
    with pytest.raises(BudgetExceeded, match="opens at nine"):
        agent.ask('shout "hello"')
    assert conv.turn_count == 0 and house.asked == [conv.conversation_id] * 2
    house.opened = True
    assert policy_notice(conv) == ""
    agent.ask('shout "hello"')
    runs = [s for s in conv.history if s.is_tool_run]
    assert runs and runs[0].tool_calls[0].name == "shout"
    assert "not allowed in this house" in runs[0].content and "HELLO!" not in runs[0].content


def test_a_conversation_without_an_agent_obeys_no_policy():
    from nbagent import Conversation
    from nbagent.core.connection import MockConnection

    conv = Conversation(MockConnection([]))
    assert plumbing_of(conv).policy is NO_POLICY and plumbing_of(conv).refusal("hi") is None
    assert plumbing_of(conv).rules_label == ""


def test_an_outside_agents_call_over_mcp_meets_the_same_policy(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("mcp")
    import nbagent

    monkeypatch.delenv("NBAGENT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("x = 1"))
    path = tmp_path / "analysis.ipynb"
    nbformat.write(nb, str(path))
    server = nbagent.serve(path, namespace={}, approve_code=False)
    house = plumbing_of(server.agent.conversation).policy = HouseRules()
    try:
        closed, = _calls(server, [("read_notebook", {})])
        house.opened = True
        read, = _calls(server, [("read_notebook", {})])
        server.agent.tools["shout"] = shout  # as %chat_tools would add it
        shouted, = _calls(server, [("shout", {"text": "hi"})])
    finally:
        server.stop()
    assert closed.is_error and "the house opens at nine" in _text(closed)
    assert not read.is_error and "x = 1" in _text(read)
    assert shouted.is_error and "not allowed in this house" in _text(shouted)


def _calls(server, steps: list[tuple[str, dict]]) -> list:
    """The results of ``steps`` (tool name, arguments) from one MCP client session."""
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def run() -> list:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {server.token}"},
                                      timeout=httpx2.Timeout(30.0)) as http:
            info = types.Implementation(name="Claude Code", version="2.1.7")
            async with Client(streamable_http_client(server.url, http_client=http), client_info=info,
                              mode="legacy") as client:
                return [await client.call_tool(name, args) for name, args in steps]

    return asyncio.run(run())


def _text(result) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def test_the_seams_base_allows_everything_and_adds_nothing(tmp_path):
    base = TurnPolicy()
    assert base.refusal([], "c", lambda: pytest.fail("no cost asked without a budget")) is None
    assert base.stop_reason([], "c") == "" and base.tool_refusal(shout) == "" and base.rules is None
    assert base.tools([shout]) == [shout] and base.budget_usd(2.0) == 2.0 and base.user("ana") == "ana"
    assert base.model(None, lambda: "demo") == "demo" and base.model("openai:x", lambda: "demo") == "openai:x"
    assert base.save_to(tmp_path) == Path(tmp_path) and base.save_to(None) is None and base.source is None
