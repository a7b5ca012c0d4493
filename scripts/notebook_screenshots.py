"""Run the quick start, teaching and usage notebooks as a user meets them, in JupyterLab, Notebook 7
and marimo (headless Chromium), and take screenshots to look at.

    flock /tmp/nbagent-browser.lock env PYTHONPATH=$PWD .venv/bin/python scripts/notebook_screenshots.py OUT [--docs docs/images]

For each host and notebook: Run All, then print what a reader would notice (cells that did not run,
errors and stderr, "Error displaying widget", math typeset inside DataFrame tables, page errors) and
write viewport screenshots scrolled through the notebook into OUT/<host>/. marimo has no copy of the
.ipynb notebooks: it runs a small app with the quick start's and the teaching notebook's first cells.
With ``--docs DIR``, also write the screenshots the docs show (DOCS_SHOTS) into DIR.
The quick start uses the demo model; the marimo app's first chat uses the offline local model
(scripts/setup.sh installs it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.jupyter import (LAB_ARGS, NB7_ARGS, chromium_page, die_with_parent, free_port,  # noqa: E402
                             isolated_env, jupyter_server, stop_process_group, wait_restored)

NOTEBOOKS = ["quickstart.ipynb", "teaching.ipynb", "usage_analysis.ipynb"]
# (host, notebook, which element, index among matches, file name in --docs, chat turn to scroll to the top)
DOCS_SHOTS = [
    ("lab", "teaching.ipynb", ".nba-chat", 0, "teaching-widget-jupyterlab.png", 1),
    ("lab", "teaching.ipynb", ".jp-Cell:has(table)", 1, "history-df-jupyterlab.png", None),
    ("nb7", "quickstart.ipynb", ".nba-chat", 0, "quickstart-notebook7.png", None),
]

CHECKS = r"""() => { const w = window.jupyterapp.shell.currentWidget, n = w.node;
  const cells = w.content.widgets.map((c, i) => { const j = c.model.toJSON(); const outs = j.outputs || [];
    return { i, type: j.cell_type, ran: !!j.execution_count,
             errors: outs.filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue),
             stderr: outs.filter(o => o.output_type === 'stream' && o.name === 'stderr').map(o => String(o.text).slice(0, 300)) }; });
  return { problem_cells: cells.filter(c => c.errors.length || c.stderr.length || (c.type === 'code' && !c.ran)),
    widget_errors: [...n.querySelectorAll('.jp-OutputArea-output')]
        .filter(e => /Error displaying widget|Failed to load model/.test(e.textContent)).length,
    math_in_tables: [...n.querySelectorAll('.jp-OutputArea table mjx-container')].length,
    chat_widgets: n.querySelectorAll('.nba-chat').length,
    widget_math: n.querySelectorAll('.nba-chat .nba-math').length }; }"""

MARIMO_APP = textwrap.dedent('''
    import marimo

    app = marimo.App(width="full")


    @app.cell
    def _():
        import marimo as mo
        from nbagent import Agent, tool
        return Agent, mo, tool


    @app.cell
    def _(Agent, mo):
        qs = Agent(max_tokens=200, temperature=0)  # the offline local model
        mo.vstack([mo.md(f"quick start: `{qs.model}`"), mo.ui.anywidget(qs.widget())])
        return (qs,)


    @app.cell
    async def _(qs):
        qs_resp = await qs.conversation.chat_to_completion("What is the capital of France?")
        qs.conversation.history_df()[["turn", "type", "source", "status", "content"]]
        return


    @app.cell
    def _(Agent, mo, tool):
        @tool
        def solve_quadratic(a: float, b: float, c: float) -> str:
            """Solve a x^2 + b x + c = 0 and give the roots in LaTeX."""
            d = b * b - 4 * a * c
            r1, r2 = (-b - d ** 0.5) / (2 * a), (-b + d ** 0.5) / (2 * a)
            return rf"$x = \\frac{{-b \\pm \\sqrt{{\\Delta}}}}{{2a}}$, so $x_1 = {r1:g}$ and $x_2 = {r2:g}$"

        agent = Agent(model="demo", tools=[solve_quadratic])  # the teaching notebook's demo model
        conv = agent.conversation
        mo.vstack([mo.md("teaching: the demo model"), mo.ui.anywidget(agent.widget())])
        return (conv,)


    @app.cell
    async def _(conv):
        await conv.chat_to_completion("Please solve_quadratic with a=1, b=-5, c=6")
        conv.history_df()[["turn", "type", "source", "status", "content", "tool_names"]]
        return


    if __name__ == "__main__":
        app.run()
''')


NOTEBOOK_SCROLLER = """() => window.jupyterapp.shell.currentWidget.node.querySelector('.jp-WindowedPanel-outer')
    || document.scrollingElement"""
# marimo's app scrolls in an inner element: the one with the most to scroll
PAGE_SCROLLER = """() => [...document.querySelectorAll('*')].filter(e => /auto|scroll/.test(getComputedStyle(e).overflowY))
    .reduce((a, e) => (e.scrollHeight - e.clientHeight > a.scrollHeight - a.clientHeight ? e : a),
            document.scrollingElement)"""


def scroll_shots(page, prefix: str, out: Path, scroller: str = NOTEBOOK_SCROLLER) -> list[str]:
    """Viewport screenshots scrolled through the page's ``scroller`` element, top to bottom."""
    paths = []
    page.evaluate(f"() => {{ window.__sc = ({scroller})(); window.__sc.scrollTop = 0; }}")
    for k in range(80):
        page.wait_for_timeout(300)
        path = out / f"{prefix}-{k:02d}.png"
        page.screenshot(path=str(path))
        paths.append(str(path))
        if page.evaluate("""() => { const s = window.__sc, before = s.scrollTop;
                s.scrollTop = before + s.clientHeight - 80; return s.scrollTop === before; }"""):
            return paths
    return paths


def element_shot(page, selector: str, index: int, path: Path, turn: int | None = None) -> None:
    """A screenshot of the ``index``-th ``selector``; for a chat widget, its ``turn`` scrolled to the top."""
    loc = page.locator(selector).nth(index)
    loc.scroll_into_view_if_needed()
    if turn is not None:
        loc.evaluate("""(chat, i) => { const t = chat.querySelectorAll('.nba-turn')[i];
            const box = t.closest('.nba-turns');
            box.scrollTop += t.getBoundingClientRect().top - box.getBoundingClientRect().top; }""", turn)
    page.wait_for_timeout(500)
    loc.screenshot(path=str(path))


def run_jupyter(host: str, out: Path, docs: Path | None) -> dict:
    """Run All in each notebook on one ``host`` (lab | nb7) server; the checks per notebook."""
    tmp = Path(tempfile.mkdtemp(prefix=f"nbshots-{host}-"))
    root = tmp / "root"
    root.mkdir()
    for nb in NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / nb, root / nb)
    app, args = ("lab", LAB_ARGS) if host == "lab" else ("notebook", NB7_ARGS)
    report = {}
    with jupyter_server(app, tmp, root, args) as srv:
        for nb in NOTEBOOKS:
            url = (f"{srv['base']}/lab/tree/{nb}?reset&token={srv['token']}" if host == "lab"
                   else f"{srv['base']}/notebooks/{nb}?token={srv['token']}")
            with chromium_page(url) as page:
                page.set_viewport_size({"width": 1280, "height": 1000})
                wait_restored(page)
                page.wait_for_function("""(path) => { const w = window.jupyterapp.shell.currentWidget;
                    return w && w.context?.path === path && w.sessionContext?.session?.kernel?.status === 'idle'; }""",
                                       arg=nb, polling=100, timeout=60_000)
                finished = page.evaluate("""async (t) => await Promise.race([
                    window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true),
                    new Promise(r => setTimeout(() => r(false), t))])""", 300_000)
                page.wait_for_timeout(3000)  # MathJax and the widgets' last syncs
                checks = page.evaluate(CHECKS)
                checks.update(run_all_finished=finished, page_errors=page.errors,
                              shots=scroll_shots(page, nb.removesuffix(".ipynb"), out))
                for h, name, selector, index, file, turn in DOCS_SHOTS:
                    if docs and (h, name) == (host, nb):
                        element_shot(page, selector, index, docs / file, turn)
                report[nb] = checks
                page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.shutdown(); }")
    return report


def run_marimo(out: Path, docs: Path | None) -> dict:
    """``marimo run`` of MARIMO_APP; the checks and a full-page screenshot."""
    tmp = Path(tempfile.mkdtemp(prefix="nbshots-marimo-"))
    (tmp / "app.py").write_text(MARIMO_APP)
    env = isolated_env(tmp)
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        env[var] = str(tmp / var.lower())
    port = free_port()
    cmd = [str(Path(sys.executable).with_name("marimo")), "run", "app.py", "--headless", "--host", "127.0.0.1",
           "--port", str(port), "--no-token", "--no-sandbox"]
    with open(tmp / "marimo.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=die_with_parent)
        try:
            url = f"http://127.0.0.1:{port}/"
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise RuntimeError((tmp / "marimo.log").read_text()[-3000:])
                try:
                    if urllib.request.urlopen(url, timeout=1).status == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError("marimo run not ready after 60 s")
                time.sleep(0.2)
            with chromium_page(url) as page:
                page.set_viewport_size({"width": 1280, "height": 1000})
                page.locator(".nba-chat").first.wait_for(state="attached")
                for _ in range(240):  # both turns finished (Playwright's CSS engine pierces shadow roots)
                    if page.locator(".nba-turn:not(.nba-running)").count() >= 2:
                        break
                    page.wait_for_timeout(500)
                page.wait_for_timeout(3000)
                checks = {"chat_widgets": page.locator(".nba-chat").count(),
                          "finished_turns": page.locator(".nba-turn:not(.nba-running)").count(),
                          "widget_math": page.locator(".nba-chat .nba-math").count(),
                          "widget_errors": page.locator(".nba-chat .nba-error").count(),
                          "page_errors": page.errors}
                if docs:
                    element_shot(page, ".nba-chat", 1, docs / "teaching-widget-marimo.png")
                checks["shots"] = scroll_shots(page, "app", out, PAGE_SCROLLER)
                return checks
        finally:
            stop_process_group(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the screenshots")
    parser.add_argument("--docs", type=Path, help="also write the docs' screenshots into this folder (docs/images)")
    parser.add_argument("--hosts", default="lab,nb7,marimo", help="comma-separated: lab, nb7, marimo")
    args = parser.parse_args()
    for host in args.hosts.split(","):
        out = args.out / host
        out.mkdir(parents=True, exist_ok=True)
        report = run_marimo(out, args.docs) if host == "marimo" else {"notebooks": run_jupyter(host, out, args.docs)}
        (out / "checks.json").write_text(json.dumps(report, indent=1))
        print(host, json.dumps(report, default=str)[:4000], flush=True)


if __name__ == "__main__":
    main()
