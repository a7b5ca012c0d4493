"""A pip user's path, end to end: the wheel and sdist built from this checkout are put in a local
package index (a PEP 503 "simple" folder), and the README's Install lines run **as written**, by name,
in one fresh venv (no system site-packages, no repository on the path or as the working folder), with
only ``--extra-index-url`` to that folder added: the real index (PyPI) serves every other package, so
a name or an extra that resolves to something else (the other project called ``nbagent``) fails here.
This machine's own pip configuration (mirrors, find-links, constraints) is left out: pip sees what a
user's pip sees. Then ``doctor``, a chat with the offline model from Python, the widget's bundle and
``pip check``; then, in Chromium, the offline chat in the widget under JupyterLab, Notebook 7 and
``marimo run``, each served from that venv.

Needs the package index for the extras' dependencies, like ``scripts/setup.sh``."""

from __future__ import annotations

import hashlib
import html
import os
import re
import shlex
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

DISTRIBUTION = "jupyter-nbagent"
# the front ends the README's Install section names besides the one its first line installs
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
    """The venv the README's lines installed into, the environment its commands run with, a folder
    outside the repo, and what ``doctor`` and pip said on the way."""

    path: Path
    python: Path
    env: dict
    outside: Path
    doctor_before_model: str
    pip_said: str
    wheel_version: str


# What of this machine's pip set-up a user's pip would share: TLS and timeouts, not package sources.
KEPT_PIP_VARS = ("PIP_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_DISABLE_PIP_VERSION_CHECK")


def user_pip_env() -> dict:
    """The environment of a user's shell as pip sees it: no config files (this machine's mirrors,
    find-links and constraints) and no ``PIP_*`` package sources; PyPI is the index."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "NBAGENT_MODEL", "VIRTUAL_ENV") and (not k.startswith("PIP_") or k in KEPT_PIP_VARS)}
    env["PIP_CONFIG_FILE"] = os.devnull  # pip then reads no config file at all
    return env


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    env = user_pip_env()
    env.update(kw.pop("env", {}))
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=900, **kw)
    assert done.returncode == 0, f"{cmd[1:4]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def readme_install_lines() -> list[list[str]]:
    """The commands of the ```bash block under README's "## Install", split as a shell would
    (comments dropped)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README's Install section has no ```bash block"
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines() if line.strip()]


def simple_index(folder: Path, dists: list[Path]) -> Path:
    """A PEP 503 "simple" index in ``folder`` serving ``dists`` (our wheel and sdist) under the
    normalized project name; returns its file:// root for ``--extra-index-url``."""
    project = folder / "simple" / DISTRIBUTION
    project.mkdir(parents=True)
    links = []
    for dist in dists:
        target = project / dist.name
        target.write_bytes(dist.read_bytes())
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        links.append(f'<a href="{html.escape(dist.name)}#sha256={digest}">{html.escape(dist.name)}</a><br>')
    (project / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (folder / "simple" / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="{DISTRIBUTION}/">{DISTRIBUTION}</a></body></html>\n')
    return folder / "simple"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> FreshVenv:
    """Build the sdist and the wheel, serve them from a local index, run README's Install lines as
    written (``pip install`` with the index added, ``python -m nbagent ...`` with the venv's Python)
    and the front ends the README names; record ``doctor`` before ``install-model``."""
    tmp = tmp_path_factory.mktemp("fresh")
    _run([sys.executable, "-m", "build", "--sdist", "--wheel", "--no-isolation", "-o", tmp / "dist", ROOT])
    wheel = next((tmp / "dist").glob("jupyter_nbagent-*.whl"))
    sdist = next((tmp / "dist").glob("jupyter_nbagent-*.tar.gz"))
    index = simple_index(tmp / "index", [wheel, sdist])
    venv.create(tmp / "venv", with_pip=True, system_site_packages=False)
    python = venv_bin(tmp / "venv") / "python"
    env = {"NBAGENT_MODEL_DIR": str(tmp / "models")}
    pip_said, before = [], ""
    lines = readme_install_lines()
    assert [c[:2] for c in lines if c[0] == "pip"] and all(c[0] in ("pip", "python") for c in lines), lines
    lines.append(["pip", "install", *[f for f in FRONT_ENDS if f not in lines[0]]])  # "install the one you use"
    for cmd in sorted(lines, key=lambda c: c[0] != "pip"):  # README's order, the front ends before the model
        if cmd[0] == "pip":
            assert cmd[1] == "install", cmd
            done = _run([python, "-m", "pip", "install", "--extra-index-url", index.as_uri(), *cmd[2:]], cwd=tmp)
            pip_said.append(done.stdout + done.stderr)
        else:
            assert cmd[:3] == ["python", "-m", "nbagent"], cmd
            if cmd[3] == "install-model":
                before = _run([python, "-m", "nbagent", "doctor"], cwd=tmp, env=env).stdout
            _run([python, *cmd[1:]], cwd=tmp, env=env)
    assert before, "README's Install lines do not run install-model"
    return FreshVenv(tmp / "venv", python, env, tmp, before, "\n".join(pip_said), wheel.name.split("-")[1])


def test_readme_install_lines_install_this_project_by_name_and_every_extra(fresh):
    """pip found every extra README names (no "does not provide the extra") and installed ours, not
    the other project of the index called ``nbagent``."""
    assert "does not provide the extra" not in fresh.pip_said, fresh.pip_said[-3000:]
    other = subprocess.run([fresh.python, "-m", "pip", "show", "nbagent"], capture_output=True, text=True,
                           env=user_pip_env())
    assert other.returncode != 0 and "not found" in other.stderr, other.stdout
    ours = _run([fresh.python, "-m", "pip", "show", "-f", DISTRIBUTION], cwd=fresh.outside).stdout
    assert f"Name: {DISTRIBUTION}" in ours and f"Version: {fresh.wheel_version}" in ours, ours
    assert f"Location: {fresh.path}" in ours, ours  # in the fresh venv
    assert "nbagent/__main__.py" in ours  # `python -m nbagent` is this package's


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
    # the prebuilt front-end extension came with the wheel (no Node.js): listed enabled, active in both
    assert f"nbagent extension  active in jupyterlab, notebook ({fresh.path}" in doctor, doctor
    jupyter_env = {**fresh.env, **{var: str(fresh.outside / var.lower()) for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR")}}
    listed = _run([venv_bin(fresh.path) / "jupyter", "labextension", "list"], cwd=fresh.outside, env=jupyter_env)
    line = next((ln for ln in (listed.stdout + listed.stderr).splitlines() if "jupyter-nbagent" in ln), "")
    assert "enabled" in line and "OK" in line and "(python, jupyter-nbagent)" in line, listed.stdout + listed.stderr
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
        assert page.evaluate("() => window.jupyterapp.isPluginActivated('jupyter-nbagent:plugin')")
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
        assert page.evaluate("() => window.jupyterapp.isPluginActivated('jupyter-nbagent:plugin')")
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
