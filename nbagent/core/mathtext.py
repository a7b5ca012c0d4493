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

__all__ = ["MathPiece", "disarm_tex", "escape_dollars", "math_at", "math_html", "math_markdown", "split_math"]

# the patterns of js/src/mathtext.js (INLINE), tried in this order at each "$" or "\"
_PATTERNS = [
    (re.compile(r"\$\$((?:\\.|[^$\\])+?)\$\$"), True),
    (re.compile(r"\\\(((?:\\.|[^\\])+?)\\\)"), False),
    (re.compile(r"\\\[((?:\\.|[^\\])+?)\\\]"), True),
    (re.compile(r"\$(?!\s)((?:\\.|[^$\\\n])+?)(?<!\s)\$(?!\d)"), False),
]
MathPiece = tuple[str, "bool | None"]  # (text, None) or (tex, displayed)


def math_at(text: str, i: int) -> tuple[str, bool, int] | None:
    """The math that starts at ``text[i]`` (a ``$`` or ``\\``): its TeX, whether it is displayed, and
    the index after it; None when none starts there."""
    for pattern, display in _PATTERNS:
        m = pattern.match(text, i)
        if m and m.group(1).strip():
            return m.group(1).strip(), display, m.end()
    return None


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


# MathJax commands that make links, load code, style the page or define macros (which could
# assemble any of those): never trusted from a model
_LINKS = re.compile(r"\\(href|url)(?![A-Za-z])\s*(\{(?:[^{}]|\{[^{}]*\})*\})?")
_UNSAFE_COMMANDS = re.compile(
    r"\\(def|gdef|edef|xdef|let|newcommand|renewcommand|providecommand|newenvironment|renewenvironment"
    r"|DeclareMathOperator|require|class|cssId|style|data|unicode)(?![A-Za-z])")
_SAFE_TARGET = re.compile(r"(https?://|mailto:)[^\s]|#[A-Za-z][\w.-]*$", re.IGNORECASE)
_INVISIBLE = re.compile(r"[\s\x00-\x1f\x7f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")


def _disarm_link(match: re.Match) -> str:
    command, arg = match.group(1), match.group(2)
    target = _INVISIBLE.sub("", arg[1:-1]) if arg else ""
    if arg and _SAFE_TARGET.match(target):
        return match.group(0)
    if command == "href":  # the link's text (the next group) stays, as plain math
        return ""
    return r"\text{(link removed)}"


def disarm_tex(tex: str) -> str:
    """TeX with its unsafe commands shown, not run: links only to http(s), mailto and ``#name``
    targets (judged after removing white space and control characters), and no macro
    definitions, ``\\require``, ``\\class`` / ``\\style`` / ``\\cssId`` / ``\\data`` or ``\\unicode``."""
    tex = _UNSAFE_COMMANDS.sub(lambda m: r"\backslash\text{" + m.group(1) + "}", tex)
    return _LINKS.sub(_disarm_link, tex)


def math_markdown(tex: str, display: bool) -> str:
    """TeX as ``$…$`` / ``$$…$$`` for a markdown renderer with MathJax: no ``<`` or ``>`` in it,
    and nothing that makes links to unsafe targets or runs code (:func:`disarm_tex`)."""
    # math mode ignores spaces: "! [" is the same formula, and never an image for a renderer without math
    tex = disarm_tex(tex).replace("<", r"\lt ").replace(">", r"\gt ").replace("![", "! [")
    return f"$${tex}$$" if display else f"${tex}$"


def escape_dollars(text: str) -> str:
    """Markdown showing ``text``'s dollars as dollars, never as math delimiters."""
    return text.replace("$", "\\\\$")


# --- TeX as MathML, for HTML pages (the widget's Temml does the same in the browser) ---------

# MathML elements and presentation attributes kept; anything else is dropped (an element for its text)
_MATHML_TAGS = frozenset("""math mrow mi mn mo ms mtext mspace msub msup msubsup mfrac msqrt mroot mstyle merror
    mpadded mphantom menclose mover munder munderover mtable mtr mtd mlabeledtr mmultiscripts mprescripts none
    semantics annotation""".split())
_MATHML_ATTRIBUTES = frozenset("""display displaystyle scriptlevel mathvariant mathsize mathcolor mathbackground
    stretchy fence separator lspace rspace largeop movablelimits symmetric accent accentunder columnalign rowalign
    columnspacing rowspacing columnlines rowlines frame width height depth linethickness notation encoding minsize
    maxsize form voffset align""".split())
_MATHML_NS = "{http://www.w3.org/1998/Math/MathML}"


def math_html(tex: str, display: bool) -> str:
    """TeX as MathML for an HTML page: disarmed first (:func:`disarm_tex`), converted by latex2mathml
    (the ``html`` extra), then kept to MathML elements and attributes with links only to http(s), mailto
    and ``#name``; no script can come of it. TeX latex2mathml cannot read, or no latex2mathml, shows the
    disarmed TeX as ``<code class="math">``."""
    from html import escape

    safe = disarm_tex(tex)
    try:
        from latex2mathml.converter import convert

        return _clean_mathml(convert(_urls_as_links(safe), display="block" if display else "inline"))
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - latex2mathml raises many kinds on TeX it cannot read
        pass
    return f'<code class="math">{escape(safe, quote=False)}</code>'


def _urls_as_links(tex: str) -> str:
    r"""``\url{x}`` (latex2mathml has no ``\url``) as ``\href{x}{\texttt{x}}``; the target was judged already."""
    return _URL.sub(lambda m: "\\href{" + m.group(1) + "}{\\texttt{" + m.group(1) + "}}", tex)


_URL = re.compile(r"\\url(?![A-Za-z])\s*\{([^{}]*)\}")


def _clean_mathml(mathml: str) -> str:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(mathml)  # latex2mathml's output; a \text{<b>} in it is parsed as an element, then dropped
    return "".join(_element_html(root))


def _element_html(node) -> list[str]:
    from html import escape

    tag = node.tag.removeprefix(_MATHML_NS)
    out: list[str] = []
    if tag not in _MATHML_TAGS:  # an element that came from text: its text, shown as text
        out.append(escape("".join(node.itertext()), quote=False))
    else:
        attrs = [f' {name}="{escape(value, quote=True)}"' for name, value in sorted(node.attrib.items())
                 if name in _MATHML_ATTRIBUTES]
        target = node.attrib.get("href")
        if target is not None and _SAFE_TARGET.match(_INVISIBLE.sub("", target)) and not _INVISIBLE.search(target):
            attrs.append(f' href="{escape(target, quote=True)}"')
        if tag == "math":
            attrs.insert(0, ' xmlns="http://www.w3.org/1998/Math/MathML"')
        out.append(f"<{tag}{''.join(attrs)}>")
        out.append(escape(node.text or "", quote=False))
        for child in node:
            out += _element_html(child)
        out.append(f"</{tag}>")
    out.append(escape(node.tail or "", quote=False))
    return out
