"""Errors nbagent raises.

    NbagentError(kind=...)
      auth             401/403, missing or rejected API key
      rate_limit       429 (retryable unless the quota is exhausted)
      invalid_request  400/404/422, a request the provider refuses
      context_length   the prompt does not fit the model's context window
      server           5xx, overloaded (retryable)
      network          connection refused / reset / cut mid-stream
      timeout          connect or read timeout
      protocol         a body nbagent cannot parse, an in-band stream error
      tool             a tool misbehaved outside the model's view
      io               a session file that cannot be read or written
      config           a missing optional install or a bad argument
      budget           a turn would exceed ``budget_usd`` (nothing was sent; see analysis/budget.py)

Messages never contain secrets: every known API key is scrubbed from them.
"""

from __future__ import annotations

import json
import os
import re
from urllib.parse import quote, quote_plus

from .text import cap, clean_text

KINDS = (
    "auth",
    "rate_limit",
    "invalid_request",
    "context_length",
    "server",
    "network",
    "timeout",
    "protocol",
    "tool",
    "io",
    "config",
    "budget",
)

_KEY_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")
_KEY_PATTERN = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,})")
_registered_secrets: set[str] = set()


def secret_forms(secret: str) -> set[str]:
    """Every way a secret shows up in text: raw, stripped, escaped (repr / JSON), URL-encoded."""
    forms = {secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1], quote(secret, safe=""),
             quote_plus(secret)}
    return {f for f in forms if len(f) >= 6}


def register_secret(secret: str | None) -> None:
    """Remember a secret so that it is scrubbed from every error message and log line."""
    if secret and len(secret.strip()) >= 6:
        _registered_secrets.update(secret_forms(secret))


def redact(text: str) -> str:
    """Return ``text`` with every known API key replaced by ``[redacted]``."""
    if not text:
        return text
    secrets = set(_registered_secrets)
    for name in _KEY_ENV:
        value = os.environ.get(name)
        if value and len(value.strip()) >= 6:
            secrets.update(secret_forms(value))
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    return _KEY_PATTERN.sub("[redacted]", text)


class NbagentError(Exception):
    """The one exception nbagent raises; ``kind`` says what went wrong."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "protocol",
        retryable: bool = False,
        http_code: int | None = None,
        provider: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        self.message = cap(clean_text(redact(str(message))))
        self.kind = kind
        self.retryable = retryable
        self.http_code = http_code
        self.provider = provider
        self.retry_after = retry_after
        super().__init__(self.message)

    def __str__(self) -> str:
        prefix = f"[{self.kind}"
        if self.http_code:
            prefix += f" {self.http_code}"
        if self.provider:
            prefix += f" {self.provider}"
        return f"{prefix}] {self.message}"

    def __repr__(self) -> str:
        return (
            f"NbagentError({self.message!r}, kind={self.kind!r}, "
            f"retryable={self.retryable}, http_code={self.http_code})"
        )

    def __reduce__(self):  # keep pickling (multiprocessing, IPython) working
        return (
            _rebuild,
            (self.message, self.kind, self.retryable, self.http_code, self.provider),
        )


def _rebuild(message, kind, retryable, http_code, provider):
    return NbagentError(
        message, kind=kind, retryable=retryable, http_code=http_code, provider=provider
    )
