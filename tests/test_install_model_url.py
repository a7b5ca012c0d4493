"""``python -m nbagent install-model URL``: another GGUF from a server, hash-checked, written atomically.

A real HTTP server on 127.0.0.1 (support.fault_server) serves a small file here; the real SmolLM2 file
(98 MB) is served in the ``local_model`` tier, where the installed copy then answers a prompt.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.fault_server import FaultServer, drop_after, reply, sse
from nbagent.core.errors import NbagentError
from nbagent.providers.local import find_default_model, local_runtime_available
from nbagent.providers.model_files import install_model_file, model_url

ROOT = Path(__file__).resolve().parent.parent
BODY = b"GGUF" + bytes(range(256)) * 40  # a small stand-in: the download logic reads no model
SHA = hashlib.sha256(BODY).hexdigest()
SMOLLM2_FILE = find_default_model() if local_runtime_available() else None  # before a test moves the model folder


@pytest.fixture
def models(tmp_path, monkeypatch):
    folder = tmp_path / "models"
    monkeypatch.setenv("NBAGENT_MODEL_DIR", str(folder))
    return folder


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbagent", "install-model", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, timeout=120)


def test_a_url_with_its_published_sha256_is_installed(models, fault_server):
    fault_server.push(reply(200, f"{SHA}  tiny.gguf\n"), reply(200, BODY))
    done = install_model_file(f"{fault_server.url}/files/tiny.gguf")
    assert done.downloaded and done.path == models / "tiny.gguf" and done.path.read_bytes() == BODY
    assert [r.path for r in fault_server.requests] == ["/files/tiny.gguf.sha256", "/files/tiny.gguf"]
    assert sorted(p.name for p in models.iterdir()) == ["tiny.gguf"]  # no .part left
    again = install_model_file(f"{fault_server.url}/files/tiny.gguf")  # there already: nothing fetched
    assert not again.downloaded and len(fault_server.requests) == 2


def test_the_cli_takes_a_url_and_a_given_sha256(models, fault_server):
    fault_server.push(reply(200, BODY))
    done = cli(f"{fault_server.url}/tiny.gguf", "--sha256", SHA.upper(), env={"NBAGENT_MODEL_DIR": str(models)})
    assert done.returncode == 0, done.stderr
    assert str(models / "tiny.gguf") in done.stdout and 'Agent(model="local:' in done.stdout
    assert (models / "tiny.gguf").read_bytes() == BODY
    assert [r.path for r in fault_server.requests] == ["/tiny.gguf"]  # a given hash: no .sha256 asked


def test_a_file_that_does_not_match_its_hash_is_not_kept_and_the_old_one_stays(models, fault_server):
    models.mkdir()
    (models / "tiny.gguf").write_bytes(b"the earlier model")
    fault_server.push(reply(200, BODY[:-1] + b"x"))
    with pytest.raises(NbagentError) as err:
        install_model_file(f"{fault_server.url}/tiny.gguf", sha256=SHA, force=True)
    assert err.value.kind == "io" and "does not match its SHA-256" in str(err.value)
    assert sorted(p.name for p in models.iterdir()) == ["tiny.gguf"]
    assert (models / "tiny.gguf").read_bytes() == b"the earlier model"


def test_a_cut_download_is_a_network_error_and_leaves_nothing(models, fault_server):
    fault_server.push(drop_after(BODY[:1000]))
    with pytest.raises(NbagentError) as err:
        install_model_file(f"{fault_server.url}/tiny.gguf", sha256=SHA)
    assert err.value.kind in ("network", "io")
    assert not models.exists() or list(models.iterdir()) == []


def test_without_a_hash_nothing_is_downloaded(models, fault_server):
    fault_server.push(reply(404, "not found"))
    done = cli(f"{fault_server.url}/tiny.gguf", env={"NBAGENT_MODEL_DIR": str(models)})
    assert done.returncode == 1 and "pass --sha256" in done.stderr
    assert [r.path for r in fault_server.requests] == ["/tiny.gguf.sha256"]
    assert not (models / "tiny.gguf").exists()


def test_a_missing_file_and_a_bad_hash_are_clear_errors(models, fault_server):
    fault_server.push(reply(404, "not found"))
    with pytest.raises(NbagentError, match="HTTP 404") as err:
        install_model_file(f"{fault_server.url}/gone.gguf", sha256=SHA)
    assert err.value.kind == "network"
    with pytest.raises(NbagentError, match="64 hex digits"):
        install_model_file(f"{fault_server.url}/tiny.gguf", sha256="abc")
    with pytest.raises(NbagentError, match=r"\.gguf"):
        install_model_file(f"{fault_server.url}/model.bin", sha256=SHA)


def test_a_closed_port_is_a_network_error(models):
    with FaultServer() as server:
        url = f"{server.url}/tiny.gguf"
    with pytest.raises(NbagentError) as err:
        install_model_file(url, sha256=SHA, timeout=5)
    assert err.value.kind == "network"


@pytest.mark.parametrize("name,url", [
    ("hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf",
     "https://huggingface.co/Qwen/Qwen2.5-1.5B-Instruct-GGUF/resolve/main/qwen2.5-1.5b-instruct-q4_k_m.gguf"),
    ("hf:org/repo/sub/m.gguf@v1.0", "https://huggingface.co/org/repo/resolve/v1.0/sub/m.gguf"),
    ("https://example.org/m.gguf", "https://example.org/m.gguf"),
])
def test_hugging_face_names_resolve_to_download_urls(name, url):
    assert model_url(name) == url


@pytest.mark.parametrize("name", ["hf:org/m.gguf", "hf:org/repo/readme.md", "smollm2", "ftp://x/m.gguf"])
def test_names_that_are_no_download_are_config_errors(name):
    with pytest.raises(NbagentError) as err:
        model_url(name)
    assert err.value.kind == "config"


@pytest.mark.local_model
def test_the_real_smollm2_file_served_on_loopback_installs_and_answers(models, fault_server):
    import asyncio

    from nbagent.providers.local import LocalProvider

    if SMOLLM2_FILE is None:
        pytest.skip("needs the local model (python -m nbagent install-model)")
    body = SMOLLM2_FILE.read_bytes()
    fault_server.push(reply(200, hashlib.sha256(body).hexdigest() + "\n"), reply(200, body))
    done = cli(f"{fault_server.url}/models/smollm2-copy.gguf", env={"NBAGENT_MODEL_DIR": str(models)})
    assert done.returncode == 0, done.stderr
    installed = models / "smollm2-copy.gguf"
    assert installed.stat().st_size == len(body)
    provider = LocalProvider(installed, n_ctx=576, max_tokens=8, temperature=0)

    async def ask() -> str:
        from nbagent.core.messages import Message, TextPart
        from nbagent.providers.base import ModelRequest, TextDelta

        try:
            request = ModelRequest(provider.model, [Message("user", [TextPart("Say hello.")])])
            return "".join([e.text async for e in provider.stream(request) if isinstance(e, TextDelta)])
        finally:
            await provider.aclose()

    assert asyncio.run(ask()).strip()


# --- #48.9: a given hash is always checked; full disks, killed downloads, credentials in URLs -----


def test_a_given_sha256_is_checked_against_a_same_named_file_already_there(models, fault_server):
    models.mkdir()
    (models / "tiny.gguf").write_bytes(b"another model of the same name")
    with pytest.raises(NbagentError) as err:  # refused with advice, nothing fetched, the file kept
        install_model_file(f"{fault_server.url}/tiny.gguf", sha256=SHA)
    assert err.value.kind == "io" and "does not match --sha256" in str(err.value) and "--force" in str(err.value)
    assert fault_server.requests == [] and (models / "tiny.gguf").read_bytes() == b"another model of the same name"
    done = cli(f"{fault_server.url}/tiny.gguf", "--sha256", SHA, env={"NBAGENT_MODEL_DIR": str(models)})
    assert done.returncode == 1 and "--force" in done.stderr
    (models / "tiny.gguf").write_bytes(BODY)  # the right file: kept, nothing fetched
    again = install_model_file(f"{fault_server.url}/tiny.gguf", sha256=SHA)
    assert not again.downloaded and fault_server.requests == []


def test_a_full_disk_is_a_storage_error_and_leaves_nothing(tmp_path, monkeypatch, fault_server):
    from support.small_disk import small_disk

    with small_disk(tmp_path / "disk", size_kb=64) as disk:
        monkeypatch.setenv("NBAGENT_MODEL_DIR", str(disk / "models"))
        big = b"GGUF" + os.urandom(200_000)  # more than the disk holds
        fault_server.push(reply(200, big))
        with pytest.raises(NbagentError) as err:
            install_model_file(f"{fault_server.url}/big.gguf", sha256=hashlib.sha256(big).hexdigest())
        assert err.value.kind == "io" and "space" in str(err.value), err.value
        assert "200,004" in str(err.value)  # the size it needed, said before anything was written
        assert [p for p in disk.rglob("*") if p.is_file()] == []
        fault_server.push(sse(big, chunk_size=16_384))  # no Content-Length: the disk fills mid-download
        with pytest.raises(NbagentError) as err:
            install_model_file(f"{fault_server.url}/big.gguf", sha256=hashlib.sha256(big).hexdigest())
        assert err.value.kind == "io" and "no space left" in str(err.value), err.value
        assert [p for p in disk.rglob("*") if p.is_file()] == []


def test_a_download_bigger_than_its_content_length_or_the_cap_is_refused(models, fault_server):
    fault_server.push(reply(200, BODY))
    with pytest.raises(NbagentError) as err:
        install_model_file(f"{fault_server.url}/tiny.gguf", sha256=SHA, max_bytes=1000)
    assert err.value.kind == "io" and "1,000" in str(err.value)
    assert not models.exists() or list(models.iterdir()) == []


def test_a_killed_download_leaves_no_part_file_in_the_model_folder(models, fault_server):
    from support.fault_server import stall_after

    fault_server.push(stall_after(BODY[:2000], seconds=60))
    script = ("import sys; from nbagent.providers.model_files import install_model_file; "
              f"install_model_file({fault_server.url + '/tiny.gguf'!r}, sha256={SHA!r})")
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT),
                                                                 "NBAGENT_MODEL_DIR": str(models)})
    try:
        from support.waiting import wait_for

        wait_for(lambda: fault_server.requests, "the download to start")
        wait_for(lambda: any(models.parent.rglob("*.part")), "the partial file to be written")
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert not models.exists() or list(models.iterdir()) == []  # the model folder holds no .part
    fault_server.push(reply(200, BODY))  # the next install cleans what the killed one left
    install_model_file(f"{fault_server.url}/tiny.gguf", sha256=SHA)
    assert sorted(p.name for p in models.iterdir()) == ["tiny.gguf"]
    assert list(models.parent.rglob("*.part")) == []


@pytest.mark.parametrize("secret_url", [
    "{base}/tiny.gguf?token=hf_SecretToken0123456789abcdef",
    "{user}/tiny.gguf",
])
def test_credentials_in_the_url_never_appear_in_messages(models, fault_server, secret_url):
    base = fault_server.url
    url = secret_url.format(base=base, user=base.replace("http://", "http://alice:pa55w0rd-secret@"))
    fault_server.push(reply(404, "no"), reply(404, "no"), reply(200, BODY[:-1] + b"x"))
    for args in ([], ["--sha256", SHA]):  # no hash published; a 404
        done = cli(url, *args, env={"NBAGENT_MODEL_DIR": str(models)})
        assert done.returncode == 1 and "127.0.0.1" in done.stderr
        assert "hf_SecretToken" not in done.stderr + done.stdout and "pa55w0rd" not in done.stderr + done.stdout
    with pytest.raises(NbagentError) as err:  # a hash mismatch names the URL too
        install_model_file(url, sha256=SHA)
    assert "127.0.0.1" in str(err.value) and "hf_SecretToken" not in str(err.value) and "pa55w0rd" not in str(err.value)
