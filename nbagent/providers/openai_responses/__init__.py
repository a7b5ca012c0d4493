"""OpenAI Responses API (``POST /v1/responses``, streamed), also for compatible servers.

Only this API streams the reasoning summaries of OpenAI's reasoning models:
``model="openai-responses:gpt-5-mini"``; ``base_url`` points it at a
compatible server. Keys follow the Chat Completions provider
(``OPENAI_API_KEY`` is not sent to a loopback server).

Reasoning models (o-series, gpt-5 except gpt-5-chat; ``reasoning=True`` /
``False`` overrides the guess) get their encrypted reasoning back for replay
and, unless ``include_reasoning`` is off, a summary
(``reasoning_summary="detailed"`` or ``None`` changes that). Structured output
uses ``text.format`` (``json_schema``); caching sends the session id as
``prompt_cache_key`` to api.openai.com (not with ``cache_strategy="none"``).

One module a role, as in every wire package: ``provider``
(``OpenAIResponsesProvider``), ``request`` (``build_body``), ``stream``
(``OpenAIResponsesStreamParser``), ``finish`` (``FINISH_REASONS``, ``finish_reason``), ``spec``
(``SPEC``, the wire's facts, where its usage objects carry each token count among them).
"""

from .finish import FINISH_REASONS, finish_reason
from .provider import OpenAIResponsesProvider, is_reasoning_model
from .request import build_body, build_input, text_format
from .stream import ITEM_ID, OPENAI_ITEM, PHASE, OpenAIResponsesStreamParser
from .spec import SPEC

__all__ = ["SPEC", "FINISH_REASONS", "ITEM_ID", "OPENAI_ITEM", "PHASE", "OpenAIResponsesProvider",
           "OpenAIResponsesStreamParser", "build_body", "build_input", "finish_reason", "is_reasoning_model",
           "text_format"]
