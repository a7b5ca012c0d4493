"""A pip user's path, end to end: the wheel built from this checkout, installed into a fresh venv
(no system site-packages, no repository on the path) with the documented extras and command;
then ``doctor``, a chat with the offline model, the widget's bundle, and ``pip check``.

Needs the package index (or pip's cache) for the extras' dependencies, like ``scripts/setup.sh``."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("build")
pytest.importorskip("hatchling")
pytestmark = pytest.mark.local_model  # it starts the real llama.cpp server

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


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NBAGENT_MODEL", "VIRTUAL_ENV")}
    env.update(kw.pop("env", {}))
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=900, **kw)
    assert done.returncode == 0, f"{cmd[1:4]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def test_the_built_wheel_installs_and_chats_offline_with_pip_check_clean(tmp_path):
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", tmp_path / "dist", ROOT])
    wheel = next((tmp_path / "dist").glob("nbagent-*.whl"))
    venv.create(tmp_path / "venv", with_pip=True, system_site_packages=False)
    python = tmp_path / "venv" / ("Scripts" if os.name == "nt" else "bin") / "python"
    env = {"NBAGENT_MODEL_DIR": str(tmp_path / "models")}
    # the README's Install section, from outside the repository
    _run([python, "-m", "pip", "install", "-q", f"nbagent[widget,local] @ {wheel.as_uri()}", "jupyterlab"],
         cwd=tmp_path)
    before = _run([python, "-m", "nbagent", "doctor"], cwd=tmp_path, env=env).stdout
    assert "model file         missing" in before and "default model: demo" in before
    assert "not ready, needs the local model" in before
    _run([python, "-m", "nbagent", "install-model"], cwd=tmp_path, env=env)
    doctor = _run([python, "-m", "nbagent", "doctor"], cwd=tmp_path, env=env).stdout
    assert str(tmp_path / "venv") in doctor.splitlines()[0]  # the installed copy, not this checkout
    assert "default model: local" in doctor and "llama.cpp runtime  yes" in doctor
    assert "widget             yes" in doctor and "offline chat in the widget: ready" in doctor
    chat = _run([python, "-c", CHAT], cwd=tmp_path, env=env).stdout
    local = chat.split("local: ")[1].splitlines()[0].split()
    assert "demo: " in chat and local[0].startswith("local") and local[-1] == "True", chat
    assert "notices: True" in chat and int(chat.split("widget bytes: ")[1].split()[0]) > 100_000
    check = _run([python, "-m", "pip", "check"], cwd=tmp_path)
    assert "No broken requirements" in check.stdout
