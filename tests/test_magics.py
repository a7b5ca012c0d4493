"""The %%chat cell magic in a real IPython shell."""

from __future__ import annotations

import pytest

pytest.importorskip("IPython")


@pytest.fixture(scope="module")
def ip():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbagent")
    return shell


def test_chat_magic_streams_and_keeps_one_agent(ip, capsys):
    result = ip.run_cell_magic("chat", "-m demo --new", "Hello there")
    assert result is None  # no stray empty Out[] under the answer
    out = capsys.readouterr().out
    assert "demo model" in out and "💭" in out
    agent = ip.user_ns["nbagent_agent"]
    ip.run_cell_magic("chat", "", "And again")
    assert ip.user_ns["nbagent_agent"] is agent and agent.conversation.turn_count == 2


def test_chat_magic_with_a_named_agent_and_tools(ip, capsys):
    from nbagent import Agent, tool

    @tool
    def calculator(expression: str) -> float:
        """Evaluates arithmetic."""
        return 42.0

    ip.user_ns["bot"] = Agent(model="demo", tools=[calculator])
    ip.run_cell_magic("chat", "-a bot", "What is 6 * 7?")
    out = capsys.readouterr().out
    assert "🔧 calculator" in out and "42" in out


def test_chat_magic_errors_are_clear(ip):
    from nbagent import NbagentError

    with pytest.raises(NbagentError, match="no agent named"):
        ip.run_cell_magic("chat", "-a missing", "hi")
    with pytest.raises(NbagentError, match="unknown option"):
        ip.run_cell_magic("chat", "--bogus", "hi")
