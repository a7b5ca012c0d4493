"""Token counting and history compression for ``ChatSession.compress``.

Compressors never separate a tool call from its result, keep the system
prompt and the latest user turn, and leave a history that starts with a user
message and alternates, as every provider requires.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
import weakref
from typing import Any, Protocol
from collections.abc import Iterable

from .distribution import install_hint
from .errors import ConfigError, NbagentError
from .message_memo import MessageMemo
from .messages import ImagePart, Message, TextPart, ThinkingPart, ToolResultPart, ToolUsePart

MESSAGE_OVERHEAD = 4  # role and framing tokens per message
IMAGE_TOKENS = 800


class ToolDescription(Protocol):
    """What a request carries of one tool (a provider's ``ToolSpec`` is one)."""

    name: str
    description: str
    input_schema: dict


def count_tools(tokenizer: Tokenizer, specs: Iterable[ToolDescription]) -> int:
    """Tokens the tool definitions add to a request: each tool's name, description and JSON schema."""
    return sum(tokenizer.count(json.dumps({"name": s.name, "description": s.description,
                                           "input_schema": s.input_schema})) for s in specs)


class Tokenizer(Protocol):
    def count(self, text: str) -> int: ...

    def count_session(self, session: Any) -> int:
        """Tokens of a ChatSession's system prompt and messages."""


class _SessionCounting:
    def count(self, text: str) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def count_message(self, message: Message) -> int:
        total = MESSAGE_OVERHEAD
        for part in message.parts:
            if isinstance(part, (TextPart, ThinkingPart)):
                total += self.count(part.text)
            elif isinstance(part, ToolUsePart):
                total += self.count(part.name) + self.count(json.dumps(part.args))
            elif isinstance(part, ToolResultPart):
                total += self.count(part.content)
            elif isinstance(part, ImagePart):
                total += IMAGE_TOKENS
        return total

    def count_session(self, session) -> int:
        """Tokens of the system prompt and every message; a message is counted once while it is
        unchanged (see :class:`~nbagent.core.message_memo.MessageMemo`), and a call costs the
        messages added since the previous one, not the whole history."""
        system = session.system
        if not system:
            return self._history_tokens(session)
        cached = self.__dict__.get("_system_count")
        if cached is None or cached[0] is not system:
            cached = self.__dict__["_system_count"] = (system, self.count(system))
        return cached[1] + self._history_tokens(session)

    def _history_tokens(self, session) -> int:
        with self.__dict__.setdefault("_lock", threading.RLock()):  # a widget may count while a turn runs
            running = self._running(session)
            if running is None:
                return sum(self.count_message(m) for m in session.messages)
            memo, totals = running
            kept, _ = memo.update(session.messages)
            del totals[kept:]
            total = totals[-1] if totals else 0
            for tokens in memo.values[kept:]:
                total += tokens
                totals.append(total)
            return total

    def _running(self, session) -> tuple[MessageMemo[int], list[int]] | None:
        """The per-message counts and running totals kept for ``session`` (the last few sessions)."""
        kept: dict[int, tuple] = self.__dict__.setdefault("_sessions", {})
        hit = kept.get(id(session))
        if hit is not None and hit[0]() is session:
            return hit[1]
        try:
            ref = weakref.ref(session)
        except TypeError:  # not a ChatSession: count it all
            return None
        for key in [k for k, (r, _) in kept.items() if r() is None]:  # sessions gone: free their messages
            del kept[key]
        if len(kept) >= 8:
            kept.pop(next(iter(kept)))
        running: tuple[MessageMemo[int], list[int]] = (MessageMemo(self.count_message), [])
        kept[id(session)] = (ref, running)
        return running


class ApproxTokenizer(_SessionCounting):
    """Fast estimate: about four characters a token (no dependencies)."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token) if text else 0


class TiktokenTokenizer(_SessionCounting):
    """Exact counts for OpenAI encodings through ``tiktoken`` (optional extra)."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        try:
            import tiktoken
        except ImportError:
            raise ConfigError(
                f"tiktoken is not installed: {install_hint('tokens')}"
            ) from None
        try:
            self._enc = tiktoken.get_encoding(encoding)
        except Exception as exc:  # offline machines cannot download encodings
            raise ConfigError(
                f"tiktoken could not load encoding {encoding!r}: {exc}"
            ) from None

    def count(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=())) if text else 0


# where o200k_base's and cl100k_base's pre-tokenizers always split: before a space that follows a
# non-space (no piece holds one), after a newline before a letter or digit
_SAFE_CUT = re.compile(r"(?<=\S)(?= )|\n(?=[^\W_])")


def _pieces(text: str, size: int) -> list[str]:
    """``text`` cut into parts of at most ``size`` characters where the pre-tokenizer splits anyway."""
    parts, start = [], 0
    while len(text) - start > size:
        cuts = [m.end() for m in _SAFE_CUT.finditer(text, start + 1, start + size)]
        end = cuts[-1] if cuts else start + size  # no safe cut in the window: may cost a token
        parts.append(text[start:end])
        start = end
    parts.append(text[start:])
    return parts


class BpeOpenaiTokenizer(_SessionCounting):
    """Exact OpenAI counts offline through ``bpe-openai``, which ships the vocabularies (``tokens`` extra)."""

    PIECE_CHARS = 50_000  # bpe-openai refuses 200,000 tokens in one call; 50,000 characters stay below

    def __init__(self, encoding: str = "o200k_base") -> None:
        try:
            import bpe_openai
        except ImportError:
            raise ConfigError(f"bpe-openai is not installed: {install_hint('tokens')}") from None
        try:
            self._enc = bpe_openai.get_encoding(encoding)
        except Exception as exc:
            raise ConfigError(f"bpe-openai has no encoding {encoding!r}: {exc}") from None

    def count(self, text: str) -> int:
        return sum(len(self._enc.encode_ordinary(piece)) for piece in _pieces(text, self.PIECE_CHARS)) if text else 0


def exact_tokenizer(encoding: str = "o200k_base") -> BpeOpenaiTokenizer | TiktokenTokenizer:
    """Exact counts: bpe-openai when installed (works offline), else tiktoken (downloads the encoding once).

    Raises ``NbagentError(kind="config")`` when neither can count.
    """
    try:
        return BpeOpenaiTokenizer(encoding)
    except NbagentError:
        return TiktokenTokenizer(encoding)


def _user_turn_starts(messages: list[Message]) -> list[int]:
    """Indices of user messages that open a turn (text, not tool results)."""
    return [
        i
        for i, m in enumerate(messages)
        if m.role == "user" and not m.tool_results
    ]


class ShrinkToolResults:
    """Cut large tool results (oldest first) down to a head and a note."""

    def __init__(self, keep_chars: int = 1_000, min_chars: int = 2_000) -> None:
        self.keep_chars = keep_chars
        self.min_chars = min_chars

    def compress(self, session, target: int, tokenizer) -> None:
        last = len(session.messages) - 1
        for i, message in enumerate(session.messages):
            if tokenizer.count_session(session) <= target:
                return
            if i == last:
                return  # the newest results are what the model is working on
            if any(len(p.content) > self.min_chars for p in message.tool_results):
                session.messages[i] = Message(message.role, [self._shrunk(p) for p in message.parts])

    def _shrunk(self, part):
        if not isinstance(part, ToolResultPart) or len(part.content) <= self.min_chars:
            return part
        cut = len(part.content) - self.keep_chars
        return dataclasses.replace(
            part, content=part.content[: self.keep_chars] + f"\n… [{cut:,} characters removed to save context]")


class DropOldestTurns:
    """Drop whole turns from the front, keeping the latest user turn."""

    NOTE = "[Earlier messages of this conversation were removed to fit the context window.]"

    def compress(self, session, target: int, tokenizer) -> None:
        dropped = False
        while tokenizer.count_session(session) > target:
            starts = _user_turn_starts(session.messages)
            if len(starts) < 2:
                break  # only the latest turn is left
            del session.messages[: starts[1]]
            dropped = True
        if dropped and session.messages:
            first = session.messages[0]
            if not any(isinstance(p, TextPart) and p.text == self.NOTE for p in first.parts):
                session.messages[0] = Message(first.role, [TextPart(self.NOTE), *first.parts])


class Chain:
    """Apply compressors in order until the target is met."""

    def __init__(self, *compressors) -> None:
        self.compressors = compressors

    def compress(self, session, target: int, tokenizer) -> None:
        for c in self.compressors:
            if tokenizer.count_session(session) <= target:
                return
            c.compress(session, target, tokenizer)


def default_compressor() -> Chain:
    return Chain(ShrinkToolResults(), DropOldestTurns())
