"""Frames whose notebook table shows its text as written, never typeset as math.

JupyterLab and Notebook 7 run MathJax over HTML outputs, so a message like
``I paid $5 and $10`` or ``\\(x\\)`` in a DataFrame cell turns into math.
pandas' ``display.html.use_mathjax`` option stops that, but for every frame in
the session. :func:`literal_frame` marks one frame instead (a key in
``df.attrs``, which pandas carries to ``head()``, selections, filters, sorts and
merges), and IPython's HTML formatter puts a marked frame's table in a
``<div class="tex2jax_ignore mathjax_ignore">`` (MathJax 3, used by JupyterLab 4
and Notebook 7, skips ``mathjax_ignore``; MathJax 2 skips ``tex2jax_ignore``).

The frame stays a plain ``pd.DataFrame`` (``type(df) is pd.DataFrame``, so
``assert_frame_equal`` against any frame, pickle and Parquet behave as usual);
an unmarked frame displays exactly as pandas shows it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LITERAL", "MATH_IGNORE_CLASSES", "literal_frame", "literal_html"]

LITERAL = "nbagent.literal"  # the df.attrs key that marks a frame
MATH_IGNORE_CLASSES = "tex2jax_ignore mathjax_ignore"


def literal_frame(df: Any) -> Any:
    """Mark ``df`` (a DataFrame) to show as written in a notebook; return it."""
    df.attrs[LITERAL] = True
    _register_html_formatter()
    return df


def literal_html(df: Any) -> str | None:
    """pandas' HTML of ``df``, inside an element MathJax skips when the frame is marked."""
    html = df._repr_html_()
    if html is None or not df.attrs.get(LITERAL):
        return html
    return f'<div class="{MATH_IGNORE_CLASSES}">{html}</div>'


def _register_html_formatter() -> None:
    """In IPython, show DataFrames through :func:`literal_html` (idempotent; no-op elsewhere)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    import pandas as pd

    formatter = shell.display_formatter.formatters["text/html"]
    if formatter.type_printers.get(pd.DataFrame) is not literal_html:
        formatter.for_type(pd.DataFrame, literal_html)
