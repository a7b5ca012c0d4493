"""Text that can cross every boundary: UTF-8 encodable, error messages of a readable size, no
terminal escape sequences, and untrusted text fenced as data for a model (a fence it cannot close)."""

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


# Terminal control sequences (ECMA-48): OSC (hyperlinks "ESC ] 8 ;; url ST", titles), DCS / SOS / PM /
# APC strings, CSI (colours, cursor moves), the C1 forms of these, and two-character escapes. A
# string sequence left unterminated ends at the line's end.
_TERMINAL = re.compile(
    r"(?:\x1b[\]P^_X]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -/]*[0-~]?")
_ESCAPE_START = re.compile("[\x1b\x90\x98\x9b\x9d\x9e\x9f]")  # what every sequence above starts with
_BACKTICKS = re.compile(r"`{3,}")


def strip_terminal_codes(text: str) -> str:
    """``text`` without ANSI colour codes, OSC-8 hyperlinks (their visible text kept), window titles
    and other terminal escape sequences: what a terminal would show, not what it would do."""
    if not text or _ESCAPE_START.search(text) is None:
        return text
    return _TERMINAL.sub("", text)


def data_block(text: str, info: str = "") -> str:
    """``text`` fenced as data: a fence of backticks longer than any run of backticks inside, so
    nothing in ``text`` can close it (CommonMark's rule); ``info`` labels it (``python``, ``text``)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}"
