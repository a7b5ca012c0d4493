"""Untrusted text (model output, tool arguments and results, error messages) made safe to
hand to a markdown renderer: JupyterLab's (marked, whose raw HTML a trusted output keeps),
nbconvert's (mistune, raw HTML and ``javascript:`` links passed through), GitHub's.

The policy mirrors the widget's (``js/src/markdown.js``): raw HTML is shown as text, links
go to http(s)/mailto/relative addresses only, images become links (no remote fetches).
The widget gets that from its own parser; here the renderer is someone else's, with its
own quirks (math, tables, mermaid blocks), so nothing relies on it parsing as we do:

- every ``<`` in the output is either ours (a tag we wrote) or an ``&lt;`` entity, so no
  parse, right or wrong, finds a tag in untrusted text;
- code that contains ``<`` (an inline code span or a fenced block) is written as
  ``<code>`` / ``<pre><code>`` with its text entity-escaped, so it shows exactly as
  written whether or not a renderer sees the code where we do;
- ``javascript:``-like schemes get a zero-width space (no longer a scheme), in code too;
- a link to any other scheme than the widget's (``data:``, ``file:``, ...) is shown as text.
"""

from __future__ import annotations

import html
import re

from .mathtext import math_markdown, split_math

__all__ = ["code_block", "code_span", "plain", "prose", "quote", "safe_url"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SCHEME = re.compile(r"(?i)\b(java|vb|live)(script\s*\\?:)")
# a backslash escape, an entity reference (CommonMark's forms), or a "<" that could open a
# tag, comment or autolink (one followed by a space, digit or "=" cannot: "$a < b$" stays)
_TEXT_TOKEN = re.compile(r"(\\[!-/:-@\[-`{-~])|(&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});)"
                         r"|(<(?=[A-Za-z/!?]|$))|(\$)")
_DOLLAR = "\\\\$"  # markdown for "\$": MathJax (which reads the page's text) shows it as "$"
# where a link's address starts: an inline link's "](", a reference definition's "[label]:"
_LINK_DEST = re.compile(r"\]\(\s*(?:<|&lt;)?\s*([^\s)>]*)")
_LINK_DEF = re.compile(r"^ {0,3}\[(?=[^\]]*\]:\s*(?:<|&lt;)?\s*(\S*))")
_URL_NOISE = re.compile(r"[\x00-\x20\x7f\\]|&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z]+);?")
_SAFE_URL = re.compile(r"(?i)^(https?:|mailto:|#|/|\./|\.\./|[^:]*$)")
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_BACKTICKS = re.compile(r"`+")
# inside inline HTML (<code>, <sub>) markdown is still parsed: these would format or link
_INLINE_ESCAPES = {c: f"&#{ord(c)};" for c in "\\`*_[]$~|"}
_INLINE_ESCAPES.update({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_INLINE_TABLE = str.maketrans(_INLINE_ESCAPES)
_PLAIN_TABLE = str.maketrans({**_INLINE_ESCAPES, "$": _DOLLAR})  # outside code, MathJax reads "&#36;" as "$"
_MATH_OPEN = re.compile(r"^ {0,3}(\$\$|\\\[)")
_MATH_CLOSE = {"$$": "$$", "\\[": "\\]"}
_BLOCK_TABLE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "$": "&#36;"})


def _clean(text: object) -> str:
    text = str(text).replace("\r\n", "\n").replace("\r", "\n")
    return _defuse(_CONTROL.sub("", text))


def _defuse(text: str) -> str:
    """``javascript:`` -> ``java\u200bscript:`` (likewise vbscript, livescript): not a scheme."""
    return _SCHEME.sub(lambda m: m.group(1) + "\u200b" + m.group(2), text)


def safe_url(url: str) -> str | None:
    """``url`` when it is http(s), mailto or relative (as the widget allows), else None."""
    url = _CONTROL.sub("", html.unescape(url or "")).strip()
    return url if url and _SAFE_URL.match(url) else None


def _link_allowed(dest: str) -> bool:
    """Whether markdown's link address ``dest`` (as written: entities, backslash escapes, breaks inside)
    is one the widget would link: http(s), mailto, ``#name`` or relative. Judged as a browser reads it
    once the renderer has decoded it, so ``d&#x61;ta:`` and ``data\\:`` are ``data:``."""
    decoded = _URL_NOISE.sub(lambda m: html.unescape(m.group(0)) if m.group(0).startswith("&") else "", dest)
    decoded = _URL_NOISE.sub("", decoded)  # what the entities spelled (a tab, a backslash) goes too
    return bool(_SAFE_URL.match(decoded))


def plain(text: object) -> str:
    """Markdown showing ``text`` as it is, on one line: no formatting, links or HTML."""
    return " ".join(_clean(text).translate(_PLAIN_TABLE).split())


def code_span(text: object) -> str:
    """Inline code showing ``text`` (newlines become spaces) that nothing can end early."""
    text = " ".join(_clean(text).split("\n"))
    if "<" in text:
        return "<code>" + text.translate(_INLINE_TABLE) + "</code>"
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_block(text: object, info: str = "") -> str:
    """A code block showing ``text``; its fence is longer than any backtick run inside."""
    text = _clean(text).rstrip("\n")
    if "<" in text:
        return "<pre><code>" + text.translate(_BLOCK_TABLE) + "</code></pre>"
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{_info(info)}\n{text}\n{fence}"


def _info(info: str) -> str:
    """A fence's language word, when it is a plain one (mermaid blocks become plain code)."""
    word = (info or "").strip().split(" ")[0]
    ok = re.fullmatch(r"[A-Za-z0-9_+#.-]{1,30}", word) and not word.lower().startswith("mermaid")
    return word if ok else ""


def quote(markdown: str) -> str:
    """``markdown`` as a block quote (every line, blank ones included, gets the marker)."""
    return "\n".join("> " + line if line else ">" for line in markdown.split("\n"))


def prose(text: object) -> str:
    """Model markdown made safe: formatting kept, raw HTML shown as text, links checked."""
    out: list[str] = []
    fence: tuple[str, int, str] | None = None  # (char, length, indent) of the open fence
    code: list[str] = []
    info = ""
    math: list[str] | None = None  # the lines of a displayed formula over several lines
    lines = _clean(text).split("\n")
    for line in lines:
        if math is not None:
            math.append(line)
            opened = _MATH_OPEN.match(math[0])
            closer = _MATH_CLOSE[opened.group(1)] if opened else "$$"
            if line.rstrip().endswith(closer):
                out.append(_math_block(math, closer))
                math = None
            continue
        if fence is not None:
            if _closes(line, fence):
                out.append(_fenced(code, info, fence[2]))
                fence, code = None, []
            elif line.strip() and _indent(line) < len(fence[2]):  # its container ended
                out.append(_fenced(code, info, fence[2]))
                fence, code = None, []
                out.append(_prose_line(line))
            else:
                code.append(line[len(fence[2]):] if line.startswith(fence[2]) else line.lstrip(" "))
            continue
        m = _FENCE.match(line)
        if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            fence, info, code = (m.group(2)[0], len(m.group(2)), m.group(1)), m.group(3), []
            continue
        opener = _MATH_OPEN.match(line)
        if opener and _MATH_CLOSE[opener.group(1)] not in line[opener.end():]:
            math = [line]
            continue
        out.append(_prose_line(line))
    if math is not None:  # never closed: prose after all
        out += [_prose_line(ln) for ln in math]
    if fence is not None:
        out.append(_fenced(code, info, fence[2]))
    return "\n".join(out)


def _math_block(lines: list[str], closer: str) -> str:
    """A displayed formula over several lines, as ``$$…$$`` (see core/mathtext.py)."""
    text = "\n".join(lines).strip()
    opener = "$$" if text.startswith("$$") else "\\["
    tex = text[len(opener):len(text) - len(closer)].strip("\n")
    if not tex.strip() or "$$" in tex:
        return "\n".join(_prose_line(ln) for ln in lines)
    return math_markdown("\n" + tex + "\n", True)


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(" "))


def _closes(line: str, fence: tuple[str, int, str]) -> bool:
    char, length, indent = fence
    stripped = line.strip()
    return (_indent(line) <= len(indent) + 3 and len(stripped) >= length
            and stripped == char * len(stripped))


def _fenced(lines: list[str], info: str, indent: str) -> str:
    block = code_block("\n".join(lines), info) if lines else code_block("", info)
    return "\n".join(indent + ln for ln in block.split("\n"))


def _prose_line(line: str) -> str:
    """One line of prose: code spans found on the line, ``<`` escaped everywhere else."""
    parts: list[str] = []
    i, n = 0, len(line)
    text_start = 0
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c != "`":
            i += 1
            continue
        backticks = _BACKTICKS.match(line, i)
        run = len(backticks.group(0)) if backticks else 1
        close = _closing_run(line, i + run, run)
        parts.append(_text(line[text_start:i]))
        if close is None:
            parts.append("\\`" * run)  # a lone backtick run is text, not an opener
            i += run
        else:
            parts.append(_span(line[i:close + run], run))
            i = close + run
        text_start = i
    parts.append(_text(line[text_start:]))
    return "".join(parts)


def _closing_run(line: str, start: int, length: int) -> int | None:
    for m in _BACKTICKS.finditer(line, start):
        if len(m.group(0)) == length:
            return m.start()
    return None


def _span(raw: str, run: int) -> str:
    inner = raw[run:-run]
    if "<" not in inner:
        return raw
    if inner.startswith(" ") and inner.endswith(" ") and inner.strip():
        inner = inner[1:-1]
    return "<code>" + inner.translate(_INLINE_TABLE) + "</code>"


def _text(text: str) -> str:
    """Prose outside code: math in the forms Jupyter's MathJax renders (see core/mathtext.py),
    other dollars escaped; a ``<`` that could start markup becomes ``&lt;``; an entity that
    spells a letter is spelled out, so that ``jav&#x61;script:`` is seen (and defused) too."""
    return "".join(_prose_text(piece) if display is None else math_markdown(piece, display)
                   for piece, display in split_math(text))


def _prose_text(text: str) -> str:
    text = _defuse(_TEXT_TOKEN.sub(_text_token, text)).replace("![", "🖼 [")
    # a link to another scheme (data:, file:, a defused javascript:, which would open a relative page)
    # is shown as text: its "](" becomes "]\(", its definition's "[" becomes "\["
    text = _LINK_DEST.sub(lambda m: m.group(0) if _link_allowed(m.group(1)) else "]\\" + m.group(0)[1:], text)
    return _LINK_DEF.sub(lambda m: m.group(0) if _link_allowed(m.group(1)) else "\\" + m.group(0), text)


def _text_token(m: re.Match) -> str:
    escaped, entity, char, dollar = m.groups()
    if dollar is not None or escaped == "\\$":
        return _DOLLAR
    if escaped is not None:  # \< shows a "<": keep showing it
        return "&lt;" if escaped == "\\<" else escaped
    if entity is not None:
        decoded = html.unescape(entity)
        return decoded if re.fullmatch(r"[A-Za-z0-9:]", decoded) else entity
    return "&lt;"
