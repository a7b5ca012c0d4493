"""Errors nbagent raises.

    NbagentError(kind=...)        one class per kind, so ``except BudgetExceeded`` works;
                                  ``NbagentError(msg, kind="budget")`` builds a BudgetExceeded
      AuthError            auth             401/403, missing or rejected API key
      RateLimited          rate_limit       429 (retryable unless the quota is exhausted)
      InvalidRequest       invalid_request  400/404/422, a request the provider refuses
      ContextLengthExceeded context_length  the prompt does not fit the model's context window
      ServerError          server           5xx, overloaded (retryable)
      NetworkError         network          connection refused / reset / cut mid-stream
      RequestTimeout       timeout          connect or read timeout
      ProtocolError        protocol         a body nbagent cannot parse, an in-band stream error
      ToolError            tool             a tool misbehaved outside the model's view
      StorageError         io               a session file that cannot be read or written
      ConfigError          config           a missing optional install, a bad argument, a missing key
      BudgetExceeded       budget           a turn would exceed ``budget_usd`` (nothing was sent;
                                            see analysis/budget.py)

Messages never contain secrets: every known API key is scrubbed from them.
"""

from __future__ import annotations

import enum
import json
import os
import re
from typing import Any
from urllib.parse import quote, quote_plus

from .text import cap, clean_text


class ErrorKind(str, enum.Enum):
    """What went wrong; compares equal to its string (``err.kind == "budget"``)."""

    AUTH = "auth"
    RATE_LIMIT = "rate_limit"
    INVALID_REQUEST = "invalid_request"
    CONTEXT_LENGTH = "context_length"
    SERVER = "server"
    NETWORK = "network"
    TIMEOUT = "timeout"
    PROTOCOL = "protocol"
    TOOL = "tool"
    IO = "io"
    CONFIG = "config"
    BUDGET = "budget"

    def __str__(self) -> str:
        return self.value



# environment variables holding API keys, scrubbed from every message: each wire's spec registers its
# own when the provider registry first reads the specs (the pattern below catches the usual key shapes
# before that)
_key_variables: list[str] = []
_KEY_PATTERN = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,})")
_registered_secrets: set[str] = set()


def secret_forms(secret: str) -> set[str]:
    """Every way a secret shows up in text: raw, stripped, escaped (repr / JSON), URL-encoded."""
    forms = {secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1], quote(secret, safe=""),
             quote_plus(secret)}
    return {f for f in forms if len(f) >= 6}


def register_key_variable(name: str) -> None:
    """Scrub the value of the environment variable ``name`` (an API key) from every message."""
    if name and name not in _key_variables:
        _key_variables.append(name)


def key_variables() -> tuple[str, ...]:
    """The environment variables whose values are scrubbed (as registered, in order)."""
    return tuple(_key_variables)


def register_secret(secret: str | None) -> None:
    """Remember a secret so that it is scrubbed from every error message and log line."""
    if secret and len(secret.strip()) >= 6:
        _registered_secrets.update(secret_forms(secret))


def redact(text: str) -> str:
    """Return ``text`` with every known API key replaced by ``[redacted]``."""
    if not text:
        return text
    secrets = set(_registered_secrets)
    for name in _key_variables:
        value = os.environ.get(name)
        if value and len(value.strip()) >= 6:
            secrets.update(secret_forms(value))
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    return _KEY_PATTERN.sub("[redacted]", text)


class NbagentError(Exception):
    """The exception nbagent raises; ``kind`` says what went wrong, and each kind has its subclass.

    ::

        >>> err = NbagentError("over budget", kind="budget")
        >>> type(err).__name__, err.kind == "budget", str(err)
        ('BudgetExceeded', True, '[budget] over budget')
    """

    default_kind = ErrorKind.PROTOCOL
    _by_kind: dict[ErrorKind, type[NbagentError]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        NbagentError._by_kind.setdefault(cls.default_kind, cls)

    def __new__(cls, message: str = "", *args: Any, kind: str | None = None, **kwargs: Any) -> NbagentError:
        if cls is NbagentError:
            cls = NbagentError._by_kind.get(_kind(kind, cls.default_kind), NbagentError)
        return super().__new__(cls)

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        retryable: bool = False,
        http_code: int | None = None,
        provider: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = cap(clean_text(redact(str(message))))
        self.kind: ErrorKind = _kind(kind, self.default_kind)
        self.retryable = retryable
        self.http_code = http_code
        self.provider = provider
        self.retry_after = retry_after
        super().__init__(self.message)

    def with_kind(self, kind: str, *, message: str | None = None, retryable: bool | None = None) -> NbagentError:
        """This error as another kind (of that kind's class), its other fields kept."""
        return NbagentError(self.message if message is None else message, kind=kind,
                            retryable=self.retryable if retryable is None else retryable,
                            http_code=self.http_code, provider=self.provider, retry_after=self.retry_after)

    def __str__(self) -> str:
        prefix = f"[{self.kind}"
        if self.http_code:
            prefix += f" {self.http_code}"
        if self.provider:
            prefix += f" {self.provider}"
        return f"{prefix}] {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, kind={self.kind.value!r}, "
            f"retryable={self.retryable}, http_code={self.http_code})"
        )

    def __reduce__(self):  # keep pickling (multiprocessing, IPython) working
        return (
            _rebuild,
            (self.message, self.kind, self.retryable, self.http_code, self.provider),
        )


def _kind(kind: str | None, default: ErrorKind) -> ErrorKind:
    if kind is None:
        return default
    try:
        return ErrorKind(kind)
    except ValueError:
        raise ValueError(f"unknown error kind {kind!r}") from None


def _rebuild(message: str, kind: str, retryable: bool, http_code: int | None,
             provider: str | None) -> NbagentError:
    return NbagentError(
        message, kind=kind, retryable=retryable, http_code=http_code, provider=provider
    )


class AuthError(NbagentError):
    """A missing or rejected API key (401/403)."""

    default_kind = ErrorKind.AUTH


class RateLimited(NbagentError):
    """429: too many requests, or the quota is exhausted (then not retryable)."""

    default_kind = ErrorKind.RATE_LIMIT


class InvalidRequest(NbagentError):
    """A request the provider refuses (400/404/422)."""

    default_kind = ErrorKind.INVALID_REQUEST


class ContextLengthExceeded(NbagentError):
    """The prompt does not fit the model's context window."""

    default_kind = ErrorKind.CONTEXT_LENGTH


class ServerError(NbagentError):
    """5xx or overloaded (retryable)."""

    default_kind = ErrorKind.SERVER


class NetworkError(NbagentError):
    """Connection refused, reset, or cut mid-stream."""

    default_kind = ErrorKind.NETWORK


class RequestTimeout(NbagentError):
    """A connect, first-byte or read timeout."""

    default_kind = ErrorKind.TIMEOUT


class ProtocolError(NbagentError):
    """A body nbagent cannot parse, or an in-band stream error."""

    default_kind = ErrorKind.PROTOCOL


class ToolError(NbagentError):
    """A tool (or a hook, or an MCP server) misbehaved outside the model's view."""

    default_kind = ErrorKind.TOOL


class StorageError(NbagentError):
    """A session file or export that cannot be read or written."""

    default_kind = ErrorKind.IO


class ConfigError(NbagentError):
    """A bad argument, a missing optional install or API key, a read-only conversation."""

    default_kind = ErrorKind.CONFIG


class BudgetExceeded(NbagentError):
    """A turn would exceed ``budget_usd``; nothing was sent."""

    default_kind = ErrorKind.BUDGET
