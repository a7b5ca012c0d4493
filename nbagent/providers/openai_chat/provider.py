"""``OpenAIProvider``: Chat Completions over SSE, at api.openai.com or any compatible ``base_url``."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from ...core.errors import AuthError, NbagentError
from ..base import ModelRequest
from ..http import HTTPProvider, StreamParser
from .request import build_body
from .spec import SPEC
from .stream import OpenAIChatStreamParser

OPENAI_BASE_URL = "https://api.openai.com/v1"
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class OpenAIProvider(HTTPProvider):
    """Chat Completions over SSE; ``base_url`` points it at any compatible server.

    The key comes from ``api_key`` or ``OPENAI_API_KEY``. The environment key is
    sent to any ``base_url`` that is not loopback, and on purpose not to a loopback
    one (it is an OpenAI key, not the local server's): a 401 from a local server
    says so and asks for ``api_key=``. No ``Authorization`` header is sent without
    a key.
    """

    name = "openai"
    default_base_url = OPENAI_BASE_URL

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None, **kwargs):
        base = (base_url or OPENAI_BASE_URL).rstrip("/")
        self.loopback_without_key = api_key is None and _is_loopback(base)
        if api_key is None and not self.loopback_without_key:
            api_key = SPEC.api_key_from_environment()
        super().__init__(model, api_key=api_key, base_url=base, **kwargs)

    @property
    def is_openai(self) -> bool:
        """True when talking to api.openai.com itself."""
        return _host(self.base_url) == "api.openai.com"

    def request_headers(self) -> dict:
        """The headers of a streaming call; api.openai.com without a key is an ``auth`` error."""
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        elif self.is_openai:  # say so before trying, not "could not reach" three times later
            raise AuthError("no OpenAI API key: pass api_key= or set OPENAI_API_KEY", provider=self.name)
        return headers

    def build_http_request(self, request: ModelRequest) -> tuple[str, dict, dict]:
        body = build_body(request, request.model or self.model, for_openai=self.is_openai)
        return f"{self.base_url}/chat/completions", self.request_headers(), body

    def new_parser(self, request: ModelRequest) -> StreamParser:
        return OpenAIChatStreamParser(provider=self.name, structured=bool(request.response_format))

    def parse_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> NbagentError:
        """As the base class; a 401 from a loopback server we sent no key says why and what to pass."""
        error = super().parse_error(status, body, headers)
        if status == 401 and self.loopback_without_key and not self.api_key:
            return error.with_kind("auth", message=f"{error.message} -- {self.loopback_key_advice()}")
        return error

    def loopback_key_advice(self) -> str:
        """Why no key went to this loopback server, and how to give it one."""
        why = ("OPENAI_API_KEY is set, but nbagent keeps the environment's key back from loopback base_urls on "
               "purpose (it is meant for OpenAI, not a local server); " if SPEC.api_key_from_environment()
               else "no key was sent (api_key= not given; the environment's OPENAI_API_KEY is never sent to a "
                    "loopback base_url); ")
        return (f"the server at {self.base_url} wants an API key: {why}pass its key as api_key=, e.g. "
                f'Agent(model="openai:{self.model}", base_url="{self.base_url}", api_key="...") '
                "(the key a vLLM server was started with by --api-key)")


def _host(url: str) -> str:
    """The URL's host, lower case ("" when there is none): urllib's split, so that building a provider
    does not import httpx (issue #32; httpx comes with the first request)."""
    return urlsplit(url).hostname or ""


def _is_loopback(url: str) -> bool:
    try:
        return _host(url) in _LOOPBACK
    except Exception:  # noqa: BLE001
        return False
