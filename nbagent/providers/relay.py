"""The "model" of an outside agent's conversation: it asks for exactly the tool call the agent made.

``nbagent.serve`` runs each MCP ``tools/call`` from an outside client (Claude Code, Codex, ...) as one
turn of a conversation of its own, so the call takes the path nbagent's own agent's calls take:
approval card, stale check, undo, provenance, autosave, DataFrames. ``RelayProvider`` is that
conversation's provider: ``queue(call)`` before the turn; the turn's first model call answers with
that tool call, the next one (after the tool ran) ends the turn without text. ``model`` is the
client's name and version, so the conversation's model column names the client. No network.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..core.messages import Message, TextPart, ToolUsePart
from ..core.steps import FinishReason, ToolCall
from .base import Event, Finish, ModelRequest, Provider, ToolCallEnd, ToolCallStart

RELAY = "mcp"  # the provider name: a served conversation's model string is "mcp:<client name version>"


class RelayProvider(Provider):
    """Answers the turn's prompt with the queued tool call, then ends the turn."""

    name = RELAY

    def __init__(self, client: str = "mcp-client") -> None:
        self.model = client
        self.pending: ToolCall | None = None

    def queue(self, call: ToolCall) -> None:
        """The call the next model call asks for."""
        self.pending = call

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        call, self.pending = self.pending, None
        if call is None:  # the tool ran: the turn ends (nothing for the outside agent to say here)
            yield Finish(FinishReason.STOP, message=Message("assistant", [TextPart("")]), model=self.model)
            return
        yield ToolCallStart(0, call.id, call.name)
        yield ToolCallEnd(0, call)
        yield Finish(FinishReason.TOOL_CALLS, message=Message("assistant", [ToolUsePart(call.id, call.name, call.args)]),
                     model=self.model)
