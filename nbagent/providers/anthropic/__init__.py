"""Anthropic Messages API (``POST /v1/messages``, streamed).

What is sent (thinking, caching, structured output through a forced tool) is
described in ``request``; how the stream becomes events (usage, cut tool
calls, server-side blocks kept whole so ``pause_turn`` and code execution keep
their context) in ``stream``.

One module a role, as in every wire package: ``provider``
(``AnthropicProvider``), ``request`` (``build_body``), ``stream``
(``AnthropicStreamParser``), ``finish`` (``FINISH_REASONS``, ``finish_reason``), ``spec``
(``SPEC``, the wire's facts, where its usage objects carry each token count among them).
"""

from .finish import FINISH_REASONS, finish_reason
from .provider import API_VERSION, AnthropicProvider
from .request import DEFAULT_MAX_TOKENS, build_body, build_messages
from .stream import STRUCTURED_TOOL, AnthropicStreamParser
from .spec import SPEC

__all__ = ["SPEC", "API_VERSION", "DEFAULT_MAX_TOKENS", "FINISH_REASONS", "STRUCTURED_TOOL", "AnthropicProvider",
           "AnthropicStreamParser", "build_body", "build_messages", "finish_reason"]
