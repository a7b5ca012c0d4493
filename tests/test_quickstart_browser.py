"""The quick start as a new user meets it: notebooks/quickstart.ipynb in JupyterLab + Chromium, offline with the
demo model -- the first minute run.sh opens on.

Copy the notebook into an isolated server's root, open it, Run All, then check that the chat answered the cell's
question with a tool call, that the usage_df() table had one row, and that the last cell failed on purpose; then
type "fix the error" into the chat like a user: the edit_cell card shows the diff and changes nothing until
Approve, run_cell asks too, and the cell ends fixed with its result. A second test steps through the same notebook
with Shift+Enter: showing the widget and a turn started from a cell must not take the keyboard away from the
notebook (the widget's box only takes focus back after a turn sent from it).

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_quickstart_browser.py
Env:  CHROMIUM=/usr/bin/chromium
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from support.jupyter import CHROMIUM, LAB_ARGS, ROOT, jupyter_server, lab_page

pytestmark = [pytest.mark.browser]

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM} (set CHROMIUM=...)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

from playwright.sync_api import expect  # noqa: E402

QUICKSTART = ROOT / "notebooks" / "quickstart.ipynb"
FIRST_PROMPT = "Which variables does my notebook have?"
TYPED_PROMPT = "fix the error"
BROKEN = 'total = sales["revnue"].sum()'
FIXED = 'total = sales["revenue"].sum()'
FOOTER_TOKENS = re.compile(r"\bin [\d,]+ · (?:.* · )?out [1-9][\d,]*")  # "in 83 · cached 67 · out 12"
LONG = 120_000
TIMINGS: dict = {}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, request):
    """One JupyterLab server (root with copies of the quick start) and one Chromium page for the module."""
    t0 = time.monotonic()
    tmp = tmp_path_factory.mktemp("quickstart")
    root = tmp / "root"
    root.mkdir()
    for name in ("quickstart.ipynb", "quickstart-keyboard.ipynb"):
        shutil.copy(QUICKSTART, root / name)
    with jupyter_server("lab", tmp, root, LAB_ARGS,
                        show_log_on_error=lambda: request.session.testsfailed) as srv, lab_page(srv) as page:
        TIMINGS["server_and_lab_s"] = round(time.monotonic() - t0, 1)
        yield page

# notebook(path) (support/browser_fixtures.py) opens a notebook on this lab; at the end it shuts its kernel down.


def _source(page, index: int) -> str:
    return page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i)"
                         ".sharedModel.getSource()", index)


def _cells(page):
    """[{cell_type, source, outputs}] of the open notebook, from the front end's model."""
    return page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets.map(c => {
        const j = c.model.toJSON();
        return { cell_type: j.cell_type, execution_count: j.execution_count ?? null,
                 source: Array.isArray(j.source) ? j.source.join('') : j.source, outputs: j.outputs || [] }; })""")


def _wait_turns(page, chat, n, timeout):
    """Until the widget shows n finished turns and is not running."""
    page.wait_for_function("""([sel, n]) => { const c = document.querySelector(sel);
        return c && [...c.querySelectorAll('.nba-turn')].filter(t => !t.classList.contains('nba-running')).length >= n
          && !c.classList.contains('nba-is-running'); }""", arg=[chat, n], timeout=timeout, polling=100)


WHERE = """() => { const a = document.activeElement, nb = window.jupyterapp.shell.currentWidget.content;
    return { active_cell: nb.activeCellIndex, mode: nb.mode, focus: a ? a.tagName + '.' + String(a.className) : null,
             counts: nb.widgets.map(c => c.model.type === 'code' ? c.model.executionCount : '-') }; }"""


def _turn(page, chat, i):
    return page.evaluate("""([sel, i]) => { const t = document.querySelectorAll(sel + ' .nba-turn')[i];
        const q = (s) => t?.querySelector(s)?.textContent ?? null;
        return { prompt: q('.nba-prompt'), answer: [...(t?.querySelectorAll('.nba-md') ?? [])].map(e => e.textContent).join('\\n'),
                 footer: q('.nba-footer'), errors: t ? t.querySelectorAll('.nba-error').length : -1 }; }""", [chat, i])


def test_quickstart_run_all_then_fix_the_error_from_the_chat(lab, notebook, tmp_path):
    page = lab
    t_start = time.monotonic()
    nb = notebook("quickstart.ipynb")
    TIMINGS["open_notebook_s"] = round(time.monotonic() - t_start, 1)
    # Run All, as from the Run menu; the promise settles when it stops (at the cell that fails on purpose).
    t0 = time.monotonic()
    page.evaluate("() => { window.__run = window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    chat = f"{nb} .nba-chat"
    page.wait_for_selector(chat, timeout=30_000)
    TIMINGS["widget_visible_s"] = round(time.monotonic() - t0, 1)
    page.evaluate("async () => { await window.__run; return true; }")
    cells = _cells(page)
    broken = next(i for i, c in enumerate(cells) if BROKEN in c["source"])
    page.wait_for_function("(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.executionCount != null"
                           " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
                           arg=broken, timeout=LONG, polling=100)
    TIMINGS["run_all_s"] = round(time.monotonic() - t0, 1)

    # every code cell ran; the only error is the one the notebook makes on purpose
    cells = _cells(page)
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(c["execution_count"] for c in code), [(c["source"][:40], c["execution_count"]) for c in code]
    errors = [(c["source"][:60], o.get("ename"), o.get("evalue"))
              for c in code for o in c["outputs"] if o.get("output_type") == "error"]
    assert errors == [(BROKEN + "\ntotal", "KeyError", "'revnue'")], errors

    # the chat: the cell's question, answered after a list_variables call, and a footer with token counts
    _wait_turns(page, chat, 1, timeout=30_000)
    first = _turn(page, chat, 0)
    assert first["prompt"].strip() == FIRST_PROMPT, first
    assert "sales" in first["answer"] and first["errors"] == 0, first
    assert FOOTER_TOKENS.search(first["footer"] or ""), first["footer"]
    usage_cell = next(c for c in code if "usage_df()" in c["source"])
    html = "".join(str(o.get("data", {}).get("text/html", "")) for o in usage_cell["outputs"])
    rows = page.evaluate("""(html) => { const d = new DOMParser().parseFromString(html, 'text/html');
        return [...d.querySelectorAll('table tbody tr')].length; }""", html)
    assert rows == 1, f"usage_df() showed {rows} rows, expected 1 (one finished turn)"

    # now type into the chat like a user: the diff waits for Approve, then the run does
    expect.set_options(timeout=LONG)
    try:
        box = page.locator(f"{chat} .nba-input")
        box.scroll_into_view_if_needed()
        box.click()
        box.press_sequentially(TYPED_PROMPT)
        t1 = time.monotonic()
        box.press("Enter")
        edit = page.locator(f"{chat} .nba-tool").filter(has=page.locator(".nba-tool-name", has_text="edit_cell"))
        expect(edit).to_have_attribute("data-status", "waiting")
        TIMINGS["diff_shown_s"] = round(time.monotonic() - t1, 1)
        expect(edit.locator(".nba-diff")).to_contain_text(BROKEN)
        expect(edit.locator(".nba-diff")).to_contain_text(FIXED)
        assert _source(page, broken).startswith(BROKEN)  # nothing changed before Approve
        edit.locator(".nba-approve").click()
        run = page.locator(f"{chat} .nba-tool").filter(has=page.locator(".nba-tool-name", has_text="run_cell"))
        expect(run).to_have_attribute("data-status", "waiting")
        assert _source(page, broken).startswith(FIXED)
        run.locator(".nba-approve").click()
        expect(page.locator(f"{chat} .nba-md", has_text="Fixed: the cell runs clean now")).to_be_visible()
    finally:
        expect.set_options(timeout=5_000)
    TIMINGS["first_minute_s"] = round(time.monotonic() - t_start, 1)
    fixed = _cells(page)[broken]
    assert fixed["outputs"] and not [o for o in fixed["outputs"] if o.get("output_type") == "error"], fixed
    assert "415" in json.dumps(fixed["outputs"]), fixed["outputs"]  # 120 + 135 + 160, the cell's own output

    page_errors = [e for e in page.errors if "nba" in e or "nbagent" in e or "widget" in e.lower()]
    assert not page_errors, page_errors
    page.locator(chat).screenshot(path=str(tmp_path / "quickstart-widget.png"))
    TIMINGS["run_all_test_s"] = round(time.monotonic() - t_start, 1)


def test_quickstart_shift_enter_steps_through_the_cells(lab, notebook):
    """A user stepping through the quick start with Shift+Enter reaches the usage_df() cell: neither displaying
    the widget nor the chat_to_completion cell's turn takes the keyboard away from the notebook."""
    page = lab
    nb = notebook("quickstart-keyboard.ipynb")
    cells = _cells(page)
    ask = next(i for i, c in enumerate(cells) if "chat_to_completion" in c["source"])
    usage = next(i for i, c in enumerate(cells) if "usage_df()" in c["source"])
    page.locator(f"{nb} .jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")  # command mode, first cell active
    ran_or_lost = """(i) => { const w = window.jupyterapp.shell.currentWidget, c = w.content.widgets[i];
        if (document.activeElement?.classList.contains('nba-input')) return 'focus lost';
        return (c.model.type !== 'code' || (c.model.executionCount != null && w.sessionContext.session.kernel.status === 'idle'))
               && 'ran'; }"""
    for i in range(usage + 1):
        page.keyboard.press("Shift+Enter")
        res = page.wait_for_function(ran_or_lost, arg=i, timeout=0, polling=50).json_value()  # a cell may ask the model
        if i == ask:  # the turn's end arrives with (or just after) the cell's end
            _wait_turns(page, f"{nb} .nba-chat", 1, timeout=30_000)
            page.wait_for_timeout(300)
            if page.evaluate("() => document.activeElement?.classList.contains('nba-input')"):
                res = "focus lost"
        assert res == "ran", (f"Shift+Enter on cell {i} ({cells[i]['source'][:30]!r}): the widget's text box took "
                              f"the keyboard focus; {json.dumps(page.evaluate(WHERE))}")


def teardown_module(module):
    print("\nTIMINGS", json.dumps(TIMINGS, ensure_ascii=False))
