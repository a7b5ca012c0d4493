"""``GeminiProvider``: the Gemini Developer API (``models/{model}:streamGenerateContent?alt=sse``).

The key travels in the ``x-goog-api-key`` header (argument, ``GEMINI_API_KEY``
or ``GOOGLE_API_KEY``), never in the URL, so it cannot leak into errors. A
429's ``google.rpc.RetryInfo`` sets the wait before the retry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ...core.errors import AuthError, NbagentError
from ..base import ModelRequest
from ..http import HTTPProvider
from .request import build_body
from .spec import SPEC
from .stream import GeminiStreamParser

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


class GeminiProvider(HTTPProvider):
    """Gemini models over the Developer API (key: argument, ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``)."""

    name = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    sse_raw_lines = True
    context_window = 1_048_576

    def __init__(self, model: str = "gemini-2.5-flash", *, api_key: str | None = None, **kwargs: Any):
        key = api_key or SPEC.api_key_from_environment()
        super().__init__(model, api_key=key, **kwargs)

    def build_http_request(self, request: ModelRequest) -> tuple[str, dict, dict]:
        if not self.api_key and self.base_url == self.default_base_url:
            raise AuthError(
                "no Gemini API key: pass api_key= or set GEMINI_API_KEY (or GOOGLE_API_KEY)",
                provider=self.name,
            )
        model = (request.model or self.model).removeprefix("models/")
        url = f"{self.base_url}/models/{model}:streamGenerateContent?alt=sse"
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if self.api_key:
            headers["x-goog-api-key"] = self.api_key
        return url, headers, build_body(request, model)

    def new_parser(self, request: ModelRequest) -> GeminiStreamParser:
        return GeminiStreamParser(structured=bool(request.response_format))

    def parse_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> NbagentError:
        error = super().parse_error(status, body, headers)
        delay = retry_delay_from_body(body)
        if delay is not None:
            error.retry_after = delay
        return error


def retry_delay_from_body(body: bytes) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` ``retryDelay`` ("13s"), if any."""
    try:
        payload = json.loads(body.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    if isinstance(payload, list) and payload:
        payload = payload[0]
    err = payload.get("error") if isinstance(payload, dict) else None
    details = err.get("details") if isinstance(err, dict) else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, dict) and "RetryInfo" in str(detail.get("@type", "")):
            match = _DURATION.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None
