"""Child-process entry point: llama.cpp's OpenAI-compatible server (xllamacpp).

    python -m nbagent.providers.llama_process --model PATH [--port 0] [--ctx 2048]
        [--threads N] [--parallel 4] [--alias smollm2] [--parent-pid PID]

Run by ``nbagent.providers.local`` and owned by it; not a public interface.

- It dies with its parent: ``PR_SET_PDEATHSIG`` (Linux) delivers SIGTERM when
  the thread that spawned it ends, and a watchdog thread exits as soon as
  stdin reaches EOF (the parent keeps the write end open; the kernel closes it
  when the parent dies, whatever killed it, on any OS).
- ``--port 0`` lets the server pick a free loopback port itself (no race);
  once the model is loaded and the port is listening, one line
  ``NBAGENT_LLAMA_READY <url>`` is written to stdout, then stdout is pointed
  at stderr so nothing can ever block on a pipe nobody reads.
- SIGTERM (the default action) stops it at once; SIGINT is ignored so a
  Ctrl-C meant for the notebook or script does not kill the shared server.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

READY = "NBAGENT_LLAMA_READY"


def _die_with_parent(parent_pid: int | None) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            PR_SET_PDEATHSIG = 1
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except Exception:  # pragma: no cover - best effort, stdin watchdog remains
            pass
    # the parent may have died before prctl took effect
    if parent_pid and os.getppid() != parent_pid:
        os._exit(0)


def _watch_stdin() -> None:
    """Exit when the parent closes our stdin (or dies)."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="nbagent.providers.llama_process")
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=-1)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--alias", default="")
    ap.add_argument("--verbosity", type=int, default=2)
    ap.add_argument("--parent-pid", type=int, default=0)
    ap.add_argument("--no-stdin-watch", action="store_true")
    args = ap.parse_args(argv)

    _die_with_parent(args.parent_pid or None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not args.no_stdin_watch:
        threading.Thread(target=_watch_stdin, name="stdin-watchdog", daemon=True).start()

    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = args.model
    p.hostnames = [args.host]
    p.port = args.port
    p.n_ctx = args.ctx
    p.n_parallel = max(1, args.parallel)
    p.kv_unified = True  # every slot may use the whole context; they share it
    if args.threads and args.threads > 0:
        p.cpuparams.n_threads = args.threads
        p.cpuparams_batch.n_threads = args.threads
    p.verbosity = args.verbosity
    p.ui = False
    p.endpoint_metrics = True  # /metrics: tokens predicted, requests processing
    p.offline = True
    # a quicker start (2-4 s -> 1.7-2.4 s for SmolLM2 on a loaded 2-core machine): no empty warm-up
    # decode (the first request pays for its own) and no trial load fitting the model to device memory
    # (there is none to fit: the CPU build)
    p.warmup = False
    p.fit_params = False
    if args.alias:
        p.model_alias = {args.alias}

    t0 = time.monotonic()
    server = xllamacpp.Server(p)  # loads the model, then serves from its own threads
    address = server.listening_address
    if callable(address):  # pragma: no cover - older wheels
        address = address()
    sys.stderr.write(f"nbagent: llama.cpp server ready in {time.monotonic() - t0:.2f}s at {address}\n")
    sys.stdout.write(f"{READY} {address}\n")
    sys.stdout.flush()
    os.dup2(2, 1)  # nobody reads our stdout after the ready line

    while True:  # the server threads do the work; SIGTERM ends the process
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
