"""What changed in a model request's prefix since the connection's previous request.

Prompt caches reuse the longest unchanged prefix of a request (tools, system
prompt, then messages), so a change there makes the next call pay full input
price. :class:`PrefixTracker` compares each request with the previous one and
names the first change it finds, in this order: ``MODEL`` (caches are per
model), ``COMPACTION`` (a compaction ran since), ``SYSTEM``, ``TOOLS``, then
``HISTORY`` (the previous request's messages plus the reply it got are no
longer a prefix of this request's messages: edited, cleared or trimmed).

Messages are compared part by part, each part fingerprinted once: the fingerprints are kept per
message in a :class:`~nbagent.core.message_memo.MessageMemo`, so a request costs the messages added
since the previous one (and the newest user message's parts), not a pass over the whole history.
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any
from collections.abc import Sequence

from ..core.message_memo import MessageMemo
from ..core.messages import Message
from ..core.steps import PrefixChange


def part_fingerprints(message: Message) -> tuple[int, ...]:
    """One fingerprint per part of ``message`` (its role and the part's repr)."""
    return tuple(hash((message.role, repr(part))) for part in message.parts)


class PrefixTracker:
    def __init__(self) -> None:
        self._model: str | None = None
        self._system: str | None = None
        self._tools: str | None = None
        self._seen = False  # a request was observed: later ones are compared with it
        self._compacted = False
        self._parts: MessageMemo[tuple[int, ...]] = MessageMemo(part_fingerprints)  # previous request + reply

    def compacted(self) -> None:
        """A compaction rewrote the history: the next request reports ``COMPACTION``."""
        self._compacted = True

    def observe(self, model: str, system: str | None, tools: Sequence[Any],
                messages: Sequence[Message]) -> PrefixChange | None:
        """The change since the previous request (None: intact, or the first request)."""
        tools_key = json.dumps([(t.name, t.description, t.input_schema) for t in tools], sort_keys=True, default=str)
        history_kept = self._history_kept(messages)
        if not self._seen:
            change = None
        elif model != self._model:
            change = PrefixChange.MODEL
        elif self._compacted:
            change = PrefixChange.COMPACTION
        elif system != self._system:
            change = PrefixChange.SYSTEM
        elif tools_key != self._tools:
            change = PrefixChange.TOOLS
        elif not history_kept:
            change = PrefixChange.HISTORY
        else:
            change = None
        self._model, self._system, self._tools, self._seen = model, system, tools_key, True
        self._compacted = False
        return change

    def replied(self, messages: Sequence[Message]) -> None:
        """The call's reply is in the history: the next request should start with it too."""
        if self._seen:
            self._parts.update(messages)

    def _history_kept(self, messages: Sequence[Message]) -> bool:
        """Whether the previous request's parts (and its reply's) still open ``messages``."""
        kept, before = self._parts.update(messages)
        previous = list(chain.from_iterable(before))
        now = list(chain.from_iterable(self._parts.values[kept:]))
        return now[:len(previous)] == previous

