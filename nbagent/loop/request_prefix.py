"""What changed in a model request's prefix since the connection's previous request.

Prompt caches reuse the longest unchanged prefix of a request (tools, system
prompt, then messages), so a change there makes the next call pay full input
price. :class:`PrefixTracker` compares each request with the previous one and
names the first change it finds, in this order: ``MODEL`` (caches are per
model), ``COMPACTION`` (a compaction ran since), ``SYSTEM``, ``TOOLS``, then
``HISTORY`` (the previous request's messages plus the reply it got are no
longer a prefix of this request's messages: edited, cleared or trimmed).

Messages are compared part by part, each part fingerprinted once and cached
by identity (re-fingerprinted when its text length changes), so a request
costs a pass over part ids, not a re-serialisation of the history.
"""

from __future__ import annotations

import json
from typing import Any
from collections.abc import Sequence

from ..core.messages import Message
from ..core.steps import PrefixChange


def _size(part: Any) -> int:
    return len(getattr(part, "text", None) or getattr(part, "content", None) or getattr(part, "data", None) or "")


class PrefixTracker:
    def __init__(self) -> None:
        self._model: str | None = None
        self._system: str | None = None
        self._tools: str | None = None
        self._parts: list[int] | None = None  # fingerprints of the previous request's parts (+ its reply)
        self._compacted = False
        self._cache: dict[int, tuple[Any, int, int]] = {}  # id(part) -> (part, size, fingerprint)

    def compacted(self) -> None:
        """A compaction rewrote the history: the next request reports ``COMPACTION``."""
        self._compacted = True

    def observe(self, model: str, system: str | None, tools: Sequence[Any],
                messages: Sequence[Message]) -> PrefixChange | None:
        """The change since the previous request (None: intact, or the first request)."""
        tools_key = json.dumps([(t.name, t.description, t.input_schema) for t in tools], sort_keys=True, default=str)
        parts = self.fingerprints(messages)
        previous = self._parts
        if previous is None:
            change = None
        elif model != self._model:
            change = PrefixChange.MODEL
        elif self._compacted:
            change = PrefixChange.COMPACTION
        elif system != self._system:
            change = PrefixChange.SYSTEM
        elif tools_key != self._tools:
            change = PrefixChange.TOOLS
        elif parts[:len(previous)] != previous:
            change = PrefixChange.HISTORY
        else:
            change = None
        self._model, self._system, self._tools, self._parts = model, system, tools_key, parts
        self._compacted = False
        return change

    def replied(self, messages: Sequence[Message]) -> None:
        """The call's reply is in the history: the next request should start with it too."""
        if self._parts is not None:
            self._parts = self.fingerprints(messages)

    def fingerprints(self, messages: Sequence[Message]) -> list[int]:
        out = []
        cache = self._cache
        for message in messages:
            for part in message.parts:
                size = _size(part)
                hit = cache.get(id(part))
                if hit is None or hit[0] is not part or hit[1] != size:
                    hit = cache[id(part)] = (part, size, hash((message.role, repr(part))))
                out.append(hit[2])
        if len(cache) > 2 * len(out) + 64:  # forget parts that left the history
            live = {id(p) for m in messages for p in m.parts}
            for key in [k for k in cache if k not in live]:
                del cache[key]
        return out
