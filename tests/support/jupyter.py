"""Shared helpers for the real-browser widget tests (see test_widget_browser.py).

Start an isolated Jupyter server (JupyterLab or Notebook 7) or ``marimo run`` in a temporary folder,
wait for it, and tear it down with its kernels; the chromium path and launch arguments for Playwright.
Each server runs from this interpreter with this checkout on the path, or from another venv (``venv=``)
that sees nothing of the checkout.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from support import tiers

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is tests/support/jupyter.py)
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# JupyterLab front-end settings shared by Lab and Notebook 7 (both read JUPYTERLAB_SETTINGS_DIR):
# no news toast over the page, every cell rendered (no virtual scrolling).
FRONTEND_SETTINGS = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
}


def nb_json(cells):
    """A minimal nbformat-4 notebook (python3 kernel) of code cells."""
    return {"nbformat": 4, "nbformat_minor": 4,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c}
                      for c in cells]}


def require_lab_browser() -> None:
    """Skip the calling test module where chromium, Playwright or JupyterLab is missing."""
    import pytest

    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM}", allow_module_level=True)
    pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")


# the first cell of the notebooks where the demo model fixes a failing cell: the data it reads
SALES_CELL = "import pandas as pd\nsales = pd.DataFrame({'month': ['Jan', 'Feb'], 'revenue': [120, 135]})"


def free_port():
    """A loopback port free now; another process may take it before a server binds it (see start_server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT_TAKEN = "already in use"  # what a server that could not bind its port says (jupyter_server, uvicorn)


def start_server(command: Callable[[int], list[str]], status: Callable[[int], urllib.request.Request], what: str,
                 log_path: Path, timeout: float, tries: int = 3, **popen) -> tuple[subprocess.Popen, int]:
    """Start ``command(port)`` on a free loopback port, its output in ``log_path``, and wait until
    ``status(port)`` answers 200; ``(process, port)``. The port ``free_port`` found can be taken (say, as
    the source port of another connection) before the server binds it; the server then exits saying so,
    and is started again on another port (``tries`` in all). The command must not move to another port
    by itself (jupyter: ``--ServerApp.port_retries=0``)."""
    for attempt in range(1, tries + 1):
        port = free_port()
        with open(log_path, "w") as log:
            proc = subprocess.Popen(command(port), stdout=log, stderr=subprocess.STDOUT, **popen)
        try:
            wait_ready(proc, status(port), what, log_path, timeout)
            return proc, port
        except RuntimeError:  # it exited
            stop_process_group(proc)
            if attempt < tries and PORT_TAKEN in log_path.read_text(errors="replace").lower():
                continue
            raise
        except BaseException:
            stop_process_group(proc)
            raise
    raise AssertionError("unreachable")


def stop_process_group(proc: subprocess.Popen) -> None:
    """Stop a server started in its own session: TERM its process group (KILL after 15 s), then
    kill whatever children it had started (kernels run in sessions of their own)."""
    kids = descendants(proc.pid)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    for pid in kids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def descendants(pid):
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def die_with_parent():
    os.setsid()
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def venv_bin(venv: Path | None) -> Path:
    """The scripts folder of ``venv``, or of this interpreter's environment when None."""
    return Path(sys.executable).parent if venv is None else venv / ("Scripts" if os.name == "nt" else "bin")


def isolated_env(tmp: Path, venv: Path | None = None) -> dict:
    """Environment for a Jupyter server whose config, runtime, data, settings and IPython dirs live in tmp;
    the kernel imports nbagent from this checkout and the test helpers (``support.*``) from tests/ --
    or, with ``venv``, only what that venv has installed (no PYTHONPATH; its scripts first on PATH)."""
    env = dict(os.environ, JUPYTER_PLATFORM_DIRS="1", TMPDIR=str(tmp), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    if venv is not None:
        for var in ("PYTHONPATH", "VIRTUAL_ENV"):
            env.pop(var, None)
        env["PATH"] = os.pathsep.join([str(venv_bin(venv)), env.get("PATH", "")])
    env.pop("NBAGENT_MODEL", None)
    for var, sub in [("JUPYTER_CONFIG_DIR", "cfg"), ("JUPYTER_RUNTIME_DIR", "rt"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "ws"), ("IPYTHONDIR", "ipy")]:
        env[var] = str(tmp / sub)
        (tmp / sub).mkdir(exist_ok=True)
    for rel, cfg in FRONTEND_SETTINGS.items():
        f = tmp / "settings" / f"{rel}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(cfg))
    return env


def wait_ready(proc: subprocess.Popen, request: urllib.request.Request, what: str, log_path: Path,
               timeout: float) -> None:
    """Poll ``request`` until it answers 200; raise with the log's tail if ``proc`` exits first."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited rc={proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            if urllib.request.urlopen(request, timeout=1).status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout} s")
        time.sleep(0.05)


@contextlib.contextmanager
def jupyter_server(app: str, tmp: Path, root: Path, extra_args=(), ready_timeout=60, show_log_on_error=None,
                   venv: Path | None = None, env: dict | None = None):
    """Run `jupyter <app>` (lab | notebook) on a free loopback port with a random token, root_dir=root and
    everything else isolated in tmp; yield {base, token, root, log, proc}. At exit, kill the server's
    process group and every descendant (kernels run in their own session) by PID.

    show_log_on_error: a callable returning True when the tail of the server log should be printed.
    venv: run that venv's Jupyter, which sees nothing of this checkout; env: extra environment variables."""
    tiers.require("browser", f"starts jupyter {app}")
    server_env = {**isolated_env(tmp, venv), **(env or {})}
    token = secrets.token_hex(16)

    def cmd(port: int) -> list[str]:  # on exactly this port: a taken one ends the server (start_server retries)
        return [str(venv_bin(venv) / "jupyter"), app, "--no-browser", "--allow-root", "--ip=127.0.0.1",
                f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}", *extra_args]

    def status(port: int) -> urllib.request.Request:
        return urllib.request.Request(f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"token {token}"})

    log_path = tmp / "server.log"
    proc, port = start_server(cmd, status, f"jupyter {app}", log_path, ready_timeout, env=server_env, cwd=root,
                              preexec_fn=die_with_parent)
    try:
        yield {"base": f"http://127.0.0.1:{port}", "token": token, "root": root, "log": log_path, "proc": proc}
    finally:
        stop_process_group(proc)
        if show_log_on_error and show_log_on_error():
            print(f"\n--- tail of {log_path} ---\n" + log_path.read_text()[-4000:])


# --- JupyterLab in Chromium ------------------------------------------------------------

# Server flags for a quiet, scriptable JupyterLab (no news or update checks, app on window).
LAB_ARGS = ["--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly", "--LabApp.expose_app_in_browser=True"]


@contextlib.contextmanager
def lab_with_notebooks(tmp_path_factory, request, notebooks: dict, venv: Path | None = None,
                       env: dict | None = None):
    """A JupyterLab server whose root holds ``notebooks`` (file name -> code cells); for module fixtures.
    ``venv``, ``env``: as for jupyter_server."""
    with server_with_notebooks("lab", LAB_ARGS, tmp_path_factory.mktemp("jlab"), request, notebooks, venv, env) as srv:
        yield srv


@contextlib.contextmanager
def server_with_notebooks(app: str, args: list, tmp: Path, request, notebooks: dict, venv: Path | None = None,
                          env: dict | None = None):
    """``jupyter <app>`` (lab | notebook) with ``args``, its root (in tmp) holding ``notebooks`` (file
    name -> code cells); its log is shown when the session has failed tests."""
    root = tmp / "root"
    root.mkdir()
    for name, cells in notebooks.items():
        (root / name).write_text(json.dumps(nb_json(cells)))
    with jupyter_server(app, tmp, root, args, show_log_on_error=lambda: request.session.testsfailed,
                        venv=venv, env=env) as srv:
        yield srv


@contextlib.contextmanager
def lab_on_notebook(tmp_path_factory, request, notebooks: dict, path: str):
    """A JupyterLab server holding ``notebooks`` (as for lab_with_notebooks), a page on it and ``path``
    open there: ``(page, the server's root, the notebook panel's selector)``."""
    with lab_with_notebooks(tmp_path_factory, request, notebooks) as srv, lab_page(srv) as page:
        yield page, srv["root"], open_notebook(page, path)


@contextlib.contextmanager
def lab_page(srv: dict):
    """One Chromium page on ``srv``'s JupyterLab, restored; ``page.errors`` collects page errors."""
    with chromium_page(f"{srv['base']}/lab?reset&token={srv['token']}") as page:
        wait_restored(page)
        yield page


@contextlib.contextmanager
def chromium_page(url: str):
    """Debian's Chromium (headless) on one page at ``url``; ``page.errors`` collects page errors."""
    from playwright import sync_api

    tiers.require("browser", "starts Chromium")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1100, "height": 900}).new_page()
            page.set_default_timeout(60_000)
            page.errors = []
            page.on("pageerror", lambda e: page.errors.append(str(e)))
            page.goto(url)
            yield page
        finally:
            browser.close()


def wait_restored(page) -> None:
    """Wait until the (re)loaded JupyterLab app has restored its layout."""
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("async () => { await window.jupyterapp.restored; }")


def open_notebook(page, path: str) -> str:
    """Open ``path`` in the page's JupyterLab, wait for an idle kernel; the panel's selector."""
    wid = page.evaluate("""async (path) => {
        const app = window.jupyterapp;
        const w = await app.commands.execute('docmanager:open', { path, factory: 'Notebook' });
        await w.context.ready; await w.sessionContext.ready;
        app.shell.activateById(w.id);
        return w.id; }""", path)
    page.wait_for_function("""(id) => { const w = window.jupyterapp.shell.currentWidget;
        return w && w.id === id && w.sessionContext.session?.kernel?.status === 'idle'; }""", arg=wid, polling=50)
    return f'[id="{wid}"]'


def notebook_opener(page):
    """A generator for pytest fixtures: yields ``open_nb(path)``; afterwards shuts down the kernel of
    every panel showing an opened path and closes it unsaved. Panels are found by path, not by id:
    a panel reopened after a page reload (a new id) is closed too, so no test leaves a notebook and
    its kernel on the shared page (a leftover tab can take the focus from the next test's notebook
    when the page reloads)."""
    opened: list[str] = []

    def open_nb(path):
        sel = open_notebook(page, path)
        opened.append(path)
        return sel

    yield open_nb
    page.evaluate("""async (paths) => {
        for (const w of [...window.jupyterapp.shell.widgets('main')]) {
            if (!w.context || !paths.includes(w.context.path)) continue;
            await w.sessionContext.shutdown(); w.context.model.dirty = false; w.dispose();
        } }""", opened)


def reload_and_open(page, path: str) -> str:
    """Reload the page showing only the notebook ``path`` and reopen it; the panel's selector.

    Before the reload, wait until the page would come back to that notebook alone: the URL names it
    (JupyterLab opens and activates the URL's /tree/ path after restoring) and the workspace saved on
    the server (its layout is saved a moment after each change) has it as the only, current tab. Any
    other notebook there would be reopened and could take the focus from ours, hiding its output.
    After the reload, wait until the file browser has opened the URL's path itself (JupyterLab's
    restoreBrowser: once routed, it opens the /tree/ path and then drops ``jp-mod-restoring``; on a
    loaded machine that came after the test had closed the notebook, reopening it over the next
    test's, whose output was then hidden), then until our panel is the current one with a connected
    kernel."""
    page.wait_for_function("""async (path) => {
        const app = window.jupyterapp;
        if (decodeURIComponent(location.pathname).split('/tree/')[1] !== path) return false;
        const config = JSON.parse(document.getElementById('jupyter-config-data').textContent);
        const ws = await app.serviceManager.workspaces.fetch(config.workspace || 'default');
        const main = (ws.data['layout-restorer:data'] || {}).main || {};
        const name = 'notebook:' + path;
        const tabs = JSON.stringify((main.dock || {}).widgets || []);
        return main.current === name && tabs === JSON.stringify([name]);
    }""", arg=path, polling=100)
    page.reload()
    wait_restored(page)
    page.wait_for_function("""() => { const b = document.querySelector('.jp-FileBrowser');
        return b !== null && !b.classList.contains('jp-mod-restoring'); }""", polling=50)
    return open_notebook(page, path)


# --- Jupyter Notebook 7 in Chromium ------------------------------------------------------

# Notebook 7 is a JupyterLab-based front end: the same settings dir and Lab server flags apply; its
# own flag exposes the app as window.jupyterapp.
NB7_ARGS = ["--JupyterNotebookApp.expose_app_in_browser=True", "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly"]


def require_notebook7() -> None:
    """Skip the test unless Jupyter Notebook 7 (notebook>=7) is installed."""
    import pytest

    notebook = pytest.importorskip("notebook", reason="Jupyter Notebook 7 (notebook>=7) is not installed")
    if int(notebook.__version__.split(".")[0]) < 7:
        pytest.skip(f"notebook {notebook.__version__} is not Notebook 7")


@contextlib.contextmanager
def notebook7_with_notebooks(tmp_path_factory, request, notebooks: dict, venv: Path | None = None,
                             env: dict | None = None):
    """A Notebook 7 server whose root holds ``notebooks`` (file name -> code cells); for module fixtures.
    ``venv``, ``env``: as for jupyter_server."""
    with server_with_notebooks("notebook", NB7_ARGS, tmp_path_factory.mktemp("nb7"), request, notebooks, venv,
                               env) as srv:
        yield srv


@contextlib.contextmanager
def notebook7_page_on(srv: dict, path: str):
    """One Chromium page showing ``path`` on ``srv``'s Notebook 7 with an idle kernel (its panel:
    ``.jp-NotebookPanel``); ``page.errors`` collects page errors."""
    with chromium_page(f"{srv['base']}/notebooks/{path}?token={srv['token']}") as page:
        wait_restored(page)
        page.wait_for_function("""(path) => { const w = window.jupyterapp.shell.currentWidget;
            return w && w.context?.path === path && w.sessionContext?.session?.kernel?.status === 'idle'; }""",
                               arg=path, polling=50)
        yield page


@contextlib.contextmanager
def notebook7_page(tmp_path_factory, request, notebooks: dict, path: str, venv: Path | None = None,
                   env: dict | None = None):
    """A Notebook 7 server whose root holds ``notebooks`` and one Chromium page showing ``path``
    (``notebook7_with_notebooks`` + ``notebook7_page_on``). For module fixtures."""
    with notebook7_with_notebooks(tmp_path_factory, request, notebooks, venv, env) as srv, notebook7_page_on(srv, path) as page:
        yield page


# --- marimo ------------------------------------------------------------------------------

@contextlib.contextmanager
def marimo_server(tmp: Path, source: str, venv: Path | None = None, env: dict | None = None, ready_timeout=60):
    """``marimo run app.py`` (headless, no token) of the app ``source`` in tmp on a free loopback port,
    its config, cache and state isolated in tmp; yield its URL. ``venv``, ``env``: as for jupyter_server.
    At exit, kill its process group and every descendant by PID."""
    tiers.require("browser", "starts marimo run")
    (tmp / "app.py").write_text(source)
    server_env = isolated_env(tmp, venv)
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        server_env[var] = str(tmp / var.lower())
    server_env.update(env or {})

    def cmd(port: int) -> list[str]:
        return [str(venv_bin(venv) / "marimo"), "run", "app.py", "--headless", "--host", "127.0.0.1",
                "--port", str(port), "--no-token", "--no-sandbox"]

    proc, port = start_server(cmd, lambda port: urllib.request.Request(f"http://127.0.0.1:{port}/"), "marimo run",
                              tmp / "marimo.log", ready_timeout, env=server_env, cwd=tmp, preexec_fn=die_with_parent)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        stop_process_group(proc)


# --- cells of the current notebook -------------------------------------------------------

def cell_sources(page) -> list[str]:
    """The current notebook's cell sources as its model holds them (test-side only)."""
    return page.evaluate("""() => { const m = window.jupyterapp.shell.currentWidget.content.model;
        return Array.from({length: m.cells.length}, (_, i) => m.cells.get(i).sharedModel.getSource()); }""")


def run_cell(page, index: int, timeout_ms: int = 180_000) -> None:
    """Run cell ``index`` of the current notebook (Lab or Notebook 7) as a user does (select it, run
    it); return when its execution has finished."""
    ok = page.evaluate("""async ([i, t]) => { const app = window.jupyterapp, w = app.shell.currentWidget;
        w.content.activeCellIndex = i; w.content.deselectAll();
        return await Promise.race([app.commands.execute('notebook:run-cell').then(() => true),
                                   new Promise(r => setTimeout(() => r(false), t))]); }""", [index, timeout_ms])
    assert ok, f"cell {index} did not finish executing"


def shot(page, selector: str, name: str, tmp_path: Path) -> Path:
    """A screenshot of ``selector``: into $NBAGENT_SHOTS (a folder of the repository) when set, else tmp_path."""
    target = os.environ.get("NBAGENT_SHOTS")
    page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'center'})", selector)
    page.wait_for_timeout(300)
    path = (ROOT / target / name) if target else tmp_path / name
    page.locator(selector).screenshot(path=str(path))
    return path
