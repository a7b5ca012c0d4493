"""``OpenAIResponsesProvider``: the Responses API over SSE (keys as the Chat Completions provider's)."""

from __future__ import annotations

from typing import Any

from ..base import ModelRequest
from ..http import StreamParser
from ..openai_chat import OpenAIProvider
from .request import build_body
from .stream import OpenAIResponsesStreamParser


def is_reasoning_model(model: str) -> bool:
    """o1 / o3 / o4 ... and gpt-5 (not gpt-5-chat) reason; others do not (a guess by name)."""
    name = model.lower().rpartition("/")[2]
    if name.startswith("gpt-5"):
        return not name.startswith("gpt-5-chat")
    return (len(name) > 1 and name[0] == "o" and name[1].isdigit()) or name.startswith("codex")


class OpenAIResponsesProvider(OpenAIProvider):
    """The Responses API over SSE (see the package docstring for options)."""

    name = "openai-responses"

    def __init__(self, model: str = "gpt-5-mini", *, api_key: str | None = None, base_url: str | None = None,
                 reasoning: bool | None = None, reasoning_summary: str | None = "auto", **kwargs: Any):
        super().__init__(model, api_key=api_key, base_url=base_url, **kwargs)
        self.reasoning = reasoning
        self.reasoning_summary = reasoning_summary

    def build_http_request(self, request: ModelRequest) -> tuple[str, dict, dict]:
        model = request.model or self.model
        reasons = self.reasoning if self.reasoning is not None else is_reasoning_model(model)
        body = build_body(request, model, reasoning=reasons, reasoning_summary=self.reasoning_summary,
                          for_openai=self.is_openai)
        return f"{self.base_url}/responses", self.request_headers(), body

    def new_parser(self, request: ModelRequest) -> StreamParser:
        return OpenAIResponsesStreamParser(provider=self.name, structured=bool(request.response_format))
