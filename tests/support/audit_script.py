"""Scripted conversations for the audit tests (approvals, token attribution, compare).

``audit_conversation()`` runs, through the real agent loop and a ScriptedProvider, four turns
with thinking, cached tokens, every kind of tool decision and an error turn:

- turn 0: thinking; ``read_file`` (allowed by the policy ``only_reads``, a big result) and
  ``write_file`` (refused by it); cached tokens;
- turn 1: ``delete_file`` (requires approval) denied by the user with a reason;
- turn 2: ``delete_file`` approved by the user, ``shell`` blocked by the hook ``no_shell``;
- turn 3: the provider fails (a server error).

``manual_conversation()`` and ``auto_conversation()`` add the manual-result and allow_all cases.
"""

from __future__ import annotations

import asyncio

from nbagent import Agent, NbagentError, StepStatus, StepTarget, StepType, tool
from nbagent.core.steps import FinishReason, ToolCall, UsageMetadata
from nbagent.loop.hooks import Block
from nbagent.providers.base import Finish, TextDelta, ThinkingDelta, ToolCallEnd, ToolCallStart, Usage

from support.scripted import ScriptedProvider
from support.waiting import until

BIG = "line of a large file\n" * 200  # 4,200 characters


def usage(prompt: int, out: int, cached: int = 0, thoughts: int = 0) -> Usage:
    return Usage(UsageMetadata(prompt, out, prompt + out + thoughts, cached, thoughts))


def calls(*items: tuple[str, str, dict], use: Usage, thinking: str = "") -> list:
    evs: list = [ThinkingDelta(thinking)] if thinking else []
    for i, (cid, name, args) in enumerate(items):
        evs += [ToolCallStart(i, cid, name), ToolCallEnd(i, ToolCall(cid, name, args))]
    return evs + [use, Finish(FinishReason.TOOL_CALLS, "tool_calls")]


def answer(text: str, use: Usage, thinking: str = "") -> list:
    evs: list = [ThinkingDelta(thinking)] if thinking else []
    return evs + [TextDelta(text), use, Finish(FinishReason.STOP, "stop")]


@tool
def read_file(path: str) -> str:
    """Reads a file."""
    return BIG


@tool
def write_file(path: str, text: str) -> str:
    """Writes a file."""
    raise AssertionError("the policy refuses writes")


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Deletes a file."""
    return f"deleted {path}"


@tool
def shell(command: str) -> str:
    """Runs a shell command."""
    raise AssertionError("the hook blocks the shell")


def only_reads(call) -> bool:
    return call.name != "write_file"


def no_shell(call):
    return Block("no shell here") if call.name == "shell" else None


def audit_script() -> list[list]:
    return [
        calls(("r1", "read_file", {"path": "big.txt"}), ("w1", "write_file", {"path": "x", "text": "y"}),
              use=usage(120, 30, cached=100, thoughts=40), thinking="I should read the file first."),
        answer("The file has 200 lines.", usage(1200, 10, cached=100, thoughts=15), thinking="Count lines."),
        calls(("d1", "delete_file", {"path": "/etc/passwd"}), use=usage(1300, 20, cached=1200)),
        answer("I did not delete it.", usage(1350, 8, cached=1200)),
        calls(("d2", "delete_file", {"path": "tmp.txt"}), ("s1", "shell", {"command": "rm -rf /"}),
              use=usage(1400, 25, cached=1300)),
        answer("Deleted tmp.txt; the shell was blocked.", usage(1480, 12, cached=1300)),
        [NbagentError("server overloaded", kind="server", http_code=503)],
    ]


async def decide_when_waiting(conv, call_id: str, allow: bool, reason: str | None = None) -> None:
    """Approve or deny ``call_id`` once its step waits for a decision (support/waiting.py's deadline, not 5 s)."""
    await until(lambda: any(s.target == StepTarget.ENVIRONMENT and s.type == StepType.TOOL_CALL
                            and s.status == StepStatus.WAITING_FOR_USER and s.tool_calls[0].id == call_id
                            for s in conv.history), f"{call_id} waiting for a decision")
    await asyncio.sleep(0.02)  # a measurable wait
    conv.approve(call_id) if allow else conv.deny(call_id, reason)


async def audit_conversation():
    """The Agent after the four turns described in the module docstring."""
    provider = ScriptedProvider(audit_script())
    agent = Agent(model=provider, tools=[read_file, write_file, delete_file, shell], policy=only_reads,
                  hooks={"pre_tool_use": no_shell})
    conv = agent.conversation
    await conv.chat_to_completion("read big.txt and write x")
    decider = asyncio.ensure_future(decide_when_waiting(conv, "d1", False, "never touch /etc"))
    await conv.chat_to_completion("delete /etc/passwd")
    await decider
    decider = asyncio.ensure_future(decide_when_waiting(conv, "d2", True))
    await conv.chat_to_completion("delete tmp.txt and clean up with the shell")
    await decider
    try:
        await conv.chat_to_completion("one more")
    except NbagentError:
        pass
    return agent


async def manual_conversation():
    """One manual call (``auto_execute_tools=False``) answered by the caller."""
    provider = ScriptedProvider([calls(("m1", "read_file", {"path": "a"}), use=usage(50, 5)),
                                 answer("42", usage(80, 2))])
    agent = Agent(model=provider, tools=[read_file], auto_execute_tools=False)
    conv = agent.conversation
    await conv.chat_to_completion("look it up")
    conv.add_tool_result("m1", "forty-two")
    await conv.chat_to_completion("")
    return agent


async def auto_conversation():
    """One call run under the default policy (allow_all)."""
    provider = ScriptedProvider([calls(("a1", "read_file", {"path": "b"}), use=usage(50, 5)),
                                 answer("done", usage(1200, 2))])
    agent = Agent(model=provider, tools=[read_file])
    await agent.conversation.chat_to_completion("read b")
    return agent
