"""Replay recorded SSE fixtures through any HTTP provider (shared test helper).

Fixtures live in ``tests/fixtures`` inside the repository (see its README.md
and NOTICE.md); a missing fixture is an error, never a skip. A replay serves
the recorded body through ``httpx.MockTransport``, split into chunks
(``"whole"``, ``"1"`` / ``"7"`` bytes, or seeded ``"random"`` sizes), and
collects what the provider yielded::

    fx = load_fixture("openai", "text-basic-include-usage")
    result = await replay(provider, request, fx.body, split="1")
    assert result.text == fx.expected["text"]
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from nbagent.core.errors import NbagentError
from nbagent.providers.base import (
    Finish,
    ModelRequest,
    Provider,
    RefusalDelta,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
)

SPLITS = ("whole", "random", "1", "7")


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture_names(provider: str) -> list[str]:
    """Names (without extension) of every ``.sse`` fixture of one provider directory.

    Raises when the directory is missing or holds no fixture, so a test parametrized
    over it fails instead of collecting nothing.
    """
    names = sorted(p.stem for p in (FIXTURES / provider).glob("*.sse"))
    if not names:
        raise FileNotFoundError(f"no recorded fixtures in {FIXTURES / provider}")
    return names


@dataclass
class Fixture:
    provider: str
    name: str
    body: bytes
    header: dict

    @property
    def expected(self) -> dict:
        return self.header.get("expected", {})

    @property
    def request(self) -> dict | None:
        return self.header.get("request")


def load_fixture(provider: str, name: str) -> Fixture:
    """Load ``<provider>/<name>.sse`` (bytes) and its ``.json`` header."""
    base = FIXTURES / provider / name
    body = base.with_suffix(".sse").read_bytes()
    header = json.loads(base.with_suffix(".json").read_text(encoding="utf-8"))
    return Fixture(provider, name, body, header)


def split_body(body: bytes, split: str = "whole", seed: int = 0) -> list[bytes]:
    """Cut ``body`` into network-read-sized pieces: whole, N bytes, or seeded random sizes."""
    if split == "whole" or not body:
        return [body]
    if split == "random":
        rng = random.Random(seed)
        chunks, pos = [], 0
        while pos < len(body):
            size = rng.choice((1, 2, 3, rng.randint(1, 40), rng.randint(1, 400)))
            chunks.append(body[pos : pos + size])
            pos += size
        return chunks
    size = int(split)
    return [body[i : i + size] for i in range(0, len(body), size)]


class _ChunkStream(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self):
        for chunk in self.chunks:
            yield chunk


@dataclass
class Replay:
    """Everything a provider yielded for one replayed body."""

    events: list = field(default_factory=list)
    error: NbagentError | None = None
    requests: list[dict] = field(default_factory=list)  # {"url", "headers", "json"}

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def refusal(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, RefusalDelta))

    @property
    def thinking(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ThinkingDelta))

    @property
    def starts(self) -> list[ToolCallStart]:
        return [e for e in self.events if isinstance(e, ToolCallStart)]

    @property
    def arg_deltas(self) -> dict[Any, str]:
        out: dict[Any, str] = {}
        for e in self.events:
            if isinstance(e, ToolCallDelta):
                out[e.key] = out.get(e.key, "") + e.args_delta
        return out

    @property
    def tool_calls(self) -> list:
        return [e.call for e in self.events if isinstance(e, ToolCallEnd)]

    @property
    def usage(self) -> Usage | None:
        usages = [e for e in self.events if isinstance(e, Usage)]
        return usages[-1] if usages else None

    @property
    def finish(self) -> Finish | None:
        finishes = [e for e in self.events if isinstance(e, Finish)]
        return finishes[-1] if finishes else None


def mock_client(
    chunks: list[bytes],
    *,
    status: int = 200,
    headers: dict | None = None,
    requests: list | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose every POST answers with ``chunks``."""

    def handler(request: httpx.Request) -> httpx.Response:
        if requests is not None:
            body = request.content.decode("utf-8") if request.content else ""
            requests.append(
                {
                    "url": str(request.url),
                    "headers": dict(request.headers),
                    "json": json.loads(body) if body else None,
                }
            )
        hdrs = {"content-type": "text/event-stream", **(headers or {})}
        return httpx.Response(status, headers=hdrs, stream=_ChunkStream(list(chunks)))

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def replay(
    provider: Provider,
    request: ModelRequest,
    body: bytes,
    *,
    split: str = "whole",
    seed: int = 0,
    status: int = 200,
    headers: dict | None = None,
) -> Replay:
    """Stream ``request`` through ``provider`` against a mock server replying ``body``.

    ``provider`` must be an HTTPProvider (its ``http_client`` is replaced by
    the mock client for the duration of the call). An ``NbagentError`` is
    caught and stored in ``Replay.error`` after the events yielded before it.
    """
    result = Replay()
    client = mock_client(
        split_body(body, split, seed), status=status, headers=headers, requests=result.requests
    )
    previous = provider.http_client
    provider.http_client = client
    try:
        async for event in provider.stream(request):
            result.events.append(event)
    except NbagentError as exc:
        result.error = exc
    finally:
        provider.http_client = previous
        await client.aclose()
    return result


def load_error_fixture(name: str) -> dict:
    """``errors/<name>.json``: ``http_status``, ``response_headers`` and the JSON ``body``."""
    return json.loads((FIXTURES / "errors" / f"{name}.json").read_text(encoding="utf-8"))
