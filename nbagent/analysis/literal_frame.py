"""``LiteralFrame``: a pandas DataFrame whose notebook table shows its text as written.

JupyterLab and Notebook 7 run MathJax over HTML outputs, so a message like
``I paid $5 and $10`` or ``\\(x\\)`` in a DataFrame cell turns into math.
pandas' ``display.html.use_mathjax`` option stops that, but for every frame
in the session. A ``LiteralFrame`` stops it for itself and the frames derived
from it (``head()``, selections, ``groupby`` results): its HTML sits in a
``<div class="tex2jax_ignore mathjax_ignore">`` (MathJax 3, used by JupyterLab
4 and Notebook 7, skips ``mathjax_ignore``; MathJax 2 skips ``tex2jax_ignore``).
Everything else is plain pandas: ``isinstance(df, pd.DataFrame)`` holds, and
Parquet, CSV and pickle round trips work (a read-back frame is a plain one).

This module imports pandas at the top: import it only where pandas is needed.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["LiteralFrame", "MATH_IGNORE_CLASSES"]

MATH_IGNORE_CLASSES = "tex2jax_ignore mathjax_ignore"


class LiteralFrame(pd.DataFrame):
    """A ``pd.DataFrame`` whose HTML display is never typeset as math."""

    _metadata: list[str] = []

    @property
    def _constructor(self):
        return LiteralFrame

    def _repr_html_(self) -> str | None:
        html = super()._repr_html_()
        return None if html is None else f'<div class="{MATH_IGNORE_CLASSES}">{html}</div>'
