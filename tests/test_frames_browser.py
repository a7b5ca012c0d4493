"""history_df() in JupyterLab and Notebook 7 + Chromium: a message with dollar signs or ``\\(x\\)`` shows
as written.

JupyterLab 4 (and Notebook 7, built on it) runs MathJax 3 over HTML outputs; a plain DataFrame's table
would show ``$5 and $10`` as the math "5and10". The frames nbagent returns mark their HTML for MathJax to skip. The notebook shows
``conv.history_df()`` after a turn whose prompt and answer hold dollar amounts and ``\\(5+10\\)``, then a
frame derived from it (a column selection and ``head``); then a plain ``pd.DataFrame`` of the same text
(the control: it must be typeset, else the test could not tell MathJax from no MathJax).

Run:  flock /tmp/nbagent-browser.lock env PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_frames_browser.py
Env:  CHROMIUM=/usr/bin/chromium
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, lab_page, lab_with_notebooks, notebook7_page, open_notebook

pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM} (set CHROMIUM=...)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

PROMPT = "I paid $5 and $10"
ANSWER = r"Together that is $15, or \(5+10\)."
CELLS = [
    "from support.streams import StreamConnection\nfrom nbagent import Conversation\nimport pandas as pd\n"
    f"conv = Conversation(StreamConnection([{ANSWER!r}]))\nawait conv.chat_to_completion({PROMPT!r})\n"
    "conv.history_df()",
    "conv.history_df()[['source', 'content']].head(2)",
    "pd.DataFrame(conv.history_df()[['content']])",
]


TABLES = """(sel) => [...document.querySelectorAll(sel + ' .jp-CodeCell')].map(c => {
    const t = c.querySelector('.jp-OutputArea table');
    return t && { text: t.textContent.replace(/\\s+/g, ' '), math: t.querySelectorAll('mjx-container').length }; })"""


# One server and one Chromium per test: Playwright's sync API can't run two at once in a process.
def test_history_df_shows_dollars_and_parentheses_as_written(tmp_path_factory, request):
    with lab_with_notebooks(tmp_path_factory, request, {"frames.ipynb": CELLS}) as srv, lab_page(srv) as page:
        check_tables(page, open_notebook(page, "frames.ipynb"))
        assert page.errors == []


def test_history_df_shows_dollars_as_written_in_notebook7(tmp_path_factory, request):
    with notebook7_page(tmp_path_factory, request, {"frames.ipynb": CELLS}, "frames.ipynb") as page:
        check_tables(page, ".jp-NotebookPanel")  # (Notebook 7 reports a page error of its own: not checked)


def check_tables(page, nb: str) -> None:
    """Run All in the open notebook ``nb`` (a selector); its nbagent frames are plain text, the control is math."""
    ok = page.evaluate("""async (t) => await Promise.race([
        window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true),
        new Promise(r => setTimeout(() => r(false), t))])""", 120_000)
    assert ok, "Run All did not finish"
    # MathJax typesets a moment after the output is attached: wait until the control table is typeset
    page.wait_for_function(f"(sel) => ({TABLES})(sel)[2]?.math > 0", arg=nb, polling=100, timeout=30_000)
    history, derived, control = page.evaluate(TABLES, nb)
    for table in (history, derived):
        assert table is not None
        assert table["math"] == 0, table
        assert PROMPT in table["text"], table["text"]
        assert ANSWER in table["text"], table["text"]
    assert PROMPT not in control["text"], control  # a plain DataFrame's table is typeset: the check can tell
