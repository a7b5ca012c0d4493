"""An agent's settings, one frozen value: what ``Agent`` builds its model connection from, and what a
saved conversation resumes with (``Agent.load``).

``AgentSettings`` holds the model string, the provider's key, host and options, the system prompt,
sampling settings, the tool policy when it is a name, the budget and price overrides, the names of
the tools, who chatted, and the course policy (its file and content hash) and rules it ran under.
Callables (hooks, a policy function, the tools themselves) are not settings: ``Agent`` and
``Agent.load`` take them as arguments.
The key never leaves the value: ``repr`` and ``to_dict`` (what session files hold, version 3) show
``savable()``: no ``api_key``, provider options only when they are plain JSON values whose names do
not look like secrets, a ``base_url`` without user:password and query string.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

from .errors import ConfigError

POLICY_NAMES = ("allow_all", "ask", "deny_all")
_SECRET_NAME = re.compile(r"key|token|secret|password|passwd|auth|cookie|credential|header", re.IGNORECASE)
_PLAIN = (str, int, float, bool, type(None))


@dataclass(frozen=True, repr=False)
class AgentSettings:
    """An agent's model connection and saved settings (see the module docstring)."""

    model: str = ""
    system: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    provider_options: dict[str, Any] = field(default_factory=dict)
    base_url: str | None = None
    policy: str | None = None  # None: a callable policy, not saved
    auto_execute_tools: bool = True
    max_tool_iterations: int = 10
    cache_strategy: str = "auto"
    include_reasoning: bool = True
    response_format: dict | None = None
    compaction_budget: int | None = None
    tool_timeout: float | None = 300.0
    budget_usd: float | None = None
    pricing: dict | None = None
    tools: list[str] = field(default_factory=list)
    notebook: bool = False
    user: str = ""
    policy_file: str | None = None  # the course policy (nbagent.toml) it ran under, absolute
    policy_hash: str | None = None  # "sha256:<hex>" of that file's content then
    rules: str | None = None  # the rules added to the system prompt: a preset name or a file's path
    api_key: str | None = field(default=None, compare=False)  # never in repr, to_dict or a file

    def savable(self) -> AgentSettings:
        """This value without anything secret: no key, secret-looking provider options and the
        user:password and query string of ``base_url`` dropped."""
        return replace(self, api_key=None, provider_options=savable_options(self.provider_options),
                       base_url=savable_url(self.base_url))

    def to_dict(self) -> dict:
        """The settings as a saved file holds them: JSON values, never ``api_key`` or a secret option."""
        out = asdict(self.savable())
        del out["api_key"]
        return out

    def __repr__(self) -> str:
        shown = self.savable()
        values = ", ".join(f"{f.name}={getattr(shown, f.name)!r}" for f in fields(self) if f.name != "api_key")
        return f"AgentSettings({values}{', api_key=<hidden>' if self.api_key else ''})"

    @classmethod
    def from_dict(cls, d: Any) -> AgentSettings:
        """The inverse of ``to_dict``; unknown keys are ignored, wrong types raise TypeError / ValueError."""
        if not isinstance(d, Mapping):
            raise TypeError(f"agent settings must be an object, got {type(d).__name__}")
        known = {f.name: f for f in fields(cls) if f.name != "api_key"}  # a file never gives a key
        values = {k: v for k, v in d.items() if k in known}
        out = cls(**values)
        out._check()
        return out

    def checked_arguments(self) -> AgentSettings:
        """This value with numpy-style numbers as Python's (``np.int64(100)`` is ``100``), or
        ``ConfigError`` naming the first argument of the wrong type (``Agent(budget_usd="5")``)."""
        plain: dict[str, Any] = {}
        for name in ("temperature", "tool_timeout", "budget_usd", "max_tokens", "compaction_budget",
                     "max_tool_iterations"):
            value = getattr(self, name)
            if isinstance(value, numbers.Integral) and not isinstance(value, (bool, int)):
                plain[name] = int(value)
            elif isinstance(value, numbers.Real) and not isinstance(value, (bool, int, float)):
                plain[name] = float(value)
        out = replace(self, **plain) if plain else self
        try:
            out._check()
        except TypeError as exc:
            raise ConfigError(f"Agent(...): {exc}") from None
        return out

    def _check(self) -> None:
        _want(self.model, str, "model")
        _want(self.user, str, "user")
        _want(self.cache_strategy, str, "cache_strategy")
        for name in ("system", "base_url", "policy", "policy_file", "policy_hash", "rules"):
            _want(getattr(self, name), (str, type(None)), name)
        for name in ("temperature", "tool_timeout", "budget_usd"):
            _want_number(getattr(self, name), name)
        for name in ("max_tokens", "compaction_budget"):
            _want(getattr(self, name), (int, type(None)), name)
        _want(self.max_tool_iterations, int, "max_tool_iterations")
        for name in ("auto_execute_tools", "include_reasoning", "notebook"):
            _want(getattr(self, name), bool, name)
        _want(self.provider_options, dict, "provider_options")
        for name in ("response_format", "pricing"):
            _want(getattr(self, name), (dict, type(None)), name)
        if not isinstance(self.tools, list) or not all(isinstance(t, str) for t in self.tools):
            raise TypeError("settings field 'tools' must be a list of names")


def _want(value: Any, kind: Any, name: str) -> None:
    if isinstance(value, bool) and kind in (int, (int, type(None))):
        raise TypeError(f"{name} must be an integer, not a bool")
    if not isinstance(value, kind):
        raise TypeError(f"{name} has the wrong type ({type(value).__name__}: {value!r:.40})")


def _want_number(value: Any, name: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise TypeError(f"{name} must be a number, not {value!r:.40}")


def savable_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Provider options that may go into a file: plain JSON values under names that are not secrets."""
    return {k: v for k, v in options.items()
            if isinstance(k, str) and isinstance(v, _PLAIN) and not _SECRET_NAME.search(k)
            and not (isinstance(v, float) and not math.isfinite(v))}


def savable_url(url: str | None) -> str | None:
    """``url`` without user:password and query string (where keys sometimes ride)."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def savable_policy(policy: Any) -> str | None:
    """The policy's name when it is one of ``POLICY_NAMES``; None for a callable."""
    return policy if isinstance(policy, str) and policy in POLICY_NAMES else None
