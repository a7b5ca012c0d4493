"""The llama.cpp server processes behind ``LocalProvider``: start, share, stop.

One server per (model file, n_ctx, threads, parallel) per process, leased by
providers through a reference-counted registry; see ``local.py`` for the
lifecycle as a user sees it.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import queue
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, NbagentError

_READY = "NBAGENT_LLAMA_READY"
# seconds a server may take to load its model and answer /health: SmolLM2 takes 0.5-4 s on 2 cores, a start
# under load was measured at 57.6 s, and a 1 GB model on a slow disk takes longer still
STARTUP_TIMEOUT = 180.0


def default_threads() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 2
    return max(1, min(n, 8))


# --- the child process -------------------------------------------------------------


class _Spawner:
    """Spawns children from one thread that lives as long as the process.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so
    spawning from a short-lived worker thread (``asyncio.to_thread`` inside one
    ``asyncio.run``) would kill the server when that thread is retired.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.Queue | None = None
        self._pid = 0

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._queue is None or self._pid != os.getpid():  # (re)start after fork
                self._queue = queue.Queue()
                self._pid = os.getpid()
                threading.Thread(
                    target=self._run, args=(self._queue,), name="nbagent-llama-spawner", daemon=True
                ).start()
            self._queue.put((future, args, kwargs))
        return future.result()

    @staticmethod
    def _run(jobs: queue.Queue) -> None:
        while True:
            future, args, kwargs = jobs.get()
            try:
                future.set_result(subprocess.Popen(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)


_SPAWNER = _Spawner()


@dataclass(frozen=True)
class ServerSpec:
    model_path: str
    n_ctx: int
    threads: int
    parallel: int
    alias: str = field(default="", compare=False)
    startup_timeout: float = field(default=STARTUP_TIMEOUT, compare=False)

    @property
    def key(self) -> tuple:
        return (self.model_path, self.n_ctx, self.threads, self.parallel)


class LlamaServer:
    """One running llama.cpp server child."""

    def __init__(self, proc: subprocess.Popen, url: str, stderr, started: float, ready: float):
        self.proc = proc
        self.url = url  # http://127.0.0.1:PORT
        self.stderr = stderr
        self.startup_seconds = ready - started
        self.owner_pid = os.getpid()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            return False
        # A killed multi-threaded process shows its leader as a zombie while its
        # other threads are torn down: it no longer listens, treat it as dead.
        return _proc_state(self.proc.pid) not in ("Z", "X")

    def stop(self, timeout: float = 5.0) -> None:
        if self.owner_pid != os.getpid():  # a forked copy never touches the parent's child
            return
        proc = self.proc
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        if proc.poll() is None:
            try:
                proc.terminate()
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass
            except OSError:
                pass
        for stream in (proc.stdout, self.stderr):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass


def _proc_state(pid: int) -> str:
    """The one-letter state of ``pid`` from /proc ("" where there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return ""


def _stderr_tail(f, limit: int = 2000) -> str:
    try:
        f.flush()
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - limit))
        return f.read().decode("utf-8", errors="replace").strip()
    except (OSError, ValueError):
        return ""


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def start_server(spec: ServerSpec) -> LlamaServer:
    """Start the child and wait until it serves (blocking; run it off the loop)."""
    cmd = [
        sys.executable,
        "-m",
        "nbagent.providers.llama_process",
        "--model", spec.model_path,
        "--port", "0",
        "--ctx", str(spec.n_ctx),
        "--threads", str(spec.threads),
        "--parallel", str(spec.parallel),
        "--parent-pid", str(os.getpid()),
    ]  # fmt: skip
    if spec.alias:
        cmd += ["--alias", spec.alias]
    env = dict(os.environ)
    root = _package_root()  # the child imports this very nbagent, installed or not
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    stderr = tempfile.TemporaryFile()
    started = time.monotonic()
    try:
        proc = _SPAWNER.popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            close_fds=True,
        )
    except OSError as exc:
        stderr.close()
        raise ConfigError(
            f"could not start the local llama.cpp server: {exc}", provider="local"
        ) from exc

    def fail(message: str, kind: str) -> NbagentError:
        server = LlamaServer(proc, "", stderr, started, time.monotonic())
        tail = _stderr_tail(stderr)
        server.stop(timeout=2.0)
        if tail:
            message += "\n--- server stderr (tail) ---\n" + tail
        return NbagentError(message, kind=kind, provider="local")

    deadline = started + spec.startup_timeout
    url = _wait_ready_line(proc, deadline, spec, fail)
    url = url.replace("://0.0.0.0:", "://127.0.0.1:").replace("://localhost:", "://127.0.0.1:")
    _wait_healthy(url, deadline, proc, fail)
    return LlamaServer(proc, url, stderr, started, time.monotonic())


def _wait_ready_line(proc: subprocess.Popen, deadline: float, spec: ServerSpec, fail) -> str:
    """Read the child's stdout until it prints its ready line; returns the URL it serves on."""
    url = ""
    buf = b""
    if proc.stdout is None:
        raise fail("its output is not a pipe", "server")
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while not url:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise fail(
                    f"the local llama.cpp server did not become ready within "
                    f"{spec.startup_timeout:.0f}s (model {spec.model_path})",
                    "timeout",
                )
            if sel.select(min(remaining, 0.2)):
                data = os.read(fd, 4096)
                if not data:  # the child closed stdout: it exited
                    try:
                        code = proc.wait(2.0)
                    except subprocess.TimeoutExpired:
                        code = None
                    raise fail(
                        f"the local llama.cpp server exited during start-up (exit code {code}); "
                        f"model {spec.model_path}",
                        "config",
                    )
                buf += data
                *lines, buf = buf.split(b"\n")  # complete lines only
                for raw in lines:
                    line = raw.decode("utf-8", errors="replace").strip()
                    if line.startswith(_READY) and len(line.split()) == 2:
                        url = line.split()[1].rstrip("/")
                        break
            elif proc.poll() is not None:
                raise fail(
                    f"the local llama.cpp server exited during start-up (exit code "
                    f"{proc.returncode}); model {spec.model_path}",
                    "config",
                )
    return url


def _wait_healthy(url: str, deadline: float, proc: subprocess.Popen, fail) -> None:
    import httpx

    last = ""
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while True:
            try:
                r = client.get(f"{url}/health")
                if r.status_code == 200:
                    return
                last = f"HTTP {r.status_code}"
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            if proc.poll() is not None:
                raise fail(
                    f"the local llama.cpp server exited during start-up (exit code "
                    f"{proc.returncode})",
                    "config",
                )
            if time.monotonic() >= deadline:
                raise fail(f"the local llama.cpp server at {url} is not healthy ({last})", "timeout")
            time.sleep(0.05)


def wait_answering(server: LlamaServer, timeout: float) -> bool:
    """Wait until ``server`` answers ``GET /health`` with 200 again (True), or ``timeout`` passes or it
    dies (False)."""
    import httpx

    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while server.alive():
            try:
                if client.get(f"{server.url}/health").status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
    return False


# --- the shared registry -------------------------------------------------------------


@dataclass
class ServerEntry:
    spec: ServerSpec
    refs: int = 0
    server: LlamaServer | None = None
    starts: int = 0


class ServerRegistry:
    """Servers of this process, keyed by (model, n_ctx, threads, parallel), ref-counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple, ServerEntry] = {}
        self._pid = os.getpid()

    def _check_fork(self) -> None:
        if self._pid != os.getpid():  # a forked child owns none of the parent's servers
            self._entries = {}
            self._lock = threading.Lock()
            self._pid = os.getpid()

    def acquire(self, spec: ServerSpec) -> LlamaServer:
        """Take one lease and return the running server (starting it if needed)."""
        self._check_fork()
        with self._lock:
            entry = self._entries.get(spec.key)
            if entry is None:
                entry = self._entries[spec.key] = ServerEntry(spec)
            entry.refs += 1
            try:
                return self._ensure(entry)
            except BaseException:
                entry.refs -= 1
                if entry.refs <= 0 and entry.server is None:
                    self._entries.pop(spec.key, None)
                raise

    def ensure(self, spec: ServerSpec) -> LlamaServer:
        """The running server of a held lease, restarted if it died."""
        self._check_fork()
        with self._lock:
            entry = self._entries.get(spec.key)
            if entry is None:  # stop_all_servers() dropped it: the lease holds on
                entry = self._entries[spec.key] = ServerEntry(spec, refs=1)
            return self._ensure(entry)

    def _ensure(self, entry: ServerEntry) -> LlamaServer:
        server = entry.server
        if server is not None and server.alive():
            return server
        if server is not None:
            server.stop(timeout=1.0)
            entry.server = None
        entry.server = start_server(entry.spec)
        entry.starts += 1
        return entry.server

    def release(self, key: tuple) -> None:
        """Give one lease back; the last one stops the server."""
        if self._pid != os.getpid():
            return
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry.refs -= 1
            if entry.refs > 0:
                return
            del self._entries[key]
            server = entry.server
        if server is not None:
            server.stop()

    def stop_all(self) -> None:
        if self._pid != os.getpid():
            return
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            if entry.server is not None:
                entry.server.stop(timeout=2.0)

    def snapshot(self) -> list[dict]:
        with self._lock:
            return [
                {
                    "model_path": e.spec.model_path,
                    "n_ctx": e.spec.n_ctx,
                    "threads": e.spec.threads,
                    "parallel": e.spec.parallel,
                    "refs": e.refs,
                    "pid": e.server.pid if e.server else None,
                    "url": e.server.url if e.server else None,
                    "alive": bool(e.server and e.server.alive()),
                    "starts": e.starts,
                }
                for e in self._entries.values()
            ]


SERVERS = ServerRegistry()
atexit.register(SERVERS.stop_all)


def running_servers() -> list[dict]:
    """The local servers this process holds: model, pid, url, leases, ..."""
    return SERVERS.snapshot()


def stop_all_servers() -> None:
    """Stop every local server of this process now (leases become invalid;
    providers that stream again start a fresh one)."""
    SERVERS.stop_all()
