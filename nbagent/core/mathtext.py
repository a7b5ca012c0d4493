"""The one rule for what is math in model text, the same as the widget's (``js/src/mathtext.js``):
``$$…$$`` and ``\\[…\\]`` are displayed, ``\\(…\\)`` and ``$…$`` inline; a ``$…$`` has no space
after its opening dollar or before its closing one and no digit right after it, so "$5 and $10"
is money, not math.

For markdown that Jupyter renders (its MathJax finds ``$`` in the page's text, whatever the
markdown said), math is written in the forms every renderer knows (``$…$``, ``$$…$$``) with
``<`` / ``>`` as ``\\lt`` / ``\\gt`` (an ``&lt;`` would reach MathJax as text), and every other
dollar as ``\\\\$`` (shown as ``\\$``, which MathJax prints as a dollar).
"""

from __future__ import annotations

import re

__all__ = ["MathPiece", "escape_dollars", "math_markdown", "split_math"]

# the patterns of js/src/mathtext.js (INLINE), tried in this order at each "$" or "\"
_PATTERNS = [
    (re.compile(r"\$\$((?:\\.|[^$\\])+?)\$\$"), True),
    (re.compile(r"\\\(((?:\\.|[^\\])+?)\\\)"), False),
    (re.compile(r"\\\[((?:\\.|[^\\])+?)\\\]"), True),
    (re.compile(r"\$(?!\s)((?:\\.|[^$\\\n])+?)(?<!\s)\$(?!\d)"), False),
]
MathPiece = tuple[str, "bool | None"]  # (text, None) or (tex, displayed)


def split_math(text: str) -> list[MathPiece]:
    """``text`` as plain pieces ``(text, None)`` and math pieces ``(tex, displayed)``."""
    out: list[MathPiece] = []
    plain: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "$\\":
            hit = None
            for pattern, display in _PATTERNS:
                m = pattern.match(text, i)
                if m and m.group(1).strip():
                    hit = (m, display)
                    break
            if hit is not None:
                m, display = hit
                if plain:
                    out.append(("".join(plain), None))
                    plain = []
                out.append((m.group(1).strip(), display))
                i = m.end()
                continue
            if c == "\\" and i + 1 < n:  # an escaped character is never a delimiter
                plain.append(text[i:i + 2])
                i += 2
                continue
        plain.append(c)
        i += 1
    if plain:
        out.append(("".join(plain), None))
    return out


def math_markdown(tex: str, display: bool) -> str:
    """TeX as ``$…$`` / ``$$…$$`` for a markdown renderer with MathJax: no ``<`` or ``>`` in it."""
    # math mode ignores spaces: "! [" is the same formula, and never an image for a renderer without math
    tex = tex.replace("<", r"\lt ").replace(">", r"\gt ").replace("![", "! [")
    return f"$${tex}$$" if display else f"${tex}$"


def escape_dollars(text: str) -> str:
    """Markdown showing ``text``'s dollars as dollars, never as math delimiters."""
    return text.replace("$", "\\\\$")
