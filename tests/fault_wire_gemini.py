"""The Gemini wire format for the shared fault tests (see test_provider_faults)."""

from __future__ import annotations

import json

from fault_server import WireFormat
from nbagent.providers.gemini import GeminiProvider


def _gdata(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\r\n\r\n"


def _gemini_chunk(text: str, finish: str | None = None) -> bytes:
    candidate: dict = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 5, "candidatesTokenCount": 2, "totalTokenCount": 7}
    return _gdata({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-fault"})


def _gemini_prefix(pieces: list[str]) -> bytes:
    return b"".join(_gemini_chunk(p) for p in pieces)


def _gemini_text(pieces: list[str]) -> bytes:
    return _gemini_prefix(pieces) + _gemini_chunk("", "STOP")


def _gemini_tool_prefix() -> bytes:
    # Gemini sends a call whole; a cut after it (no finishReason) is still incomplete.
    part = {"functionCall": {"name": "weather", "args": {"city": "Paris"}}}
    return _gdata({"candidates": [{"content": {"parts": [part], "role": "model"}}]})


def _gemini_error(status: int, message: str) -> bytes:
    statuses = {401: "UNAUTHENTICATED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}
    return json.dumps({"error": {"code": status, "message": message,
                                 "status": statuses.get(status, "INVALID_ARGUMENT")}}, indent=2).encode()


GEMINI_WIRE = WireFormat(
    name="gemini",
    make_provider=lambda base_url, **kw: GeminiProvider("gemini-fault", base_url=base_url + "/v1beta", **kw),
    text_body=_gemini_text,
    text_prefix=_gemini_prefix,
    tool_args_prefix=_gemini_tool_prefix,
    garbage_body=lambda: _gemini_prefix(["ok"]) + b"data: <html>502 Bad Gateway</html>\r\n\r\n",
    error_body=_gemini_error,
)

WIRE = GEMINI_WIRE
