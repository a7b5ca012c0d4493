"""Google Gemini Developer API (``models/{model}:streamGenerateContent?alt=sse``).

What is sent and replayed (thought signatures, function results) is described
in ``request``; how the stream becomes events (joined text chunks, synthesized
call ids, mid-stream errors, blocked prompts) in ``stream``.

Caching: Gemini caches repeated prompt prefixes implicitly (2.5 and later);
there is nothing to send, and the hits show up as
``cached_content_token_count``. ``cache_strategy`` is therefore ignored.

One module a role, as in every wire package: ``provider`` (``GeminiProvider``),
``request`` (``build_body``), ``stream`` (``GeminiStreamParser``),
``finish`` (``FINISH_REASONS``, ``finish_reason``), ``spec``
(``SPEC``, the wire's facts, where its usage objects carry each token count among them).
"""

from .finish import FINISH_REASONS, finish_reason
from .provider import GeminiProvider, retry_delay_from_body
from .request import PLACEHOLDER_SIGNATURE, build_body, build_contents
from .stream import GeminiStreamParser
from .spec import SPEC

__all__ = ["SPEC", "FINISH_REASONS", "PLACEHOLDER_SIGNATURE", "GeminiProvider", "GeminiStreamParser", "build_body",
           "build_contents", "finish_reason", "retry_delay_from_body"]
