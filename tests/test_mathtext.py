"""One rule for what is math (nbagent/core/mathtext.py, the same as the widget's js/src/mathtext.js),
and the markdown nbagent writes for Jupyter's MathJax: math in forms it renders, money escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbagent.core.mathtext import escape_dollars, math_markdown, split_math
from nbagent.core.safe_markdown import plain, prose

CASES = json.loads((Path(__file__).parents[1] / "js" / "test" / "math_cases.json").read_text())


@pytest.mark.parametrize("text,pieces", CASES, ids=[c[0] for c in CASES])
def test_the_rule_is_the_widgets(text, pieces):
    assert [list(p) for p in split_math(text)] == pieces


def test_less_than_inside_math_is_tex_not_an_entity():
    md = prose("So $x<y$ and $$a>b$$.")
    assert "&lt;" not in md and "<" not in md  # "&lt;" reached MathJax as text: a red error
    assert r"$x\lt y$" in md and r"$$a\gt b$$" in md


def test_backslash_delimiters_become_dollar_forms_jupyter_renders():
    md = prose(r"inline \(a+b\) and shown \[\sum_k k\] here")
    assert md == r"inline $a+b$ and shown $$\sum_k k$$ here"


def test_a_formula_over_several_lines_stays_one_formula():
    assert prose("before\n$$\nx<y\n$$\nafter") == "before\n$$\nx\\lt y\n$$\nafter"
    assert prose("\\[\na + b\n\\]") == "$$\na + b\n$$"
    assert prose("$$\nnever closed") == "\\\\$\\\\$\nnever closed"  # not math: its dollars are text


def test_dollar_amounts_are_escaped_wherever_nbagent_writes_markdown():
    assert prose("it costs $5 and $10.") == r"it costs \\$5 and \\$10."
    assert prose(r"an escaped \$ too") == r"an escaped \\$ too"
    assert plain("spent $0.05 of $1.00") == r"spent \\$0.05 of \\$1.00"
    assert prose("`$x$` in code") == "`$x$` in code"  # code is never math, and shows its dollars


def test_math_never_carries_markup_for_a_renderer_without_math():
    md = math_markdown('<img src=x onerror="alert(1)">![t](http://x/a.png)', False)
    assert "<" not in md and "![" not in md
    assert prose(r"$\href{javascript:alert(1)}{x}$") == "${x}$"  # the link is gone, its text stays


def test_estimate_markdown_shows_money_as_money():
    from nbagent import Conversation
    from nbagent.core.connection import MockConnection

    est = Conversation(MockConnection([])).estimate("hello")
    md = est._repr_markdown_()
    dollars = [i for i, c in enumerate(md) if c == "$"]
    assert dollars and all(md[i - 2:i] == "\\\\" for i in dollars), md  # each one "\\$": printed "$"
    assert escape_dollars("$1") == "\\\\$1"


@pytest.mark.parametrize("tex, kept", [
    ("\\href{java\tscript:alert(1)}{click}", False),  # a tab inside the scheme
    ("\\href{java\u200bscript:alert(1)}{click}", False),  # an invisible character
    ("\\href {data:text/html,hi}{d}", False),
    ("\\href{#1}{s}", False),  # a macro parameter, not a fragment
    ("\\href{https://example.com}{ok}", True),
    ("\\href{ mailto:a@b.c }{m}", True),
    ("\\href{#results}{s}", True),
])
def test_math_links_go_only_to_safe_targets(tex, kept):
    out = math_markdown(tex, False)
    assert ("\\href" in out) is kept
    if not kept:
        assert "script" not in out.split("}", 1)[0] and out.endswith("}$")  # the link's text stays


def test_math_cannot_define_macros_load_code_or_style_the_page():
    out = math_markdown("\\def\\x#1{\\href{#1}{y}}\\x{javascript:alert(1)} \\require{html} \\style{color:red}{a}"
                        " \\url{javascript:alert(2)}", True)
    for command in ("\\def", "\\require", "\\style", "\\url{javascript"):
        assert command not in out
    assert "\\backslash\\text{def}" in out and "(link removed)" in out
