"""``scripts/run.sh`` run again, as a user runs it after the first time: in a copy of the checkout
(scripts, pyproject.toml, notebooks/, the built extension's manifest) whose ``.venv`` is this checkout's, already set up by
``scripts/setup.sh``. It skips the install, copies the example notebooks into my-notebooks/ (keeping a
copy the user already has), leaves notebooks/ as git has them, and starts a JupyterLab whose news
toast is off (the setting the front end reads, asked from the running server).

Skipped unless ``scripts/setup.sh --check`` says the venv is up to date (else run.sh would install)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from support.jupyter import ROOT, start_server, stop_process_group

TOKEN = "run-sh-test-token"


def _venv_is_current() -> bool:
    return (ROOT / ".venv" / "bin" / "jupyter").exists() and subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup.sh"), "--check"], capture_output=True).returncode == 0


pytestmark = [pytest.mark.browser,  # it starts JupyterLab
              pytest.mark.skipif(not _venv_is_current(), reason="the .venv is not set up by scripts/setup.sh, "
                                                                "or is out of date (run it)")]


def checkout_copy(tmp: Path) -> Path:
    repo = tmp / "repo"
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    shutil.copytree(ROOT / "notebooks", repo / "notebooks")
    shutil.copy(ROOT / "pyproject.toml", repo)
    (repo / "nbagent" / "labextension").mkdir(parents=True)  # setup.sh hashes the built extension's manifest
    shutil.copy(ROOT / "nbagent" / "labextension" / "package.json", repo / "nbagent" / "labextension")
    (repo / ".venv").symlink_to(ROOT / ".venv")
    return repo


def user_env(tmp: Path) -> dict:
    """A shell of a user with no Jupyter settings of their own (so run.sh's must do the work)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NBAGENT_MODEL")}
    for var, sub in [("JUPYTER_CONFIG_DIR", "cfg"), ("JUPYTER_RUNTIME_DIR", "rt"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "ws"), ("IPYTHONDIR", "ipy")]:
        env[var] = str(tmp / sub)
        (tmp / sub).mkdir()
    return env | {"JUPYTER_PLATFORM_DIRS": "1", "TMPDIR": str(tmp)}


def test_a_second_run_skips_the_install_works_on_copies_and_has_no_news_toast(tmp_path):
    repo = checkout_copy(tmp_path)
    mine = repo / "my-notebooks" / "teaching.ipynb"
    mine.parent.mkdir()
    mine.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')  # the user's own edits
    tracked = {p.name: p.read_bytes() for p in (repo / "notebooks").glob("*.ipynb")}
    log = tmp_path / "run.log"

    def run_sh(port: int) -> list[str]:
        return ["bash", str(repo / "scripts" / "run.sh"), "--no-browser", f"--port={port}",
                "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}"]

    def status(port: int) -> urllib.request.Request:  # it prints its URL ~3 ms before it listens: asked, not read
        return urllib.request.Request(f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"token {TOKEN}"})

    proc, port = start_server(run_sh, status, "run.sh's JupyterLab", log, 180, env=user_env(tmp_path),
                              start_new_session=True)
    try:
        said = log.read_text(errors="replace")
        assert "skipping pip" in said and "Installing collected packages" not in said, said[-3000:]
        assert "first run" not in said
        copies = {p.name: p.read_bytes() for p in (repo / "my-notebooks").glob("*.ipynb")}
        assert set(copies) == set(tracked)
        assert all(copies[n] == tracked[n] for n in tracked if n != "teaching.ipynb")
        assert json.loads(mine.read_text())["cells"] == []  # a copy already there is kept
        assert f"http://127.0.0.1:{port}/lab/tree/my-notebooks/quickstart.ipynb?token=" in said  # opens the copy
        url = (f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification"
               f"?token={TOKEN}")
        plugin = json.load(urllib.request.urlopen(url, timeout=30))
        defaults = {k: v.get("default") for k, v in plugin["schema"]["properties"].items()}
        # the front end asks "get notified about Jupyter news?" only while fetchNews is "none"
        assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False, defaults
        assert not plugin["settings"], plugin["settings"]  # from run.sh's default for this venv, not the user's
    finally:
        stop_process_group(proc)
    assert {p.name: p.read_bytes() for p in (repo / "notebooks").glob("*.ipynb")} == tracked
