"""``WireSpec``: what nbagent knows about one wire format, declared once in its package.

Each wire package (``openai_chat``, ``openai_responses``, ``anthropic``, ``gemini``) exports one
``SPEC``. The registry takes its prefixes, factory and default model from it; the redactor and
``python -m nbagent doctor`` its key variables; pricing its genai-prices provider id; model-string
resolution its model-name prefixes (``Agent(model="claude-…")``); OTel spans its GenAI provider name.
``token_names`` says where the wire's usage object carries each ``UsageMetadata`` count
(``core/usage.py``'s ``TOKEN_COUNTS`` names the counts): the wire's stream parser reads its usage
objects with :meth:`WireSpec.read_usage`, and a test checks it on recorded bodies.

A token name is a sum of dotted paths into the usage object: ``"a + b.c - d"``; ``"a|b"`` takes
``a`` when present, else ``b``; an empty name means the wire never reports that count (0).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import ConfigError
from ..core.usage import UsageMetadata

__all__ = ["WireSpec", "carried_count"]

_FIELDS = tuple(f.name for f in dataclasses.fields(UsageMetadata))


@dataclass(frozen=True)
class WireSpec:
    """One wire format's facts (see the module docstring for who reads each)."""

    package: str  # the package under nbagent/providers/ ("openai_chat")
    prefixes: tuple[str, ...]  # model-string prefixes; the first is the provider's name, the others aliases
    factory: str  # "module:attribute" of the Provider class, imported on first use
    default_model: str  # what "prefix:" alone means
    key_variables: tuple[str, ...]  # environment variables holding the API key, read in this order
    pricing_id: str  # genai-prices' provider id
    token_names: Mapping[str, str]  # UsageMetadata field -> where the wire's usage object carries it
    usage_paths: tuple[str, ...]  # where a stream event carries its usage object (dotted paths)
    model_prefixes: tuple[str, ...] = ()  # a bare model name starting with one of these is this wire's
    otel_name: str = ""  # OTel GenAI's gen_ai.provider.name, a well-known value ("": the provider's name)

    def __post_init__(self) -> None:
        if not self.prefixes or any(not p or ":" in p or p != p.lower() for p in self.prefixes):
            raise ConfigError(f"wire {self.package!r}: prefixes must be lower-case words without ':', "
                              f"not {self.prefixes!r}")
        if set(self.token_names) != set(_FIELDS):
            raise ConfigError(f"wire {self.package!r}: token_names must name exactly the UsageMetadata fields "
                              f"{sorted(_FIELDS)}, not {sorted(self.token_names)}")

    @property
    def name(self) -> str:
        """The provider's name (its first prefix)."""
        return self.prefixes[0]

    @property
    def aliases(self) -> tuple[str, ...]:
        return self.prefixes[1:]

    def api_key_from_environment(self) -> str | None:
        """The first key variable that is set (stripped), or None."""
        for name in self.key_variables:
            value = os.environ.get(name, "")
            if value.strip():
                return value  # clean_api_key strips and checks it
        return None

    def claims(self, model: str) -> bool:
        """Whether the bare model name ``model`` (no ``prefix:``) belongs to this wire."""
        return bool(self.model_prefixes) and model.strip().lower().startswith(self.model_prefixes)

    def declared_usage(self, raw: Mapping[str, Any]) -> UsageMetadata:
        """The counts a usage object ``raw`` carries, read by ``token_names`` as they are (a
        damaged object can give a negative one: :meth:`read_usage` repairs it)."""
        return UsageMetadata(**{name: carried_count(self.token_names[name], raw) for name in _FIELDS})

    def read_usage(self, raw: Mapping[str, Any]) -> UsageMetadata:
        """The ``UsageMetadata`` of a usage object ``raw``: :meth:`declared_usage`, with more reasoning
        than output (OpenRouter reports it) capped at the output, so that candidates + thoughts stays the
        output count, and a total the wire does not give as input + output."""
        usage = self.declared_usage(raw)
        if usage.candidates_token_count < 0:
            usage = dataclasses.replace(usage, candidates_token_count=0,
                                        thoughts_token_count=max(0, usage.generated_token_count))
        if not usage.total_token_count:
            usage = dataclasses.replace(usage, total_token_count=usage.prompt_token_count
                                        + usage.generated_token_count)
        return usage


def carried_count(expression: str, raw: Mapping[str, Any]) -> int:
    """The value of a token name (``"a + b.c - d"``, ``"a|b"``; empty: 0) in the usage object ``raw``."""
    total, sign = 0, 1
    for word in expression.split():
        if word in ("+", "-"):
            sign = 1 if word == "+" else -1
            continue
        value = None
        for path in word.split("|"):
            value = _at(raw, path)
            if value is not None:
                break
        total += sign * _int(value)
    return total


def _at(raw: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(raw, Mapping):
            return None
        raw = raw.get(part)
    return raw


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
