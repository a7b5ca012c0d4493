"""A model history made safe for another model and its wire (``Agent.set_model``).

What one provider attached to a part for its own replay (Anthropic thinking signatures and
redacted thinking, Gemini thought signatures, OpenAI reasoning items and item ids) is never sent to
another model: thinking parts are dropped (they stay in the conversation's steps, shown to the
user), other parts keep their text, tool calls and results but lose those details. Only neutral
markers survive: a refusal, and a tool call id that a provider made up (``synthetic_id``).
"""

from __future__ import annotations

import dataclasses

from .chat_session import ChatSession
from .messages import Message, TextPart, ThinkingPart

NEUTRAL_DETAILS = frozenset({"refusal", "synthetic_id"})
EMPTY_ANSWER = "[empty response]"


def neutral_message(message: Message) -> Message:
    """``message`` without thinking parts nor provider-specific details."""
    parts = []
    for part in message.parts:
        if isinstance(part, ThinkingPart):
            continue
        details = {k: v for k, v in part.provider_details.items() if k in NEUTRAL_DETAILS}
        if isinstance(part, TextPart) and not part.text and not details:
            continue  # an opaque block of another provider (e.g. Anthropic server tool use)
        parts.append(dataclasses.replace(part, provider_details=details))
    if message.role == "assistant" and not parts:
        parts = [TextPart(EMPTY_ANSWER)]
    return Message(message.role, parts)


def neutral_history(session: ChatSession) -> None:
    """Rewrite ``session``'s messages in place with :func:`neutral_message`."""
    session.messages = [neutral_message(m) for m in session.messages]
