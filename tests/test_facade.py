"""The facade's public surface is held here (issue #35 item 4): the exact public members of
``Conversation`` and ``Agent``, so a new one is a deliberate edit of these lists; every name the
API contract (DESIGN.md, kept beside the repository) gives them still works; the accessors that group the rest are thin
views; and ``Agent`` builds its model connection from one frozen ``AgentSettings`` that never shows
its key."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest

from nbagent import Agent, Conversation, NbagentError, tool
from nbagent.conversation import from_state
from nbagent.core.session_settings import AgentSettings
from nbagent.loop.model_connection import ModelConnection, ToolWiring
from nbagent.providers.openai_chat import OpenAIProvider

from support.scripted import ScriptedProvider, text_call
from nbagent.core.conversation_state import plumbing_of

# the Conversation members the contract (DESIGN.md) names (tests outside this repo call them)
CONVERSATION_CONTRACT = {
    "chat", "chat_to_completion", "ask", "send", "receive_steps", "receive_chunks", "history", "turn_count",
    "compaction_indices", "last_response", "total_usage", "last_turn_usage", "clear_history", "connection",
    "conversation_id", "is_idle", "disconnect", "interrupt", "history_df", "usage_df", "tool_calls_df",
    "widget", "save", "load", "turns", "approve", "deny", "add_tool_result", "usage_summary", "plot_usage",
    "to_markdown", "to_html", "estimate", "approvals_df", "undo",
}
# the rest, each a deliberate choice: a setting, a constructor argument read back, the turn
# boundaries beside compaction_indices, and the three accessors (conversation_parts.py)
CONVERSATION_EXTRAS = {"approval_wait", "max_history_size", "turn_start_indices", "budget", "notebook"}

AGENT_CONTRACT = {"conversation", "load", "set_model"}
AGENT_EXTRAS = {
    "ask", "chat", "chat_to_completion", "widget",  # conveniences forwarding to the active conversation
    "model", "tools", "system", "settings",  # what it runs with
    "reset", "new_conversation", "open_session", "save", "session_path", "autosave_status",  # sessions
    "mcp_servers", "disconnect", "aclose",  # what it holds
    "course",  # the course policy, its limits and the rules (course.py's AgentCourse)
    "watch_conversations",  # each conversation it starts or opens, handed to a watcher (nbagent.trace_live)
}
# set by Agent(...) on each agent: the provider, who chats, where it saves, why tools cannot reach the model
AGENT_ATTRIBUTES = {"provider", "user", "save_to", "tools_notice"}
# Agent(...)'s keyword arguments: DESIGN.md's, then the rest; none may go
AGENT_PARAMETERS_CONTRACT = [
    "model", "system", "tools", "auto_execute_tools", "base_url", "api_key", "temperature", "max_tokens",
    "policy", "max_tool_iterations", "hooks", "max_history_size", "cache_strategy", "include_reasoning",
    "resume", "budget_usd", "notebook", "mcp", "save_to",
]
AGENT_PARAMETERS = [
    "model", "system", "tools", "auto_execute_tools", "base_url", "api_key", "temperature", "max_tokens",
    "policy", "max_tool_iterations", "hooks", "max_history_size", "cache_strategy", "include_reasoning",
    "resume", "response_format", "compaction_budget", "tool_timeout", "budget_usd", "pricing", "notebook",
    "mcp", "save_to", "user", "rules", "provider_options",
]

KEY = "sk-facade-secret-0123456789"
PRICE = {"scripted-1": {"input": 1.0, "output": 2.0}}  # USD per 1M tokens


def public(obj) -> set[str]:
    return {m for m in dir(obj) if not m.startswith("_")}


def test_conversation_public_members_are_exactly_the_contract_and_the_listed_extras():
    assert CONVERSATION_CONTRACT.isdisjoint(CONVERSATION_EXTRAS)
    assert public(Conversation) == CONVERSATION_CONTRACT | CONVERSATION_EXTRAS
    assert public(Conversation(None)) == public(Conversation)  # no instance attribute widens it


def test_agent_public_members_and_parameters_are_exactly_the_listed_ones():
    assert public(Agent) == AGENT_CONTRACT | AGENT_EXTRAS
    assert public(Agent(model="demo")) == AGENT_CONTRACT | AGENT_EXTRAS | AGENT_ATTRIBUTES
    assert list(inspect.signature(Agent).parameters) == AGENT_PARAMETERS
    assert set(AGENT_PARAMETERS_CONTRACT) <= set(AGENT_PARAMETERS)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_every_contract_member_still_works(tmp_path):
    agent = Agent(model="demo", tools=[add])
    conv = agent.conversation
    for name in CONVERSATION_CONTRACT:
        assert hasattr(conv, name), name
    response = conv.ask("What is 2 + 3?")
    assert "**5**" in response.text and conv.turn_count == 1 and conv.last_response in response.text
    assert conv.is_idle() and conv.connection is not None and conv.conversation_id
    assert conv.total_usage.total_token_count > 0 and conv.last_turn_usage is not None and len(conv.turns) == 1
    assert len(conv.history_df()) == len(conv.history) and len(conv.usage_df()) == 1
    assert list(conv.tool_calls_df()["name"]) == ["add"] and len(conv.approvals_df()) == 1
    assert conv.usage_summary() is not None and "2 + 3" in conv.to_markdown() and "<html" in conv.to_html()
    assert conv.estimate("next").input_tokens > 0 and conv.compaction_indices == []
    saved = conv.save(tmp_path / "c.json")
    again = Conversation.load(saved)
    assert again.turn_count == 1 and [s.content for s in again.history] == [s.content for s in conv.history]
    with pytest.raises(NbagentError):
        again.ask("read-only without a connection")
    assert callable(conv.undo) and callable(conv.widget) and callable(conv.send)
    conv.clear_history()
    assert conv.history == [] and conv.turn_count == 0
    assert isinstance(Agent.load(saved, tools=[add]).conversation, Conversation)


def test_the_accessors_are_views_of_the_same_conversation():
    provider = ScriptedProvider([text_call("ok", usage=(1000, 100)), text_call("again")])
    agent = Agent(model=provider, pricing=PRICE, budget_usd=0.5)
    conv = agent.conversation
    assert conv.budget.usd == 0.5 and conv.budget.pricing == PRICE
    conv.ask("hello")
    assert conv.budget.spent_usd == pytest.approx((1000 + 200) / 1e6)
    conv.budget.usd = 0.0  # a new limit, set through the accessor, holds the next turn
    with pytest.raises(NbagentError, match="budget.allow_over_once"):
        conv.ask("over")
    conv.budget.allow_over_once()
    assert conv.ask("over").text == "again"
    with pytest.raises(AttributeError):
        conv.budget = 1.0  # a number for the accessor: refused, not silently replacing it
    seen = []
    plumbing_of(conv).add_listener(lambda event, payload: seen.append(event))
    state = plumbing_of(conv).to_state()
    copy = from_state(state)
    assert copy.turn_count == 2 and copy.conversation_id == conv.conversation_id
    assert conv.notebook.code_cells() == []


def test_agent_settings_are_frozen_and_never_show_the_key():
    settings = AgentSettings(model="openai:gpt-4.1-mini", api_key=KEY,
                             base_url="https://user:pa55word@example.com/v1?key=" + KEY,
                             provider_options={"auth_header": KEY, "reasoning_effort": "low"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.model = "demo"  # type: ignore[misc]
    text = repr(settings)
    assert KEY not in text and "pa55word" not in text and "<hidden>" in text and "reasoning_effort" in text
    saved = json.dumps(settings.to_dict())
    assert KEY not in saved and "pa55word" not in saved and "api_key" not in saved
    assert AgentSettings.from_dict({"model": "demo", "api_key": KEY}).api_key is None  # a file gives no key


def test_agent_connects_from_its_settings_alone():
    agent = Agent(model="openai:gpt-4.1-mini", api_key=KEY, base_url="http://127.0.0.1:9/v1", temperature=0.3,
                  max_tokens=77, tool_timeout=5.0, max_tool_iterations=3, system="Be brief.", tools=[add])
    conn = agent.conversation.connection
    assert isinstance(agent.provider, OpenAIProvider) and agent.provider.api_key == KEY
    assert agent.provider.base_url == "http://127.0.0.1:9/v1"
    assert (conn.temperature, conn.max_tokens, conn.max_tool_iterations) == (0.3, 77, 3)
    assert conn.chat_session.system == "Be brief." and list(conn.tools) == ["add"]
    old = agent.provider
    fresh = agent.new_conversation().connection  # a new conversation: a new provider from the same settings
    assert fresh.provider is not old and fresh.provider.api_key == KEY and fresh.provider.base_url == old.base_url
    assert fresh.temperature == 0.3 and fresh.chat_session.system == "Be brief." and list(fresh.tools) == ["add"]
    saved = agent.settings()
    assert saved.api_key is None and saved.base_url == "http://127.0.0.1:9/v1" and saved.temperature == 0.3
    assert KEY not in repr(agent) and KEY not in repr(saved)
    # the connection path takes the typed values and nothing else
    built = ModelConnection(agent.provider, AgentSettings(model=agent.model, max_tokens=9, system="S"),
                            ToolWiring(tools=[add], policy="deny_all"))
    assert (built.max_tokens, built.chat_session.system, list(built.tools)) == (9, "S", ["add"])


def test_agent_usage_is_exported_with_the_contract_signature():
    import nbagent

    assert "agent_usage" in nbagent.__all__
    params = inspect.signature(nbagent.agent_usage).parameters
    assert next(iter(params.values())).kind is inspect.Parameter.VAR_POSITIONAL  # agent_usage(*paths)


def test_serve_keeps_the_contracts_signature_and_stays_the_function():
    import nbagent
    import nbagent.served_notebook  # importing its module must not shadow the function

    params = inspect.signature(nbagent.serve).parameters
    assert list(params)[:5] == ["notebook", "namespace", "approve_code", "port", "save_to"]
    assert params["notebook"].default is None and params["namespace"].kind is inspect.Parameter.KEYWORD_ONLY
    assert (params["namespace"].default, params["approve_code"].default, params["port"].default) == (None, True, 0)
    assert callable(nbagent.serve) and "serve" in nbagent.__all__
    assert callable(nbagent.served_notebook.ServedNotebook.stop)  # url and token: tests/test_serve.py
