"""The name nbagent is published under on the package index, and the install lines that name it.

The import name is ``nbagent``; the distribution is ``jupyter-nbagent`` because ``nbagent`` on the
index is another project. Every message that says what to ``pip install`` is built here.
"""

from __future__ import annotations

DISTRIBUTION = "jupyter-nbagent"


def install_hint(extra: str) -> str:
    """``pip install "jupyter-nbagent[extra]"``: the command that adds one extra."""
    return f'pip install "{DISTRIBUTION}[{extra}]"'
