"""Hooks and approval policies for the agent loop.

Hooks are plain callables (sync or async):

- ``on_user_prompt(prompt) -> str | None | Block``: rewrite the prompt, keep it
  (``None``) or block the turn;
- ``pre_tool_use(call) -> dict | ToolCall | None | Block``: new arguments, keep
  them, or block the call (the model is told why);
- ``post_tool_use(call, result_text) -> str | None``: replace the result text.

An exception raised by a hook is reported (as the turn's error or the tool
step's error), never swallowed.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Literal, get_args
from collections.abc import Callable

from ..core.errors import ConfigError
from ..core.steps import ToolCall

PolicyName = Literal["allow_all", "ask", "deny_all"]
Policy = PolicyName | Callable[[ToolCall], bool]
"""Which tool calls run: all, each after approval, none, or those a function allows."""
POLICIES: tuple[str, ...] = get_args(PolicyName)


@dataclass
class Block:
    """Returned by a hook to stop a prompt or a tool call."""

    reason: str = "blocked by a hook"


@dataclass
class Hooks:
    on_user_prompt: Callable[[str], Any] | None = None
    pre_tool_use: Callable[[ToolCall], Any] | None = None
    post_tool_use: Callable[[ToolCall, str], Any] | None = None

    @classmethod
    def coerce(cls, hooks: Hooks | dict | None) -> Hooks:
        """``hooks=`` as ``Hooks``: None, a ``Hooks``, or a dict of ``on_user_prompt``, ``pre_tool_use``, ``post_tool_use``
        functions."""
        if hooks is None:
            return cls()
        if isinstance(hooks, Hooks):
            return hooks
        if isinstance(hooks, dict):
            unknown = set(hooks) - {"on_user_prompt", "pre_tool_use", "post_tool_use"}
            if unknown:
                raise ConfigError(f"unknown hook names: {sorted(unknown)}")
            return cls(**hooks)
        raise ConfigError("hooks must be a Hooks object or a dict of callables")


async def call_hook(fn: Callable, *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def check_policy(policy: Any) -> Any:
    if callable(policy) or policy in POLICIES:
        return policy
    raise ConfigError(
        f"policy must be one of {POLICIES} or a callable(ToolCall) -> bool, not {policy!r}",
    )
