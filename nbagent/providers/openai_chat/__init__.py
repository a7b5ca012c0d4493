"""OpenAI Chat Completions (streaming), also for OpenAI-compatible servers.

Works against api.openai.com and servers that copy its wire format (vLLM,
llama.cpp, Ollama, OpenRouter, Groq, DeepSeek, ...). A refusal is replayed in
the assistant message's own ``refusal`` field; thinking is never sent back as
text (OpenRouter's ``reasoning_details`` are, to servers other than OpenAI).

One module a role, as in every wire package: ``provider`` (``OpenAIProvider``),
``request`` (``build_body``), ``stream`` (``OpenAIChatStreamParser``),
``finish`` (``FINISH_REASONS``, ``finish_reason``), ``spec``
(``SPEC``, the wire's facts, where its usage objects carry each token count among them).
"""

from .finish import FINISH_REASONS, finish_reason
from .provider import OPENAI_BASE_URL, OpenAIProvider
from .request import build_body, build_messages
from .stream import OpenAIChatStreamParser
from .spec import SPEC

__all__ = ["SPEC", "FINISH_REASONS", "OPENAI_BASE_URL", "OpenAIChatStreamParser", "OpenAIProvider", "build_body",
           "build_messages", "finish_reason"]
