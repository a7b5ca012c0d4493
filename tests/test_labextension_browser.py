"""nbagent's front-end extension (js/labextension, prebuilt into nbagent/labextension/) in real JupyterLab 4
and Notebook 7 with Chromium: listed as enabled, loads with no console errors, draws the provenance badge
from cell metadata with no kernel (also after close and reopen), and *Ask nbagent* on an error output
starts a turn that fixes the cell with no chat cell in the notebook beforehand.

The servers find the committed build through JUPYTER_PATH (a labextensions/jupyter-nbagent link in a
temporary folder), as an installed wheel's share/jupyter/labextensions/ would give it.

Run:  flock /tmp/nbagent-browser.lock .venv/bin/python -m pytest -q tests/test_labextension_browser.py
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from support.jupyter import (CHROMIUM, ROOT, isolated_env, lab_page, lab_with_notebooks,
                             notebook7_with_notebooks, open_notebook, require_notebook7, run_cell, shot, wait_restored)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

if not Path(CHROMIUM).exists():
    pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")

from playwright.sync_api import expect  # noqa: E402

BUILD = ROOT / "nbagent" / "labextension"
SETUP = "sales = {'revenue': 120}"
BROKEN = 'total = sales["revnue"]'
FIXED = 'total = sales["revenue"]'
LONG = 120_000


def action(kind: str, source: str, turn: int, **extra) -> dict:
    """One recorded action as nbagent/notebook/provenance.py writes it (code_sha256 of ``source``)."""
    return {"action": kind, "session_id": "s1", "turn": turn, "model": "demo", "call_id": f"call_{turn}",
            "approved_by": "user", "code_sha256": hashlib.sha256(source.encode()).hexdigest(), "at": 1.7e9, **extra}


def notebook_file(cells: list[tuple[str, list[dict]]], kernel: bool) -> str:
    metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}} if kernel else {}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": [
        {"cell_type": "code", "id": f"c{i}", "execution_count": None, "outputs": [], "source": source,
         "metadata": {"nbagent": {"actions": actions}} if actions else {}}
        for i, (source, actions) in enumerate(cells)]})


HOSTILE = "<img src=x onerror=window.pwned=1>"
# the diffs the records hold, as provenance.source_diff writes them (#43.3); the edit's carries markup: shown as text
INSERT_DIFF = "--- before\n+++ after\n@@ -0,0 +1 @@\n+y = x"
EDIT_DIFF = f"--- before\n+++ after\n@@ -1 +1 @@\n-y = x\n+y = x + 1  # café ✓ {HOSTILE}"
# the agent inserted cell 1 in turn 1 (recorded 0) and edited it in turn 2; the user has changed cell 2 since
PROVENANCE = [("x = 1", []),
              ("y = x + 1  # café ✓", [action("inserted", "y = x", 0, diff=INSERT_DIFF),
                                       action("edited", "y = x + 1  # café ✓", 1, diff=EDIT_DIFF)]),
              ("z = y * 3  # changed by hand", [action("inserted", "z = y * 2", 1, author="claude-code")]),
              # a hostile or broken record (notebook content is untrusted): bad entries skipped, text shown as text
              ("w = 0", [{"action": "<img src=x onerror=window.pwned=1>"}, "junk",
                         {"action": "ran", "author": HOSTILE, "turn": "7", "model": 5, "code_sha256": None}])]


@pytest.fixture(scope="module")
def extension_path(tmp_path_factory) -> Path:
    """A JUPYTER_PATH folder whose labextensions/jupyter-nbagent is the committed build."""
    folder = tmp_path_factory.mktemp("jupyter_path")
    (folder / "labextensions").mkdir()
    (folder / "labextensions" / "jupyter-nbagent").symlink_to(BUILD, target_is_directory=True)
    return folder


def write_notebooks(root: Path) -> None:
    (root / "prov.ipynb").write_text(notebook_file(PROVENANCE, kernel=False))
    (root / "error.ipynb").write_text(notebook_file([(SETUP, []), (BROKEN, [])], kernel=True))


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory, request, extension_path):
    with lab_with_notebooks(tmp_path_factory, request, {"empty.ipynb": ["1"]},
                            env={"JUPYTER_PATH": str(extension_path), "NBAGENT_MODEL": "demo"}) as srv:
        write_notebooks(srv["root"])
        yield srv


@pytest.fixture(scope="module")
def lab(lab_server):
    with lab_page(lab_server) as page:
        page.console_errors = []
        page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
        page.reload()
        wait_restored(page)
        yield page


def test_labextension_list_shows_it_enabled(tmp_path, extension_path):
    env = {**isolated_env(tmp_path), "JUPYTER_PATH": str(extension_path)}
    listing = subprocess.run([str(Path(ROOT / ".venv" / "bin" / "jupyter")), "labextension", "list"], env=env,
                             capture_output=True, text=True, timeout=60)
    line = next((ln for ln in (listing.stdout + listing.stderr).splitlines() if "jupyter-nbagent" in ln), "")
    assert "enabled" in line and "OK" in line, listing.stdout + listing.stderr


def test_extension_loads_without_console_errors(lab):
    plugins = lab.evaluate("() => window.jupyterapp.hasPlugin('jupyter-nbagent:plugin')")
    assert plugins, "the extension's plugin is not registered"
    assert lab.evaluate("() => window.jupyterapp.isPluginActivated('jupyter-nbagent:plugin')")
    assert lab.evaluate("() => window.jupyterapp.commands.hasCommand('nbagent:ask-about-error')")
    # its shortcut is no other command's
    taken = lab.evaluate("""() => { const all = window.jupyterapp.commands.keyBindings;
        const ours = all.find(b => b.command === 'nbagent:ask-about-error');
        return all.filter(b => b.keys.join(' ') === ours.keys.join(' ')).map(b => b.command); }""")
    assert taken == ["nbagent:ask-about-error"], taken
    assert not lab.console_errors, lab.console_errors
    assert not lab.errors, lab.errors


def open_without_kernel(page, path: str) -> str:
    """Open ``path`` (no kernelspec) and answer JupyterLab's kernel dialog with No Kernel; the panel's selector."""
    wid = page.evaluate("""async (path) => {
        const w = await window.jupyterapp.commands.execute('docmanager:open', { path, factory: 'Notebook' });
        await w.context.ready; return w.id; }""", path)
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for()
    page.keyboard.press("Escape")  # the kernel selection dialog: Escape keeps "No Kernel"
    expect(dialog).to_have_count(0)
    return f'[id="{wid}"]'


def badges(page, panel: str):
    return page.locator(f"{panel} .jp-Cell .nba-prov-badge")


def check_badges(page, panel: str) -> None:
    found = badges(page, panel)
    expect(found).to_have_count(3)
    expect(found.nth(0)).to_have_text("edited by nbagent · turn 2 · demo")  # turns counted from 1
    expect(found.nth(1)).to_have_text("written by claude-code · turn 2 · demo · changed since")
    expect(found.nth(2)).to_have_text(f"run by {HOSTILE}")
    assert page.evaluate("() => window.pwned") is None and page.locator(f"{panel} .nba-prov img").count() == 0
    assert page.locator(f"{panel} .jp-Cell").nth(0).locator(".nba-prov").count() == 0
    # a button a screen reader names, opening the list of actions
    first = found.nth(0)
    expect(first).to_have_attribute("aria-expanded", "false")
    assert "Cell provenance: edited by nbagent" in first.get_attribute("aria-label")
    first.focus()
    page.keyboard.press("Enter")
    expect(first).to_have_attribute("aria-expanded", "true")
    listing = page.locator(f"#{first.get_attribute('aria-controls')} li")
    expect(listing).to_have_count(2)
    expect(listing.nth(0)).to_contain_text("inserted by nbagent · turn 1 · demo · approved by user")
    expect(listing.nth(1)).to_contain_text("edited by nbagent · turn 2")
    # each write shows its diff under it, as text, its lines marked added / removed, named for a screen reader
    diff = listing.nth(1).locator("pre.nba-prov-diff")
    expect(diff).to_have_attribute("aria-label", "diff of the edit in turn 2")
    assert diff.inner_text().rstrip("\n") == EDIT_DIFF
    expect(diff.locator(".nba-prov-del")).to_have_text("-y = x")
    expect(diff.locator(".nba-prov-add")).to_have_text(f"+y = x + 1  # café ✓ {HOSTILE}")
    expect(listing.nth(0).locator("pre.nba-prov-diff")).to_have_attribute("aria-label", "diff of the insert in turn 1")
    expect(listing.nth(0).locator(".nba-prov-add")).to_have_text("+y = x")


AXE = ROOT / "js" / "node_modules" / "axe-core" / "axe.min.js"  # axe-core, a js/ dev dependency (offline)


def axe_violations(page, selector: str) -> list:
    """axe-core's WCAG 2 A/AA rules on the first element matching ``selector``, in JupyterLab's light
    and dark themes: [(theme, rule id, impact, failure summary)]."""
    assert AXE.exists(), "axe-core is missing: run `npm ci` in js/ (scripts/test.sh does)"
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(path=str(AXE))
    found = []
    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        page.evaluate("async (t) => { await window.jupyterapp.commands.execute('apputils:change-theme', {theme: t}); }",
                      theme)
        # JupyterLab sets the body's theme attribute once the theme's stylesheet has loaded
        page.wait_for_function("(light) => document.body.dataset.jpThemeLight === light",
                               arg=str(theme.endswith("Light")).lower())
        # and the splash it shows meanwhile is gone (a second switch under it makes JupyterLab remove it twice)
        page.wait_for_function("() => !document.getElementById('jupyterlab-splash')")
        found += [(theme, *v) for v in page.evaluate("""async (s) => {
            const r = await window.axe.run(document.querySelector(s),
                { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
            return r.violations.map(v => [v.id, v.impact, v.nodes[0].failureSummary]); }""", selector)]
    return found


def test_badge_shows_without_a_kernel_and_after_reopen(lab, tmp_path):
    for again in range(2):  # open, close, open again
        panel = open_without_kernel(lab, "prov.ipynb")
        check_badges(lab, panel)
        if not again:  # the docs' picture (NBAGENT_SHOTS=docs/images)
            shot(lab, f"{panel} .jp-Notebook", "labextension-badges.png", tmp_path)
        assert lab.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session") is None
        assert not axe_violations(lab, f"{panel} .nba-prov")  # the badge and its open list of actions
        lab.evaluate("""async () => { const w = window.jupyterapp.shell.currentWidget;
            w.context.model.dirty = false; w.dispose(); }""")
    assert not lab.console_errors, lab.console_errors


def ask_nbagent_flow(page, panel: str, *, shortcut: bool = False, shots: Path | None = None) -> None:
    """Run the notebook's cells, press Ask nbagent on the error (its button, or with ``shortcut`` its keys
    on the selected cell): a chat cell comes below it and its turn proposes the fix (the demo model);
    approved, the cell holds the fixed code."""
    expect.set_options(timeout=LONG)
    try:
        run_cell(page, 0)
        run_cell(page, 1)
        assert page.locator(f"{panel} .nba-chat").count() == 0  # no chat in the notebook beforehand
        ask = page.locator(f"{panel} .jp-Cell").nth(1).locator(".nba-ask")
        expect(ask).to_have_attribute("aria-label", "Ask nbagent to fix this error")
        assert not axe_violations(page, f"{panel} .nba-ask")
        if shortcut:
            page.locator(f"{panel} .jp-Cell").nth(1).locator(".jp-InputPrompt").click()  # selects it, command mode
            page.keyboard.press("Control+Shift+Y")
        else:
            # the cell's context menu has it too
            page.locator(f"{panel} .jp-Cell").nth(1).locator(".jp-InputArea-editor").click(button="right")
            expect(page.locator(".lm-Menu .lm-Menu-itemLabel", has_text="Ask nbagent to fix this error")).to_be_visible()
            page.keyboard.press("Escape")
            expect(page.locator(".lm-Menu")).to_have_count(0)
            if shots:  # the docs' picture (NBAGENT_SHOTS=docs/images)
                shot(page, f"{panel} .jp-Cell:nth-child(2)", "labextension-error-button.png", shots)
            ask.click()
        chat = page.locator(f"{panel} .jp-Cell").nth(2).locator(".nba-chat")
        expect(chat).to_be_visible()
        expect(chat.locator(".nba-prompt").first).to_contain_text("fix the error in this cell")
        edit = chat.locator(".nba-tool").filter(has=page.locator(".nba-tool-name", has_text="edit_cell"))
        expect(edit).to_have_attribute("data-status", "waiting")
        expect(edit.locator(".nba-diff")).to_contain_text(FIXED)
        edit.locator(".nba-approve").click()
        page.wait_for_function("""(fixed) => window.jupyterapp.shell.currentWidget.content.model.cells.get(1)
            .sharedModel.getSource() === fixed""", arg=FIXED)
        # the edit's record in the cell's metadata is drawn at once: the agent's first turn is turn 1
        expect(page.locator(f"{panel} .jp-Cell").nth(1).locator(".nba-prov-badge")).to_have_text(
            "edited by nbagent · turn 1 · demo")
    finally:
        expect.set_options(timeout=5_000)


def test_ask_nbagent_on_an_error_starts_a_fixing_turn(lab, tmp_path):
    panel = open_notebook(lab, "error.ipynb")
    ask_nbagent_flow(lab, panel, shots=tmp_path)
    assert not lab.errors, lab.errors


@pytest.fixture(scope="module")
def nb7(tmp_path_factory, request, extension_path, lab):
    """Notebook 7 showing error.ipynb with an idle kernel, in a second page of the Lab page's Chromium."""
    require_notebook7()
    notebooks = {"error.ipynb": [SETUP, BROKEN]}
    with notebook7_with_notebooks(tmp_path_factory, request, notebooks,
                                  env={"JUPYTER_PATH": str(extension_path), "NBAGENT_MODEL": "demo"}) as srv:
        (srv["root"] / "prov.ipynb").write_text(notebook_file(PROVENANCE, kernel=True))
        page = lab.context.new_page()
        page.errors, page.console_errors = [], []
        page.on("pageerror", lambda e: page.errors.append(f"{e}\n{e.stack}"))
        page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
        try:
            page.goto(f"{srv['base']}/notebooks/error.ipynb?token={srv['token']}")
            wait_restored(page)
            page.wait_for_function("""() => { const w = window.jupyterapp.shell.currentWidget;
                return w && w.sessionContext?.session?.kernel?.status === 'idle'; }""", polling=50)
            yield page, srv
        finally:
            page.close()


# Notebook 7.6.5 (JupyterLab 4.6 packages) throws this as every page opens, with every labextension disabled,
# with no settings at all, and not in JupyterLab: @jupyterlab/shortcuts-extension's pluginChanged handler reads
# registry.plugins['@jupyterlab/shortcuts-extension:shortcuts'].schema when docmanager-extension's settings
# load first (a start-up race; jupyter/notebook#7862, open). An unhandled rejection, no dialog; shortcuts work.
UPSTREAM_SCHEMA_RACE = "Cannot read properties of undefined (reading 'schema')"


def notebooks_own_race(error: str) -> bool:
    """Whether a page error (message and stack) is Notebook 7's start-up race: that message, thrown with
    every frame in Notebook's own bundles (/static/notebook/), none in a labextension's."""
    message, _, stack = error.partition("\n")
    frames = [ln for ln in stack.splitlines() if ln.strip().startswith("at ") and "http" in ln]
    return message == UPSTREAM_SCHEMA_RACE and bool(frames) and all("/static/notebook/" in ln for ln in frames)


def test_a_notebook_opens_in_jupyterlab_with_no_error_or_dialog(lab, notebook):
    notebook("empty.ipynb")
    expect(lab.locator(".jp-Dialog")).to_have_count(0)
    assert not lab.console_errors, lab.console_errors
    assert not lab.errors, lab.errors


def test_a_notebook_opens_in_notebook7_with_no_error_or_dialog_but_notebooks_own(nb7):
    page, _ = nb7
    assert page.evaluate("() => window.jupyterapp.isPluginActivated('jupyter-nbagent:plugin')")
    expect(page.locator(".jp-Dialog")).to_have_count(0)
    assert not page.console_errors, page.console_errors
    assert not [e for e in page.errors if not notebooks_own_race(e)], page.errors


def test_notebook7_badge_and_ask_nbagent(nb7):
    page, srv = nb7
    assert page.evaluate("() => window.jupyterapp.isPluginActivated('jupyter-nbagent:plugin')")
    ask_nbagent_flow(page, ".jp-NotebookPanel", shortcut=True)
    page.goto(f"{srv['base']}/notebooks/prov.ipynb?token={srv['token']}")
    wait_restored(page)
    check_badges(page, ".jp-NotebookPanel")
    others = [e for e in page.errors if not notebooks_own_race(e)]  # every page load throws Notebook's own
    assert not others, others
