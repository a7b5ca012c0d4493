"""Text that can cross every boundary: UTF-8 encodable, and error messages of a readable size."""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"
MAX_MESSAGE_CHARS = 2_000


def clean_text(text: str) -> str:
    """``text`` with unpaired surrogates (e.g. from ``os.fsdecode`` or JSON ``\\ud800``) replaced by U+FFFD.

    Such a character cannot be encoded as UTF-8: left in, it breaks every later request, the
    saved file and the widget.
    """
    if not text or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def cap(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """At most ``limit`` characters, saying how many were cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters cut]"


def exception_text(exc: BaseException) -> str:
    """``Type: message`` of an exception, safe when its own ``__str__`` raises too."""
    try:
        detail = str(exc)
    except Exception:  # noqa: BLE001 - any failure of a foreign __str__: show the type alone
        detail = ""
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
