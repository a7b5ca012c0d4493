"""The JSON in SSE events' ``data``: decoded as a wire's parser takes the events, or one with a typed error.

``decode_payloads`` is the stream pipeline's step between the SSE decoder and a wire's parser: it
decodes each event's data straight through the ``json`` module's C scanner, without
``json.loads``'s per-call overhead, one event at a time (a read's values all alive at once would
be promoted through the garbage collector's generations and trigger full collections). Data
that is not exactly one JSON value (``[DONE]``, garbage, a value with whitespace around it) comes
with ``UNDECODED``; the parser then calls ``parse_json``, which decodes it as ``json.loads`` does
or raises the ``protocol`` error, so one bad event fails exactly as it would alone, after the
events before it.
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Iterable, Iterator
from typing import Any

from ..core.errors import ProtocolError
from .sse import SSEEvent


class Undecoded:
    """The type of ``UNDECODED``: this event's data was not decoded in bulk."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNDECODED"


UNDECODED = Undecoded()

# the scanner json.loads runs (same settings), without its whitespace, BOM and trailing-data checks
_scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed types the context oddly


def decode_payloads(events: Iterable[SSEEvent]) -> Iterator[tuple[SSEEvent, Any]]:
    """Each event with its data as JSON (``UNDECODED`` where that is not exactly one JSON value), one at a
    time: a value dies once its event is parsed."""
    for event in events:
        data = event.data
        try:
            value, end = _scan(data, 0)
        except (StopIteration, ValueError):  # no value at 0 (blank, whitespace, BOM), or malformed
            yield event, UNDECODED
            continue
        yield event, (value if end == len(data) else UNDECODED)


def parse_json(data: str, provider: str | None = None) -> Any:
    """Decode one JSON payload from a stream; garbage is a ``protocol`` error."""
    try:
        return json.loads(data)
    except ValueError:
        snippet = data if len(data) <= 200 else data[:200] + "..."
        raise ProtocolError(
            f"the server sent data that is not JSON: {snippet!r}", provider=provider
        ) from None
