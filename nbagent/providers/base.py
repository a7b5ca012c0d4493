"""The provider protocol: a normalized request in, normalized events out.

A provider knows one wire format and nothing about turns. ``stream(request)``
is an async iterator of the events below. It ends with exactly one
``Finish`` event carrying the assembled assistant ``Message`` (with every
provider detail needed to replay it), or raises ``NbagentError``. Deltas are
for display; the final message is what goes into the ChatSession.

A refusal streams as ``RefusalDelta`` and stays in the final message as a
``TextPart`` whose ``provider_details`` has ``REFUSAL: True`` (each provider
replays it in its own refusal slot, or as text where it has none). A tool
call cut by the token limit is not in the message: ``Finish.cut_tool_calls``
records it. ``Finish.prompt_blocked`` says the provider refused the prompt
itself; its message is empty and is not added to the history. The loop puts
that notice in the turn's FINISH step ``refusal`` (``ChatResponse.refusal``);
``ChatResponse.text`` stays empty.
"""

from __future__ import annotations

import json

import abc
from dataclasses import dataclass, field
from typing import Any
from collections.abc import AsyncIterator, Sequence

from ..core.messages import Message, TextPart
from ..core.steps import CutToolCall, FinishReason, ToolCall, UsageMetadata

UNPARSED_ARGUMENTS = "_raw"
"""The one argument a tool call gets when its arguments are not a JSON object: the text received,
so the call still reaches the tool, whose validation tells the model what was wrong."""


def parse_tool_arguments(text: str, empty: dict | None = None) -> dict:
    """A tool call's streamed arguments text -> its arguments: ``empty`` (default ``{}``) when
    blank, ``{UNPARSED_ARGUMENTS: text}`` when not a JSON object."""
    if not text.strip():
        return dict(empty) if empty else {}
    try:
        value = json.loads(text)
    except ValueError:
        return {UNPARSED_ARGUMENTS: text}
    return value if isinstance(value, dict) else {UNPARSED_ARGUMENTS: text}


REFUSAL = "refusal"  # provider_details key marking a TextPart that holds a refusal


@dataclass
class ToolSpec:
    name: str
    description: str
    input_schema: dict


@dataclass
class ModelRequest:
    model: str
    messages: Sequence[Message]  # a ChatSession's: a read-only snapshot (core/growing_list.py)
    system: str | None = None
    tools: list[ToolSpec] = field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None
    cache_strategy: str = "auto"  # "auto" | "none"
    response_format: dict | None = None  # a JSON schema, see structured output
    session_id: str = ""  # stable per conversation (OpenAI prompt_cache_key)
    include_reasoning: bool = True
    extra: dict = field(default_factory=dict)  # provider-specific body fields


# --- events -----------------------------------------------------------------


@dataclass(slots=True)  # one per streamed delta: slots make it cheaper
class TextDelta:
    text: str


@dataclass(slots=True)
class ThinkingDelta:
    text: str


@dataclass(slots=True)
class RefusalDelta:
    text: str  # the model declining, shown apart from the answer


@dataclass
class ToolCallStart:
    key: Any  # the provider's own part key (OpenAI index, Anthropic block index, ...)
    id: str
    name: str


@dataclass(slots=True)
class ToolCallDelta:
    key: Any
    args_delta: str


@dataclass
class ToolCallEnd:
    key: Any
    call: ToolCall  # complete, args parsed ({} when empty)


@dataclass
class Usage:
    usage: UsageMetadata  # cumulative for this model call: last one wins
    raw: dict = field(default_factory=dict)  # the provider's own usage object


@dataclass
class Finish:
    reason: FinishReason
    raw_reason: str | None = None
    message: Message = field(default_factory=lambda: Message("assistant", []))
    structured_output: Any = None
    model: str = ""  # the model the server says answered
    cut_tool_calls: list[CutToolCall] = field(default_factory=list)  # cut by the token limit
    prompt_blocked: str = ""  # why the provider refused the prompt itself (nothing to replay)

    @property
    def history(self) -> list[Message]:
        """What this call adds to the ChatSession: nothing for a blocked prompt; an empty answer gets a placeholder."""
        if self.prompt_blocked:
            return []
        if any(not isinstance(p, TextPart) or p.text for p in self.message.parts):
            return [Message("assistant", list(self.message.parts))]
        return [Message("assistant", [TextPart("[empty response]")])]


@dataclass
class Retrying:
    """The call failed before any output and the provider asks again after ``wait_s`` seconds.

    Sent by ``stream_batches`` only (``HTTPProvider.stream``, the flat view, leaves it out):
    the loop shows ``notice`` on the model step while it waits.
    """

    attempt: int  # the attempt about to start: 2 is the first retry
    attempts: int  # at most this many in all
    reason: str  # what failed, one line
    wait_s: float  # the pause before the next attempt
    host: str = ""  # the server asked

    @property
    def notice(self) -> str:
        """One line for the user, e.g. "no reply from api.openai.com within 60 s — retrying in 1 s, 2 of 3"."""
        return f"{self.reason} — retrying in {self.wait_s:.2g} s, {self.attempt} of {self.attempts}"


@dataclass
class Waiting:
    """The request is sent and no reply has come yet: ``waited_s`` of ``limit_s`` (``first_byte_timeout``).

    Sent by ``stream_batches`` only, after ``HTTPProvider.waiting_notice_after`` seconds, then every
    ``waiting_notice_every``: the loop shows ``notice`` on the model step until the reply starts.
    """

    waited_s: float
    limit_s: float
    host: str = ""

    PREFIX = "waiting for the first byte"

    @property
    def notice(self) -> str:
        """One line for the user, e.g. "waiting for the first byte from api.openai.com (12 s of 30 s)"."""
        return f"{self.PREFIX} from {self.host or 'the server'} ({self.waited_s:.0f} s of {self.limit_s:g} s)"


NOTICES = (Retrying, Waiting)  # events about the call itself, not part of the answer

Event = (TextDelta | ThinkingDelta | RefusalDelta | ToolCallStart | ToolCallDelta | ToolCallEnd | Usage
         | Finish | Retrying | Waiting)


class Provider(abc.ABC):
    """One wire format. Subclasses set ``name`` and implement ``stream``.

    ``context_window``: the model's context size in tokens when the provider
    knows it (a class value, a constructor argument, the local server's
    ``n_ctx``); ``None`` when unknown (the usage table then asks the price
    catalog, and compaction assumes 128k).
    """

    name: str = "provider"
    model: str = ""
    context_window: int | None = None

    @abc.abstractmethod
    def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        """Run one model call and yield its events."""

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[Event]]:
        """The events of one call grouped as they arrived: one list per network read.

        The agent loop folds each batch into one step update (a UI needs no finer grain than a
        network read). This default wraps ``stream``: one event a batch.
        """
        async for event in self.stream(request):
            yield [event]

    async def aclose(self) -> None:  # noqa: B027 - optional: a provider without connections has nothing to do
        """Release connections; the provider may be used again afterwards."""

    def __repr__(self) -> str:  # never shows keys
        return f"{type(self).__name__}(model={self.model!r})"
