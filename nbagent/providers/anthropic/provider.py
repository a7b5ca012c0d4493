"""``AnthropicProvider``: Claude models over the Messages API, streamed."""

from __future__ import annotations

from typing import Any

from ...core.errors import AuthError
from ..base import ModelRequest
from ..http import HTTPProvider
from .request import build_body, structured_schema
from .spec import SPEC
from .stream import AnthropicStreamParser

API_VERSION = "2023-06-01"


class AnthropicProvider(HTTPProvider):
    """Claude models over the Messages API (key: argument or ``ANTHROPIC_API_KEY``)."""

    name = "anthropic"
    default_base_url = "https://api.anthropic.com"
    context_window = 200_000

    def __init__(self, model: str = "claude-sonnet-4-5", *, api_key: str | None = None, **kwargs: Any):
        super().__init__(model, api_key=api_key or SPEC.api_key_from_environment(), **kwargs)

    def build_http_request(self, request: ModelRequest) -> tuple[str, dict, dict]:
        if not self.api_key and self.base_url == self.default_base_url:
            raise AuthError(
                "no Anthropic API key: pass api_key= or set ANTHROPIC_API_KEY",
                provider=self.name,
            )
        headers = {
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        if self.api_key:
            headers["x-api-key"] = self.api_key
        return f"{self.base_url}/v1/messages", headers, build_body(request, request.model or self.model)

    def new_parser(self, request: ModelRequest) -> AnthropicStreamParser:
        spec = structured_schema(request)
        return AnthropicStreamParser(structured=spec is not None, unwrap=bool(spec and spec[1]))
