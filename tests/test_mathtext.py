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
    assert "java\u200bscript" in prose(r"$\href{javascript:alert(1)}{x}$")


def test_estimate_markdown_shows_money_as_money():
    from nbagent import Conversation
    from nbagent.core.connection import MockConnection

    est = Conversation(MockConnection([])).estimate("hello")
    md = est._repr_markdown_()
    dollars = [i for i, c in enumerate(md) if c == "$"]
    assert dollars and all(md[i - 2:i] == "\\\\" for i in dollars), md  # each one "\\$": printed "$"
    assert escape_dollars("$1") == "\\\\$1"
