"""The HTML transcript: one self-contained page (inline CSS, no scripts, no fetches).

Math (``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]``, the widget's rule) becomes MathML, as the
widget shows it: :func:`~nbagent.core.mathtext.math_html` (latex2mathml, links checked, nothing but
MathML kept).

Model text is rendered by markdown-it-py (CommonMark with GFM tables and strikethrough; the
``html`` extra) with raw HTML off, so every ``<`` in model text comes out as ``&lt;``; when
markdown-it-py is not installed a small renderer built on :func:`html.escape` does headings,
flat lists, code, emphasis and links. Either way links keep http(s), mailto and relative
addresses only (:func:`safe_url`, the widget's policy) and images become links. A
Content-Security-Policy forbids scripts and every fetch besides, should a browser ever
find something to run.
"""

from __future__ import annotations

import functools
import re
from html import escape
from typing import Any

from ..core.mathtext import math_at, math_html, split_math
from ..core.safe_markdown import safe_url
from .transcript_items import Answer, Call, Diff, Failure, Note, Prompt, Result, Thinking, TranscriptItem, Waiting

__all__ = ["html_page", "markdown_html", "render_items_html", "small_markdown_html"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
CSS = """
body { font: 15px/1.55 system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 52rem;
       margin: 2rem auto; padding: 0 1rem; color: #1f2328; background: #fff; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.1rem; color: #57606a; }
.summary, .usage, .note { color: #57606a; font-size: .85rem; }
.turn { border-top: 1px solid #d0d7de; margin-top: 1.5rem; }
.prompt { background: #f6f8fa; border-radius: 8px; padding: .5rem .8rem; }
.prompt .text { white-space: pre-wrap; margin-top: .3rem; }
blockquote { margin: .5rem 0; padding-left: .8rem; border-left: 3px solid #d0d7de; color: #57606a; }
details.thinking { color: #57606a; border-left: 3px solid #d0d7de; padding-left: .8rem; }
.tool { border: 1px solid #d0d7de; border-radius: 8px; padding: .4rem .8rem; margin: .6rem 0; }
.failed { border-color: #cf222e; } .error { color: #cf222e; }
pre { background: #f6f8fa; padding: .6rem; border-radius: 6px; overflow-x: auto; white-space: pre-wrap; }
code { font: .9em ui-monospace, SFMono-Regular, Menlo, monospace; }
table { border-collapse: collapse; margin: .5rem 0; } th, td { border: 1px solid #d0d7de; padding: .2rem .6rem; }
@media (prefers-color-scheme: dark) {
  body { background: #0d1117; color: #e6edf3; } .prompt, pre { background: #161b22; }
  .turn, .tool, th, td { border-color: #30363d; } a { color: #4493f8; } }
"""

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(.*)$")
_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"(!?)\[([^\]\n]*)\]\(([^()\s]*)(?:\s+&quot;[^\n]*?&quot;)?\)")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EM = re.compile(r"(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\1(?![\w*])")


def html_page(title: str, summary: str, body: str) -> str:
    """A whole page around ``body`` (already HTML); ``title`` / ``summary`` are text."""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{CSS}</style></head>\n<body>\n"
        f"<h1>{escape(title)}</h1>\n<p class=\"summary\">{escape(summary)}</p>\n{body}\n</body></html>\n"
    )


def render_items_html(items: list[TranscriptItem]) -> str:
    """HTML for the items of ``transcript.step_items``."""
    return "\n".join(_item_html(item) for item in items)


def _item_html(item: TranscriptItem) -> str:
    match item:
        case Prompt(text):
            return f'<div class="prompt"><strong>You:</strong><div class="text">{escape(text)}</div></div>'
        case Thinking(text):
            return f'<details class="thinking"><summary>💭 thinking</summary>{markdown_html(text)}</details>'
        case Answer(text):
            return f'<div class="answer">{markdown_html(text)}</div>'
        case Call(name, args, cut):
            label = "✂️ cut at the token limit, not run:" if cut else "🔧"
            return (f'<div class="tool">{label} <strong>{escape(name)}</strong>'
                    f"<pre><code>{escape(args)}</code></pre></div>")
        case Waiting(name, for_what):
            return f'<p class="note">⏸ <strong>{escape(name)}</strong> is waiting for {escape(for_what)}</p>'
        case Result(name, text, failed, why):
            head = f"↳ <strong>{escape(name)}</strong> " + (f"({escape(why)}) " if why else "")
            head += "failed:" if failed else "returned:"
            return (f'<div class="tool{" failed" if failed else ""}">{head}'
                    f"<pre><code>{escape(text)}</code></pre></div>")
        case Diff(title, lines):
            return f'<div class="tool">📝 {escape(title)}<pre><code>{escape(lines)}</code></pre></div>'
        case Failure(text):
            return f'<div class="error"><strong>Error:</strong><pre><code>{escape(text)}</code></pre></div>'
        case Note(text):
            return f'<p class="note">— {escape(text)} —</p>'


# --- markdown through markdown-it-py --------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_REL = "noopener noreferrer"


def markdown_html(text: str) -> str:
    """Markdown to HTML with no raw HTML: markdown-it-py (tables, nested and numbered lists) when
    installed, else the small built-in renderer."""
    text = _CONTROL.sub("", text.replace("\r\n", "\n"))
    parser = _markdown_it()
    if parser is None:
        return small_markdown_html(text)
    return parser.render(text, {"dropped_links": []}).strip()


@functools.lru_cache(maxsize=1)
def _markdown_it() -> Any:
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        return None
    parser = MarkdownIt("commonmark", {"html": False, "breaks": True, "linkify": False})
    parser.enable(["table", "strikethrough"])
    parser.add_render_rule("link_open", _link_open)
    parser.add_render_rule("link_close", _link_close)
    parser.add_render_rule("image", _image)
    parser.add_render_rule("heading_open", _heading)
    parser.add_render_rule("heading_close", _heading)
    parser.inline.ruler.before("escape", "math", _math_rule)  # before "\(" is read as an escaped "("
    parser.add_render_rule("math", _math)
    return parser


def _math_rule(state: Any, silent: bool) -> bool:
    """Math (``core/mathtext.py``'s rule, the widget's) starting here, as one ``math`` token."""
    if state.src[state.pos] not in "$\\":
        return False
    found = math_at(state.src, state.pos)
    if found is None or found[2] > state.posMax:
        return False
    tex, display, end = found
    if not silent:
        token = state.push("math", "math", 0)
        token.content, token.meta = tex, {"display": display}
    state.pos = end
    return True


def _math(renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    return math_html(tokens[idx].content, bool(tokens[idx].meta.get("display")))


def _link_open(renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    url = safe_url(tokens[idx].attrGet("href") or "")
    env["dropped_links"].append(url is None)  # links do not nest: the next link_close is this one's
    if url is None:
        return ""
    tokens[idx].attrSet("href", url)
    tokens[idx].attrSet("rel", _REL)
    return renderer.renderToken(tokens, idx, options, env)


def _link_close(renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    dropped = env["dropped_links"].pop() if env["dropped_links"] else False
    return "" if dropped else renderer.renderToken(tokens, idx, options, env)


def _image(renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    """An image becomes a link to it (http(s) only: the page fetches nothing), else its alt text."""
    token = tokens[idx]
    alt = escape(renderer.renderInlineAsText(token.children or [], options, env))
    url = safe_url(token.attrGet("src") or "")
    if url is None or not url.lower().startswith(("http:", "https:")):
        return alt
    return f'<a href="{escape(url, quote=True)}" rel="{_REL}">🖼 {alt or escape(url)}</a>'


def _heading(renderer: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    """Model headings sit under the page's own h1 / h2: # becomes h3."""
    tokens[idx].tag = f"h{min(int(tokens[idx].tag[1]) + 2, 6)}"
    return renderer.renderToken(tokens, idx, options, env)


# --- the small built-in markdown (without markdown-it-py) ----------------------------------


def small_markdown_html(text: str) -> str:
    """Markdown to HTML, escaped throughout: fenced code, headings, flat lists, paragraphs."""
    out: list[str] = []
    para: list[str] = []
    lines = _CONTROL.sub("", text.replace("\r\n", "\n")).split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            _flush(para, out)
            mark, code = fence.group(1), []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(mark):
                code.append(lines[i])
                i += 1
            out.append("<pre><code>" + escape("\n".join(code)) + "</code></pre>")
        elif not line.strip():
            _flush(para, out)
        elif heading := _HEADING.match(line):
            _flush(para, out)
            level = min(len(heading.group(1)) + 2, 6)
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif line.lstrip().startswith(">"):
            _flush(para, out)
            quoted = []
            while i < len(lines) and lines[i].lstrip().startswith(">"):
                quoted.append(lines[i].lstrip()[1:].removeprefix(" "))
                i += 1
            out.append("<blockquote>" + small_markdown_html("\n".join(quoted)) + "</blockquote>")
            continue
        elif _ITEM.match(line) and not para:
            items = []
            while i < len(lines) and (item := _ITEM.match(lines[i])):
                items.append(f"<li>{_inline(item.group(1))}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
            continue
        else:
            para.append(line)
        i += 1
    _flush(para, out)
    return "\n".join(out)


def _flush(para: list[str], out: list[str]) -> None:
    if para:
        out.append("<p>" + "<br>\n".join(_inline(ln) for ln in para) + "</p>")
        para.clear()


def _inline(text: str) -> str:
    """Inline markdown of one line: code spans first (nothing inside them is formatted)."""
    parts, last = [], 0
    for m in _CODE.finditer(text):
        parts.append(_prose(text[last:m.start()]))
        parts.append("<code>" + escape(m.group(2).strip() or m.group(2)) + "</code>")
        last = m.end()
    parts.append(_prose(text[last:]))
    return "".join(parts)


def _prose(text: str) -> str:
    """Text outside code spans: math as MathML, the rest formatted."""
    return "".join(_format(escape(piece)) if display is None else math_html(piece, display)
                   for piece, display in split_math(text))


def _format(escaped: str) -> str:
    """Links, bold and italics on text that is already escaped (links set aside meanwhile,
    so that no emphasis lands inside an address)."""
    links: list[str] = []

    def keep(m: re.Match) -> str:
        links.append(_link(m))
        return f"\x00{len(links) - 1}\x00"

    escaped = _LINK.sub(keep, escaped)
    escaped = _STRONG.sub(r"<strong>\2</strong>", escaped)
    escaped = _EM.sub(r"<em>\2</em>", escaped)
    return re.sub("\x00(\\d+)\x00", lambda m: links[int(m.group(1))], escaped)


def _link(m: re.Match) -> str:
    image, label, href = m.group(1), m.group(2), m.group(3)
    url = safe_url(href)  # href is escaped text: safe_url unescapes it before checking
    if url is None or (image and not url.lower().startswith(("http:", "https:"))):
        return label
    text = ("🖼 " + (label or escape(url))) if image else (label or escape(url))
    return f'<a href="{escape(url, quote=True)}" rel="noopener noreferrer">{text}</a>'
