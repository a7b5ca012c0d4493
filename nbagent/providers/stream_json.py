"""The JSON in SSE events' ``data``: decoded a network read at a time, or one event with a typed error.

``decode_payloads`` is the stream pipeline's step between the SSE decoder and a wire's parser: it
decodes the data of the events of one read straight through the ``json`` module's C scanner,
without ``json.loads``'s per-call overhead. Data that is not exactly one
JSON value (``[DONE]``, garbage, a value with whitespace around it) comes back as ``UNDECODED``;
the parser then calls ``parse_json``, which decodes it as ``json.loads`` does or raises the
``protocol`` error, so one bad event fails exactly as it would alone, after the events before it.
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Iterator
from typing import Any

from ..core.errors import NbagentError
from .sse import SSEEvent


class Undecoded:
    """The type of ``UNDECODED``: this event's data was not decoded in bulk."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNDECODED"


UNDECODED = Undecoded()

# the scanner json.loads runs (same settings), without its whitespace, BOM and trailing-data checks
_scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed types the context oddly


def decode_payloads(events: list[SSEEvent]) -> Iterator[Any]:
    """Each event's data as JSON (``UNDECODED`` where it is not exactly one JSON value), one at a time.

    Lazily: a value dies once its event is parsed. A read's values all alive at once (hundreds of
    dicts and lists) would be promoted through the garbage collector's generations and trigger
    full collections, which cost more than the decoding saves.
    """
    for event in events:
        data = event.data
        try:
            value, end = _scan(data, 0)
        except (StopIteration, ValueError):  # no value at 0 (blank, whitespace, BOM), or malformed
            yield UNDECODED
            continue
        yield value if end == len(data) else UNDECODED


def parse_json(data: str, provider: str | None = None) -> Any:
    """Decode one JSON payload from a stream; garbage is a ``protocol`` error."""
    try:
        return json.loads(data)
    except ValueError:
        snippet = data if len(data) <= 200 else data[:200] + "..."
        raise NbagentError(
            f"the server sent data that is not JSON: {snippet!r}", kind="protocol", provider=provider
        ) from None
