"""Transcripts of untrusted text: the markdown (widget's saved output, ``%%chat``'s answer,
``to_markdown()``) and the HTML page (``to_html()``), rendered by the real renderers that
will meet them -- nbconvert's (mistune) and JupyterLab's (marked, through Node) -- and
checked with an HTML parser for anything that would run or fetch."""

from __future__ import annotations

import re
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from nbagent import Agent, NbagentError, tool
from nbagent.core.safe_markdown import code_block, code_span, prose
from nbagent.notebook.transcript import transcript_markdown
from nbagent.providers.base import TextDelta, ThinkingDelta
from support.link_payloads import SCHEME_LINKS, nbconvert_page
from support.scripted import ScriptedProvider, text_call, tool_call

ROOT = Path(__file__).resolve().parents[1]
MARKED = ROOT / "js" / "node_modules" / "marked" / "lib" / "marked.esm.js"

PAYLOADS = [
    "<script>alert('xss')</script>",
    "<img src=x onerror=alert('xss')>",
    "<img src=\"x\" onerror=\"alert('xss')\"> <a href=\"javascript:alert('xss')\">a</a>",
    "hi <b onmouseover=alert('xss')>b</b> <svg/onload=alert('xss')>",
    "[click](javascript:alert('xss')) [a](jav&#x61;script:alert('xss')) [b](JaVaScRiPt\\:alert('xss'))",
    "![pic](https://evil.example/xss.png) ![p](javascript:alert('xss'))",
    "`a <img src=x onerror=alert('xss')> b` and ``x` <img src=x onerror=alert('xss')> ``",
    "\\`<img src=x onerror=alert('xss')>`",
    "[x](`)<img src=x onerror=alert('xss')>`",
    "`a\nb` <img src=x onerror=alert('xss')> `",
    "$$\n```\n$$\n<img src=x onerror=alert('xss')>\n```",
    "```mermaid\ngraph TD; A[\"<img src=x onerror=alert('xss')>\"]\n```",
    "- a\n  ```\n<img src=x onerror=alert('xss')>\n  ```",
    "| a | b |\n|---|---|\n| `x|<img src=x onerror=alert('xss')>` | y |",
    "http://a.b/`<img src=x onerror=alert('xss')>`",
    "[ref]: javascript:alert('xss')\n\n[go][ref]",
    "$`$<img src=x onerror=alert('xss')>`",
    "<!-- x --><a href=\"javascript:alert('xss')\">x</a><style>*{display:none}</style>",
    "~~~\n<iframe src=javascript:alert('xss')>",
    "<div>\n\n<img src=x onerror=alert('xss')>\n\n</div>",
]


class Dangers(HTMLParser):
    """What in a page would run or fetch: script / img / iframe / style elements, on*
    attributes, javascript: addresses. The page's own elements (``allow``, e.g. nbconvert's
    scripts) may be there, but not with a payload inside."""

    BAD_TAGS = {"script", "img", "iframe", "style", "object", "embed", "svg", "link", "base", "form"}

    def __init__(self, allow: tuple[str, ...] = ()) -> None:
        super().__init__(convert_charrefs=True)
        self.allow = allow
        self.found: list[str] = []
        self.in_script = False

    def handle_starttag(self, tag, attrs):
        if tag in self.BAD_TAGS and tag not in self.allow:
            self.found.append(f"<{tag}>")
        self.in_script = tag in ("script", "style")
        for name, value in attrs:
            value = (value or "").replace("\t", "").replace("\n", "").strip().lower()
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}>")
            if name in ("href", "src", "action", "formaction") and value.startswith(("javascript:", "vbscript:")):
                self.found.append(f"<{tag} {name}={value}>")

    def handle_data(self, data):
        if self.in_script and "xss" in data:  # nbconvert's scripts are fine; not one of ours
            self.found.append("script with a payload")

    def handle_endtag(self, tag):
        self.in_script = False


def dangers(page: str, allow: tuple[str, ...] = ()) -> list[str]:
    parser = Dangers(allow)
    parser.feed(page)
    return parser.found


def mistune_html(markdown: str) -> str:
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(markdown)


def marked_html(sources: list[str]) -> list[str]:
    """JupyterLab's renderer (marked, GFM, raw HTML kept as a trusted output keeps it)."""
    script = ("import {Marked} from %s; import fs from 'fs';"
              "const m = new Marked({gfm: true});"
              "process.stdout.write(JSON.stringify(JSON.parse(fs.readFileSync(0, 'utf8')).map(s => m.parse(s))));"
              % json.dumps(MARKED.as_uri()))
    done = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps(sources),
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


# --- the escaping --------------------------------------------------------------------


@pytest.mark.parametrize("payload", PAYLOADS)
def test_model_text_renders_without_anything_that_runs_in_nbconvert(payload):
    assert dangers(mistune_html(prose(payload))) == []


@pytest.mark.skipif(shutil.which("node") is None or not MARKED.exists(),
                    reason="Node.js and js/node_modules (npm ci in js/) are needed for marked")
def test_model_text_renders_without_anything_that_runs_in_jupyterlabs_marked():
    pages = marked_html([prose(p) for p in PAYLOADS])
    found = {p: dangers(page) for p, page in zip(PAYLOADS, pages) if dangers(page)}
    assert found == {}


def test_the_checks_see_what_unescaped_text_would_do():
    for payload in (PAYLOADS[0], PAYLOADS[2], PAYLOADS[4]):
        assert dangers(mistune_html(payload)), payload  # raw, each of these would run


def test_formatting_math_and_code_survive():
    source = ("# Title\n\n**bold** and *it* with $a < b$ and $x^2$\n\n- one\n- two\n\n"
              "```python\nprint('hi')\n```\n\n```html\n<b>&amp;</b>\n```\n\n`List<int>` is `code`")
    page = mistune_html(prose(source))
    assert "<h1" in page and "<strong>bold</strong>" in page and "<li>one</li>" in page
    assert r"$a \lt  b$" in page and "$x^2$" in page  # math is left for MathJax, with no "<" to escape
    assert "print" in page and "<code>List&lt;int&gt;</code>" in page and "<code>code</code>" in page
    assert "&lt;b&gt;&amp;amp;&lt;/b&gt;" in page  # code shows exactly what was written


@pytest.mark.parametrize("text", ["plain", "a `tick` here", "```", "` lead", "<img src=x onerror=alert(1)>",
                                  "two\n\nparagraphs `` and ``` runs", "$x$ | pipe [l](javascript:x)"])
def test_code_spans_and_blocks_show_their_text_and_cannot_be_left(text):
    page = mistune_html("before " + code_span(text) + " after")
    assert dangers(page) == [] and page.count("<code>") == 1 and page.rstrip().endswith("after</p>")
    page = mistune_html(code_block(text) + "\n\n*after*")
    assert dangers(page) == [] and page.count("<pre>") == 1 and "<em>after</em>" in page


# --- transcripts of a real conversation ------------------------------------------------------


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return "found <img src=x onerror=alert('xss-result')> in `data`"


def xss_conversation():
    """A turn whose thoughts, answer, tool arguments, tool result and error all carry payloads."""
    provider = ScriptedProvider([
        [ThinkingDelta("thinking <script>alert('xss-thought')</script>"),
         *tool_call(("c1", "lookup", {"query": "`x` <img src=x onerror=alert('xss-args')> ```"}))],
        text_call("Answer <img src=x onerror=alert('xss-text')> [go](javascript:alert('xss')) **bold**"),
        [TextDelta("partial <svg onload=alert('xss-partial')>"),
         NbagentError("server said <script>alert('xss-error')</script>", kind="server")],
    ])
    agent = Agent(model=provider, tools=[lookup])
    agent.ask("Find <b onmouseover=alert('xss-prompt')>it</b>")
    with pytest.raises(NbagentError):
        agent.ask("again")
    return agent.conversation


def test_to_markdown_has_every_part_and_nothing_that_runs():
    conv = xss_conversation()
    md = conv.to_markdown()
    for part in ("Find", "thinking", "lookup", "xss-args", "xss-result", "Answer", "**bold**",
                 "partial", "server said", "## Turn 2"):
        assert part in md, part
    assert dangers(mistune_html(md)) == []
    page = conv.to_html()
    assert page.count("<style>") == 1 and "<script" not in page
    assert dangers(page, allow=("style",)) == [] and "Content-Security-Policy" in page and "default-src 'none'" in page
    for part in ("xss-thought", "xss-args", "xss-result", "xss-text", "xss-error", "<strong>bold</strong>"):
        assert part in page, part


def test_nbconvert_of_a_saved_notebook_with_payloads_runs_nothing(tmp_path):
    """The outputs a notebook keeps -- the widget's transcript, a %%chat answer, a failed
    %%chat turn -- saved, then converted by nbconvert's HTML exporter."""
    nbformat = pytest.importorskip("nbformat")
    from nbconvert import HTMLExporter

    conv = xss_conversation()
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "nbagent")
    ip.user_ns["bot"] = Agent(model=ScriptedProvider([
        text_call("magic <img src=x onerror=alert('xss-magic')>"),
        [NbagentError("boom <script>alert('xss-magic-error')</script>", kind="network")]]))
    answer = ip.run_cell("%%chat -a bot\nhi").result
    shown, _ = ip.display_formatter.format(answer)
    failed = ip.run_cell("%%chat -a bot\nagain")
    assert isinstance(failed.error_in_exec, NbagentError)
    error_md = transcript_markdown(ip.user_ns["bot"].conversation.history)

    widget_md = f'<div class="nbagent-transcript">\n\n{transcript_markdown(conv.history)}\n\n</div>'
    cells = [nbformat.v4.new_code_cell("agent", outputs=[nbformat.v4.new_output(
                 "display_data", data={"text/markdown": widget_md, "text/plain": "transcript"})]),
             nbformat.v4.new_code_cell("%%chat\nhi", execution_count=1, outputs=[nbformat.v4.new_output(
                 "execute_result", data=shown, execution_count=1)]),
             nbformat.v4.new_code_cell("%%chat\nagain", outputs=[nbformat.v4.new_output(
                 "display_data", data={"text/markdown": error_md, "text/plain": "failed"})])]
    path = tmp_path / "payloads.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    page, _ = HTMLExporter().from_notebook_node(nbformat.read(path, as_version=4))
    for marker in ("xss-thought", "xss-args", "xss-result", "xss-text", "xss-error", "xss-prompt",
                   "xss-magic", "xss-magic-error"):
        assert marker in page, marker  # every payload is in the page, as text
    assert dangers(page, allow=("script", "style", "link")) == []


def test_the_plain_text_transcript_is_the_words_themselves():
    from nbagent.notebook.transcript import transcript_text

    conv = xss_conversation()
    text = transcript_text(conv.history)
    assert "You: Find <b onmouseover=alert('xss-prompt')>it</b>" in text  # as typed: the view escapes it
    assert "🔧 lookup(" in text and "returned: found <img" in text and "Error: [server] server said" in text
    assert "&lt;" not in text and "<code>" not in text


def test_a_disarmed_link_is_text_not_a_link_to_a_relative_page():
    """``java\u200bscript:`` is no scheme, but as a link it would open a relative page (a new Lab tab)."""
    source = "see [a link](javascript:alert(1)), ![i](javascript:x), [ok](https://x.org)\n\n[r]: vbscript:y\n\n[use r][r]"
    page = mistune_html(prose(source))
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs == ["https://x.org"], hrefs
    assert "a link" in page and "java\u200bscript:alert(1)" in page  # shown, as text


_ALLOWED_HREF = re.compile(r"(?i)^(https?:|mailto:|#|[^:]*$|\./)")


def live_hrefs(page: str) -> list[str]:
    """The targets of the page's links, as a browser reads them (entities decoded, tabs and breaks gone)."""
    import html as html_lib

    return [re.sub(r"[\t\n\r]", "", html_lib.unescape(h)).strip()
            for h in re.findall(r'<a\b[^>]*\bhref\s*=\s*"([^"]*)"', page)]


@pytest.mark.parametrize("renderer", ["nbconvert", "jupyterlab", "to_html"])
def test_only_the_widgets_schemes_are_links_in_a_saved_transcript(renderer):
    """The run found data: links live in saved transcripts under nbconvert and JupyterLab (5 checks)."""
    if renderer == "jupyterlab" and (shutil.which("node") is None or not MARKED.exists()):
        pytest.skip("Node.js and js/node_modules (npm ci in js/) are needed for marked")
    if renderer == "to_html":
        from nbagent.notebook.transcript_html import markdown_html

        pages = [markdown_html(source) for source in SCHEME_LINKS]
    elif renderer == "nbconvert":
        pages = [mistune_html(prose(source)) for source in SCHEME_LINKS]
    else:
        pages = marked_html([prose(source) for source in SCHEME_LINKS])
    hrefs = [h for page in pages for h in live_hrefs(page)]
    assert [h for h in hrefs if not _ALLOWED_HREF.match(h)] == [], renderer
    assert set(hrefs) >= {"https://example.org/a", "mailto:a@b.c", "notes/page.md", "#top"}  # links still work
    assert "open" in pages[0] and "data:text/html;base64" in pages[0]  # the refused one is shown as text


def test_jupyter_nbconvert_of_a_saved_chat_with_data_links_links_only_the_widgets_schemes(tmp_path):
    """A saved notebook whose transcript output holds a model's data:, file: and vbscript: links,
    through the real ``jupyter nbconvert --to html`` command."""
    pytest.importorskip("nbformat")
    page = nbconvert_page(tmp_path).read_text(encoding="utf-8")
    assert "data:text/html;base64" in page  # shown as text
    ours = [h for h in live_hrefs(page) if h.startswith(("data:", "file:", "vbscript:", "javascript:"))]
    assert [h for h in ours if not h.startswith("data:image/")] == [], ours  # nbconvert's own inline assets aside
    assert not [h for h in ours if "svg+xml,<svg" in h or "onload" in h]
    assert {"https://example.org/a", "mailto:a@b.c", "notes/page.md", "#top"} <= set(live_hrefs(page))


def test_the_transcripts_usage_line_writes_times_and_speed_as_the_widgets_footer_does():
    """%%chat, to_markdown() and the saved transcript say "4.95 s · TTFT 1.08 s · 9.8 tok/s" for the
    turn the widget's footer shows so (js/test/render.test.js has the same cases), not "4,948 ms"."""
    from nbagent.core.ledger import TurnRecord
    from nbagent.core.usage import UsageMetadata
    from nbagent.notebook.transcript import seconds_text, usage_line

    assert [seconds_text(s) for s in (0.0123, 0.41, 1.2, 2.5, 4.948, 12.34, 75)] == [
        "12 ms", "410 ms", "1.20 s", "2.50 s", "4.95 s", "12.3 s", "1 min 15 s"]
    record = TurnRecord(turn=0, model="demo", started_at=100.0, first_token_at=101.082, finished_at=104.948,
                        usage=UsageMetadata(12, 37, 49))
    line = usage_line(record)
    assert line.endswith("4.95 s · TTFT 1.08 s · 9.6 tok/s"), line
