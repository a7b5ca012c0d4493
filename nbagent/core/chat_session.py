"""ChatSession: the provider-neutral message history sent to the model."""

from __future__ import annotations

import json
import os
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args
from collections.abc import Iterable

from .atomic_file import atomic_write_text
from .errors import ConfigError, StorageError
from .messages import Message, TextPart, ToolResultPart, clean_parts, note_edit
from .text import clean_text
from .growing_list import GrowingList

CHAT_SESSION_FORMAT = "nbagent.chat_session"
CHAT_SESSION_VERSION = 1
CacheStrategy = Literal["auto", "none"]
"""``auto``: providers mark the stable prefix for prompt caching; ``none``: no markers."""
CACHE_STRATEGIES: tuple[str, ...] = get_args(CacheStrategy)


def _cache_strategy(value: Any) -> CacheStrategy:
    if value == "none":
        return "none"
    if value == "auto":
        return "auto"
    raise ValueError(f"cache_strategy must be one of {CACHE_STRATEGIES}, not {value!r}")


@dataclass
class ChatSession:
    """Normalized history: a system prompt and alternating user/assistant messages.

    ``cache_strategy`` is ``"auto"`` (providers mark the system prompt, tools and
    the latest turns as cacheable) or ``"none"``. ``messages`` is always a
    :class:`~nbagent.core.growing_list.GrowingList` (a list that counts its changes
    other than growth): a list assigned to it is copied into one.
    """

    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    system: str | None = None
    messages: list[Message] = field(default_factory=GrowingList)
    cache_strategy: CacheStrategy = "auto"

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "messages" and not isinstance(value, GrowingList):
            value = GrowingList(value)
        object.__setattr__(self, name, value)

    # --- building -----------------------------------------------------------------

    def with_system(self, system: str | None) -> ChatSession:
        """Set the system prompt (None: none) and return this session."""
        self.system = system
        return self

    def with_cache_strategy(self, strategy: CacheStrategy) -> ChatSession:
        """Set the prompt-cache strategy (``"auto"`` or ``"none"``; else a ``ConfigError``); return this session."""
        if strategy not in CACHE_STRATEGIES:
            raise ConfigError(
                f"cache_strategy must be one of {CACHE_STRATEGIES}, not {strategy!r}"
            )
        self.cache_strategy = strategy
        return self

    def push_user(self, content: str | list) -> None:
        """Append a user message (text, or a list of parts).

        After a user message (e.g. tool results) the parts join it, so user and
        assistant messages keep alternating.
        """
        parts = [TextPart(clean_text(content))] if isinstance(content, str) else clean_parts(content)
        if self.messages and self.messages[-1].role == "user":
            self.messages[-1].parts.extend(parts)
        else:
            self.messages.append(Message("user", parts))

    def push_assistant(self, message: Message | str | list) -> None:
        """Append the assistant's response parts verbatim (provider details kept)."""
        if isinstance(message, str):
            message = Message("assistant", [TextPart(message)])
        elif isinstance(message, list):
            message = Message("assistant", list(message))
        if message.role != "assistant":
            raise ConfigError("push_assistant needs an assistant message")
        self.messages.append(Message("assistant", clean_parts(message.parts)))

    def push_tool_results(self, results: Iterable[ToolResultPart]) -> None:
        """Append tool results as ONE user message of tool-result parts."""
        parts = clean_parts(results)
        if parts:
            if self.messages and self.messages[-1].role == "user" and self.messages[-1].tool_results:
                self.messages[-1].parts.extend(parts)
            else:
                self.messages.append(Message("user", parts))

    def append_to_last_user(self, text: str) -> None:
        """Add a text part to the newest user message (alternation-safe injection).

        Falls back to a new user message when there is none (empty, system-only
        or assistant-only history), where a user message keeps alternation valid.
        """
        for message in reversed(self.messages):
            if message.role == "user":
                message.parts.append(TextPart(clean_text(text)))
                return
        self.push_user(text)

    def __len__(self) -> int:
        return len(self.messages)

    def is_empty(self) -> bool:
        """Whether the session holds no message yet."""
        return not self.messages

    # --- compression ----------------------------------------------------------------

    def compress(self, target_tokens: int, compressor: Any = None, tokenizer: Any = None) -> int:
        """Shrink the history in place toward ``target_tokens``; return the count after.

        May stay above the target when nothing more can be removed safely.
        """
        from .compression import ApproxTokenizer, default_compressor

        tokenizer = tokenizer or ApproxTokenizer()
        compressor = compressor or default_compressor()
        compressor.compress(self, int(target_tokens), tokenizer)
        note_edit()  # a compressor may have edited messages in place: count them afresh
        return tokenizer.count_session(self)

    # --- persistence -----------------------------------------------------------------

    def to_dict(self) -> dict:
        """The session as JSON values, with its format and version (as saved files hold it)."""
        return {
            "format": CHAT_SESSION_FORMAT,
            "version": CHAT_SESSION_VERSION,
            "session_id": self.session_id,
            "system": self.system,
            "cache_strategy": self.cache_strategy,
            "messages": [m.to_dict() for m in self.messages],
        }

    @classmethod
    def from_dict(cls, d: dict, source: str = "session") -> ChatSession:
        """A session from ``to_dict()``'s values; another format or version is a ``StorageError`` naming ``source``."""
        if not isinstance(d, dict) or d.get("format") != CHAT_SESSION_FORMAT:
            raise StorageError(f"{source} is not an nbagent chat session")
        if d.get("version") != CHAT_SESSION_VERSION:
            raise StorageError(
                f"{source} has chat session version {d.get('version')!r}; "
                f"this nbagent reads version {CHAT_SESSION_VERSION}",
            )
        try:
            messages, system = d.get("messages", []), d.get("system")
            if not isinstance(messages, list):
                raise TypeError("messages must be a list")
            if system is not None and not isinstance(system, str):
                raise TypeError("system must be a string")
            return cls(
                session_id=str(d["session_id"]),
                system=system,
                messages=[Message.from_dict(m) for m in messages],
                cache_strategy=_cache_strategy(d.get("cache_strategy", "auto")),
            )
        except (KeyError, TypeError, ValueError, RecursionError) as exc:
            raise StorageError(f"{source} is damaged: {exc}") from None

    def save(self, path: str | os.PathLike) -> Path:
        """Write the session as versioned JSON, atomically."""
        return atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> ChatSession:
        """Read a session saved as JSON (a ``StorageError`` when it cannot be read)."""
        return cls.from_dict(read_json(path), source=str(path))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    """Write ``obj`` as JSON to a temp file beside ``path``, then rename it over."""
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=True)  # C encoder
    except (TypeError, ValueError) as exc:
        raise StorageError(f"cannot save to {path}: {exc}") from None
    return atomic_write_text(path, text)


MAX_FILE_BYTES = 256 * 2**20
"""The largest session file nbagent reads (256 MB; parsing takes about 3 times the size in
memory). Checked before parsing; raise it with ``nbagent.core.chat_session.MAX_FILE_BYTES = n``."""


def open_session_file(path: str | os.PathLike, mode: str = "r") -> Any:
    """Open a session file for reading (``mode`` "r" or "rb"): only a regular file of at most
    :data:`MAX_FILE_BYTES` (a FIFO, a device such as ``/dev/zero`` or a directory is an ``io``
    error, never a read that blocks or never ends). Opened without blocking, then checked."""
    fd, _ = open_session_fd(path)
    try:
        return os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def open_session_fd(path: str | os.PathLike) -> tuple[int, int]:
    """:func:`open_session_file`'s checks, giving the open file descriptor (the caller closes it)
    and the file's size: what a reader of a few parts of many files needs, without a file object."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StorageError(f"{path} is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise StorageError(
                f"{path} is {info.st_size / 2**20:,.0f} MB, over the {MAX_FILE_BYTES / 2**20:,.0f} MB limit for "
                "session files; raise nbagent.core.chat_session.MAX_FILE_BYTES to read it")
        return fd, info.st_size
    except BaseException:
        os.close(fd)
        raise


def read_small_file(path: str | os.PathLike, limit: int, *, follow: bool = True) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file of at most ``limit`` bytes, and its ``fstat``: opened without blocking
    (a FIFO never waits for a writer), checked before reading (a device or a directory is refused,
    never read), and never read past ``limit`` (a file growing meanwhile included). ``follow=False``
    refuses a symbolic link at ``path``. ``OSError`` when it cannot be opened; ``StorageError``
    naming it otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and os.path.islink(path):
            raise StorageError(f"{path} is a symbolic link") from None
        raise exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StorageError(f"{path} is not a regular file")
        if info.st_size > limit:
            raise StorageError(f"{path} is {info.st_size:,} bytes, over the {limit:,} bytes nbagent reads of it")
        parts: list[bytes] = []
        total = 0
        while part := os.read(fd, min(1 << 20, limit + 1 - total)):  # by chunks: no buffer of ``limit`` bytes
            parts.append(part)
            total += len(part)
            if total > limit:
                raise StorageError(f"{path} grew past the {limit:,} bytes nbagent reads of it")
        return b"".join(parts), info
    finally:
        os.close(fd)


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file; any failure is ``NbagentError(kind="io")`` naming the file."""
    try:
        with open_session_file(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise StorageError(f"no such session file: {path}") from None
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # also a number of more than 4,300 digits
        raise StorageError(f"{path} is not valid JSON (corrupt or truncated): {exc!s:.300}") from None
