"""``conv.to_html()``'s markdown: markdown-it-py (CommonMark + GFM tables) with raw HTML off and
the widget's link policy, and the small built-in renderer used without it."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from nbagent.notebook.transcript_html import markdown_html, small_markdown_html
from test_transcript import PAYLOADS, dangers

pytest.importorskip("markdown_it")
ROOT = Path(__file__).resolve().parents[1]


class Shape(HTMLParser):
    """The element structure of a fragment, as nested (tag, children) pairs, text dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[list] = [[]]

    def handle_starttag(self, tag, attrs):
        if tag == "br":
            return
        node: list = [tag, []]
        self.stack[-1].append(node)
        self.stack.append(node[1])

    def handle_endtag(self, tag):
        if tag != "br":
            self.stack.pop()


def shape(fragment: str) -> list:
    parser = Shape()
    parser.feed(fragment)
    return parser.stack[0]


def test_tables_render_as_tables_with_their_cells():
    page = markdown_html("| name | total |\n|---|--:|\n| a | 1 |\n| b | 2 |")
    assert shape(page) == [["table", [["thead", [["tr", [["th", []], ["th", []]]]]],
                                      ["tbody", [["tr", [["td", []], ["td", []]]], ["tr", [["td", []], ["td", []]]]]]]]]
    assert "<td>b</td>" in page and 'style="text-align:right">2</td>' in page


def test_nested_and_numbered_lists_keep_their_structure():
    page = markdown_html("3. three\n   - a\n   - b\n4. four")
    assert page.startswith('<ol start="3">')
    assert shape(page) == [["ol", [["li", [["ul", [["li", []], ["li", []]]]]], ["li", []]]]]


def test_headings_sit_under_the_page_headings_and_code_keeps_its_text():
    page = markdown_html("# Top\n\n###### Deep\n\n```python\nx = '<b>'\n```")
    assert "<h3>Top</h3>" in page and "<h6>Deep</h6>" in page
    assert "x = '&lt;b&gt;'" in page and "<b>" not in page


def test_links_follow_the_widget_policy_and_images_become_links():
    page = markdown_html("[ok](https://a.example/x) [rel](./notes.md) [js](javascript:alert(1)) "
                         "[data](data:text/html,x) [ftp](ftp://f.example/a) ![pic](https://e.example/p.png) ![local](/etc/x.png)")
    assert '<a href="https://a.example/x" rel="noopener noreferrer">ok</a>' in page
    assert '<a href="./notes.md" rel="noopener noreferrer">rel</a>' in page
    assert '<a href="https://e.example/p.png" rel="noopener noreferrer">🖼 pic</a>' in page
    assert 'href="javascript' not in page and 'href="data' not in page and "<img" not in page
    assert " ftp " in page and "ftp://" not in page  # a link markdown-it accepts but the policy refuses: its text
    assert page.count("<a ") == 3 and page.count("</a>") == 3 and "local" in page  # a non-http image: its alt text


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_payload_runs_with_either_renderer(payload):
    for page in (markdown_html(payload), small_markdown_html(payload)):
        assert dangers(page) == [], page


def test_without_markdown_it_the_small_renderer_still_gives_a_page():
    code = ("import sys; sys.modules['markdown_it'] = None\n"
            "from nbagent.notebook.transcript_html import markdown_html\n"
            "print(markdown_html('**b** <i>x</i>\\n\\n| a |\\n|---|\\n| 1 |'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert "<strong>b</strong> &lt;i&gt;x&lt;/i&gt;" in done.stdout and "<table>" not in done.stdout
