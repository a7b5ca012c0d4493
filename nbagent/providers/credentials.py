"""API keys and base URLs: checked once, and kept out of every message and log line.

A key read from a file often ends with a newline: httpx then refuses the header and, before,
the key landed in error messages, saved sessions and logs. Keys are stripped, checked for
characters an HTTP header cannot carry, and registered (in every escaped and URL-encoded form)
with the redactor. A ``base_url`` may carry query parameters (``...?key=...``, ``api-version=``):
they are kept apart from the path, added to every request URL, and secret-looking ones are
redacted. A logging filter scrubs httpx's and httpcore's log lines.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..core.errors import ConfigError, redact, register_secret

SECRET_PARAMS = {"key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "sig", "signature",
                 "secret", "password", "code"}


def clean_api_key(key: str | None, provider: str) -> str | None:
    """The key without surrounding whitespace; a ``config`` error (never showing it) when unusable."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise ConfigError(f"{provider}: api_key must be a string", provider=provider)
    register_secret(key)
    stripped = key.strip()
    if not stripped:
        return None
    bad = [c for c in stripped if ord(c) < 0x21 or ord(c) > 0x7E]
    if bad:
        what = "a line break" if any(c in "\r\n" for c in bad) else "a space, control or non-ASCII character"
        raise ConfigError(f"{provider}: the API key contains {what}, which an HTTP header cannot carry "
                          f"(was it copied or read from a file with extra characters?)", provider=provider)
    return stripped


def split_base_url(url: str) -> tuple[str, list[tuple[str, str]]]:
    """``(url without query, query parameters)``; secret-looking parameter values are registered."""
    parts = urlsplit(url.strip())
    params = parse_qsl(parts.query, keep_blank_values=True)
    for name, value in params:
        if name.lower() in SECRET_PARAMS:
            register_secret(value)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return base, params


class RedactingFilter(logging.Filter):
    """Scrubs known secrets from log records (httpx logs every request URL at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.msg = record.getMessage()
            record.args = None
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def install_log_filter() -> None:
    """Add the filter to the loggers of httpx and httpcore (once)."""
    for name in ("httpx", "httpcore", "httpcore.connection", "httpcore.http11", "httpcore.http2", "httpcore.proxy"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
