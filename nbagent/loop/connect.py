"""Build a ModelConnection from an agent's settings: one typed value for what defines the connection
(:class:`~nbagent.core.session_settings.AgentSettings`), one for the callables it runs
(:class:`ToolWiring`: tools, the policy, hooks, MCP servers), which settings never hold."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from ..core.chat_session import CacheStrategy
from ..core.session_settings import AgentSettings
from ..providers.base import Provider
from .hooks import Policy
from .model_connection import ModelConnection


@dataclass(frozen=True)
class ToolWiring:
    """What a connection calls: the tools, the approval policy (a name or a function), the hooks and
    the tool sources (MCP servers, started at the first turn that needs them)."""

    tools: Any = ()
    policy: Policy = "allow_all"
    hooks: Any = None
    tool_sources: tuple = ()


def connect(provider: Provider, settings: AgentSettings, wiring: ToolWiring) -> ModelConnection:
    """A fresh ModelConnection to ``provider`` (built from ``settings``) with ``settings``' system
    prompt, sampling, tool loop and compaction settings and ``wiring``'s callables."""
    s = settings
    return ModelConnection(
        provider, system=s.system, tools=wiring.tools, auto_execute_tools=s.auto_execute_tools,
        policy=wiring.policy, max_tool_iterations=s.max_tool_iterations, hooks=wiring.hooks,
        temperature=s.temperature, max_tokens=s.max_tokens, cache_strategy=cast(CacheStrategy, s.cache_strategy),
        include_reasoning=s.include_reasoning, response_format=s.response_format,
        compaction_budget=s.compaction_budget, tool_timeout=s.tool_timeout, tool_sources=wiring.tool_sources)
