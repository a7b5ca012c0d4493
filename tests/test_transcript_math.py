"""Math in the HTML export (``conv.to_html()``, ``python -m nbagent export --to html``) is MathML, as
the widget shows it, with no script and no link the widget would refuse (#48.11).

It used to stay raw TeX: ``$\\href{java\\tscript:alert(1)}{here}$`` was in the page, inert only until
someone loaded a TeX renderer on it. Now latex2mathml (the ``html`` extra) renders it; the TeX is
disarmed first (``core/mathtext.disarm_tex``: links only to http(s), mailto and ``#name``, judged
without white space or control characters) and the MathML kept to MathML elements and attributes
after (a ``\\text{<script>}`` shows its text). Without latex2mathml the disarmed TeX shows as code.
"""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from nbagent import Conversation, MockConnection, Step, StepSource, StepStatus, StepTarget, StepType
from nbagent.notebook.transcript_html import markdown_html, small_markdown_html

pytest.importorskip("latex2mathml")
pytest.importorskip("markdown_it")
ROOT = Path(__file__).resolve().parents[1]

HOSTILE = [
    "$\\href{java\tscript:alert(1)}{here}$",  # a tab inside the scheme
    "$\\href{java\\tscript:alert(1)}{here}$",  # as the issue wrote it
    "$\\href{JaVaScRiPt:alert(1)}{x}$", "$\\href{data:text/html,<script>alert(1)</script>}{d}$",
    "$\\href{ javascript:alert(1)}{sp}$", "$\\href{java\x00script:alert(1)}{nul}$",
    "$\\url{javascript:alert(1)}$", "\\(\\href{vbscript:msgbox(1)}{v}\\)",
    "$\\text{<script>alert(1)</script>}$", "$\\text{<img src=x onerror=alert(1)>}$",
    "$$\\style{background:url(javascript:alert(1))}{x}$$", "$\\class{x}{y} \\cssId{a}{b}$",
    "$\\def\\x{\\href{javascript:alert(1)}{x}}\\x$", "$\\unicode{x3C}script$",
]


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def elements(page: str) -> Elements:
    parser = Elements()
    parser.feed(page)
    return parser


def assert_safe(page: str) -> None:
    found = elements(page)
    for tag, attrs in found.tags:
        assert tag not in ("script", "img", "iframe", "object", "embed", "style"), (tag, page)
        for name, value in attrs.items():
            assert not name.startswith("on") and name not in ("style", "src"), (tag, name, page)
            if name == "href":
                assert value.startswith(("https:", "http:", "mailto:", "#")), (tag, value, page)
    text = "".join(found.text).lower()
    assert "javascript:" not in text.replace("\t", "") or "\\href" not in text, page  # no disarmed TeX shown raw


@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_math_renders_without_script_or_unsafe_links(payload):
    for render in (markdown_html, small_markdown_html):
        page = render("see " + payload + " now")
        assert "<math" in page or '<code class="math">' in page, (render.__name__, page)  # MathML, or TeX as code
        assert_safe(page)
        assert "\\href" not in page and "$" not in page  # rendered, not left as TeX for a renderer to pick up


def test_math_is_mathml_as_the_widget_shows_it_and_money_and_code_stay_text():
    text = ("The ratio $\\frac{a}{b} < 1$, displayed $$x^2 + y^2$$ and \\(\\alpha\\); "
            "see $\\href{https://example.org/proof}{the proof}$. `$x$` is code; it costs $5 and $10.")
    for render in (markdown_html, small_markdown_html):
        page = render(text)
        found = elements(page)
        maths = [attrs for tag, attrs in found.tags if tag == "math"]
        assert [m.get("display") for m in maths] == ["inline", "block", "inline", "inline"], page
        assert "<mfrac>" in page and "&lt;" in page and "<msup>" in page and "α" in page
        assert ("mrow", {"href": "https://example.org/proof"}) in found.tags
        assert "it costs $5 and $10." in page and "<code>$x$</code>" in page


def test_the_exported_page_and_the_cli_render_the_math(tmp_path):
    answer = "Here: $\\href{java\tscript:alert(1)}{here}$ and $\\sqrt{2}$."
    steps = [Step(step_index=0, type=StepType.TEXT_RESPONSE, source=StepSource.USER, target=StepTarget.UNSPECIFIED,
                  status=StepStatus.DONE, content="math please"),
             Step(step_index=1, type=StepType.TEXT_RESPONSE, source=StepSource.MODEL, target=StepTarget.USER,
                  status=StepStatus.DONE, content=answer, content_delta=answer)]
    conv = Conversation(MockConnection([steps]))
    conv.ask("math please")
    page = conv.to_html()
    assert "<msqrt>" in page and "<mi>h</mi><mi>e</mi><mi>r</mi><mi>e</mi>" in page  # the link's text, as math
    assert "\\href" not in page and "script:" not in page
    assert_safe(page.split("<body>", 1)[1])  # the page's own <style> is in its head
    conv.save(tmp_path / "s.json")
    done = subprocess.run([sys.executable, "-m", "nbagent", "export", str(tmp_path / "s.json"), "--to", "html",
                           "-o", str(tmp_path / "s.html")], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert done.returncode == 0, done.stderr
    exported = (tmp_path / "s.html").read_text(encoding="utf-8")
    assert "<msqrt>" in exported and "\\href" not in exported and "script:" not in exported


def test_without_latex2mathml_the_disarmed_tex_shows_as_code():
    code = ("import sys; sys.modules['latex2mathml'] = None; sys.modules['latex2mathml.converter'] = None\n"
            "from nbagent.notebook.transcript_html import markdown_html\n"
            "print(markdown_html('a $\\\\href{javascript:alert(1)}{here} + \\\\frac{1}{2}$ b'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert '<code class="math">' in done.stdout and "\\frac{1}{2}" in done.stdout
    assert "javascript" not in done.stdout and "\\href" not in done.stdout
