"""MCP servers as tool sources: ``nbagent.mcp_tools(server)`` and ``Agent(mcp=[...])``.

A server is a command (a string or a list; spoken to over stdio) or an ``http(s)://`` URL
(streamable HTTP, with ``headers=``). Nothing starts when a server is named: its process starts
and its tools are listed when a turn first needs them (or ``tools()`` is called). One session is
kept open per server on nbagent's MCP thread, a daemon thread with its own event loop, so the
session survives the event loops of its callers (two ``asyncio.run`` calls, Jupyter's loop).

Failures are ``NbagentError`` naming the server: a missing command (``config``), a server that
exits or answers garbage (``tool``), no answer in ``timeout`` seconds (``timeout``), an HTTP server
out of reach (``network``). A call to a server that crashed is a tool error, and the next call
starts it again. Servers stop on ``aclose()`` / ``close()``, and at interpreter exit (which is
also a kernel's shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import re
import shutil
import sys
import tempfile
from typing import Any
from urllib.parse import urlsplit

from ..core.errors import ConfigError, NbagentError, ProtocolError, RequestTimeout, ToolError, register_secret
from . import mcp_relay
from .mcp_results import McpTool
from .mcp_thread import (EXIT_TIMEOUT, mcp_thread_started, run_on_mcp_thread, track, wait_on_mcp_thread,
                         warm_up_sdk)
from .tools import Tool

DEFAULT_START_TIMEOUT = 60.0  # seconds a server may take to start and list its tools
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # a stdio server's message past this is cut by mcp_relay.py
STDERR_TAIL = 300  # characters of a crashed server's stderr quoted in its error (its last 3 lines)
MAX_LIST_PAGES = 50


class McpServer:
    """One MCP server and its tools (see the module docstring); pass it to ``Agent(mcp=[...])``."""

    def __init__(self, server: str | list[str] | tuple[str, ...], *, name: str | None = None,
                 headers: dict[str, str] | None = None, env: dict[str, str] | None = None,
                 cwd: str | os.PathLike | None = None, timeout: float = DEFAULT_START_TIMEOUT,
                 max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.url: str | None = None
        self.command: list[str] | None = None
        if isinstance(server, str) and server.strip().lower().startswith(("http://", "https://")):
            self.url = server.strip()
        elif isinstance(server, str):
            self.command = shlex.split(server)
        elif isinstance(server, (list, tuple)) and all(isinstance(a, str) for a in server):
            self.command = list(server)
        else:
            raise ConfigError("an MCP server is a command (a string or a list of strings) or an "
                              f"http(s):// URL, not {type(server).__name__}")
        if self.command is not None and not self.command:
            raise ConfigError("an MCP server command is empty")
        if headers and self.url is None:
            raise ConfigError("headers= is for an MCP server at an http(s):// URL")
        self._name = name
        self.reported_name = ""  # the name the server gave itself, once started
        self.env = dict(env) if env else None
        if self.command is not None:
            self.command = _with_kernel_python(self.command)
            if shutil.which(self.command[0], path=(self.env or {}).get("PATH")) is None:
                raise ConfigError(f"MCP server {self.name!r}: command {self.command[0]!r} not found "
                                  "(is it installed and on PATH?)")
        self.max_message_bytes = int(max_message_bytes)
        self.headers = dict(headers or {})
        for value in self.headers.values():  # tokens: scrubbed from every error message
            register_secret(str(value))
            register_secret(str(value).partition(" ")[2])
        self.cwd = cwd
        self.timeout = timeout
        self._client: Any = None
        self._stop: asyncio.Event | None = None
        self._starting: asyncio.Future | None = None
        self._stderr: Any = None
        self._serving: set[asyncio.Task] = set()
        self._closing: asyncio.Future | None = None  # a stop started by an interrupted start
        self._tools: list[Tool] = []
        self.protocol_error: NbagentError | None = None  # the last output that was not MCP
        track(self)

    @property
    def name(self) -> str:
        """``name=``, else the name the server reports, else one made from its command or URL."""
        return self._name or self.reported_name or _label(self.command, self.url)

    def __repr__(self) -> str:
        target = _safe_url(self.url) if self.url else shlex.join(self.command or [])
        return f"McpServer({self.name!r}, {target!r}, running={self._client is not None})"

    # --- what callers use (any thread, any event loop) -------------------------------

    async def list_tools(self) -> list[Tool]:
        """Start the server if needed and return its tools."""
        return await run_on_mcp_thread(self._list())

    def tools(self) -> list[Tool]:
        """``list_tools()`` for code without an event loop (also fine inside Jupyter)."""
        return wait_on_mcp_thread(self._list(), None)

    async def call_tool(self, name: str, args: dict) -> Any:
        """Call the tool the server calls ``name``; returns its ``CallToolResult``."""
        return await run_on_mcp_thread(self._call(name, args))

    def call_tool_sync(self, name: str, args: dict) -> Any:
        return wait_on_mcp_thread(self._call(name, args), None)

    async def aclose(self) -> None:
        """Stop the server (a later call starts it again)."""
        if mcp_thread_started():
            await run_on_mcp_thread(self.stop_here())

    def close(self) -> None:
        if mcp_thread_started():
            wait_on_mcp_thread(self.stop_here(), EXIT_TIMEOUT)

    @property
    def running(self) -> bool:
        return self._client is not None

    # --- on the MCP thread --------------------------------------------------------------

    async def _list(self) -> list[Tool]:
        await self._start()
        return list(self._tools)

    async def _start(self) -> Any:
        if self._client is not None:
            return self._client
        if self._starting is None:
            self._starting = asyncio.get_running_loop().create_future()
            task = asyncio.ensure_future(self._serve(self._starting))
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)
        starting = self._starting
        error: NbagentError
        try:
            await asyncio.wait_for(asyncio.shield(starting), self.timeout)
            return self._client
        except TimeoutError:
            error = RequestTimeout(f"MCP server {self.name!r} did not start and list its tools within "
                                   f"{self.timeout:g} s{self._stderr_tail()}")
        except NbagentError as exc:
            error = exc
        except asyncio.CancelledError:  # the caller gave up (an interrupt): so does the start
            if not starting.done():
                starting.cancel()
                self._closing = asyncio.ensure_future(self.stop_here())
            raise
        finally:
            if self._starting is starting:
                self._starting = None
        if not starting.done():
            starting.cancel()
        await self.stop_here()
        raise error

    async def _serve(self, ready: asyncio.Future) -> None:
        # long because: the server's whole life is one task (anyio needs its context entered and
        # exited in the same task): open, list, publish the session, wait for stop, close.
        from mcp import Client

        warm_up_sdk()
        stop = asyncio.Event()
        client = None
        self.protocol_error = None

        async def on_message(message: Any) -> None:  # the SDK hands over lines that are not MCP
            if isinstance(message, Exception):
                self.protocol_error = ProtocolError(
                    f"MCP server {self.name!r} wrote something that is not MCP to its output: "
                    f"{_not_mcp(message)}")
                if not ready.done():
                    ready.set_exception(self.protocol_error)
                stop.set()

        try:
            async with contextlib.AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    Client(await self._transport(stack), message_handler=on_message, mode="legacy"))
                tools = await self._list_remote(client)
                info = client.server_info
                self.reported_name = (getattr(info, "name", "") or "") if info is not None else ""
                for tool in tools:
                    tool.server = self.name
                self._client, self._stop, self._tools = client, stop, tools
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except BaseException as exc:  # reported to the starter; the task itself ends quietly
            if not ready.done():
                ready.set_exception(self._start_error(exc))
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            if self._client is client:
                self._client = self._stop = None
            if self._stderr is not None and not self._serving - {asyncio.current_task()}:
                self._stderr.close()
                self._stderr = None

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        """The SDK transport for this server (its HTTP client closed with ``stack``)."""
        if self.url is not None:
            import httpx2  # the SDK's HTTP client
            from mcp.client.streamable_http import streamable_http_client

            http = httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0))
            await stack.enter_async_context(http)
            return streamable_http_client(self.url, http_client=http)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        command = self.command or []
        if shutil.which(command[0], path=(self.env or {}).get("PATH")) is None:
            raise ConfigError(f"MCP server {self.name!r}: command {command[0]!r} not found "
                              "(is it installed and on PATH?)")
        if self._stderr is None:
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        # through mcp_relay.py: the server dies with the kernel and its big messages are cut
        relay = [os.path.abspath(mcp_relay.__file__), str(self.max_message_bytes), "--", *command]
        params = StdioServerParameters(command=sys.executable, args=relay, env=self.env,
                                       cwd=None if self.cwd is None else os.fspath(self.cwd))
        return stdio_client(params, errlog=self._stderr)

    async def _list_remote(self, client: Any) -> list[Tool]:
        tools: list[Tool] = []
        cursor = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            for remote in page.tools:
                tools.append(McpTool(self, remote.name, remote.description, remote.input_schema,
                                     name=_tool_name(remote.name)))
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _call(self, name: str, args: dict) -> Any:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = await self._start()
        try:
            return await client.call_tool(name, args)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise ToolError(f"MCP server {self.name!r}: {exc.message}") from None
            error = self.protocol_error or ToolError(
                f"MCP server {self.name!r} closed the connection: it crashed or exited"
                f"{self._stderr_tail()}; the next call starts it again")
        except Exception as exc:  # a broken transport or a reply that is not MCP
            error = self._start_error(exc, during="answering")
        if self._client is client:
            self._client = None
            if self._stop is not None:
                self._stop.set()
        raise error

    @property
    def serving(self) -> bool:
        """Whether a session task is alive (starting, running or stopping)."""
        return bool(self._serving)

    async def stop_here(self) -> None:
        """Stop the server; runs on the MCP thread (``aclose()`` / ``close()`` from elsewhere)."""
        if self._stop is not None:
            self._stop.set()
        if self._client is None:  # still starting: nothing to stop gracefully
            for task in self._serving:
                task.cancel()
        if self._serving:
            await asyncio.wait(set(self._serving))

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            text = os.pread(fd, 4096, max(0, size - 4096)).decode("utf-8", "replace")
            tail = " | ".join(line.strip() for line in text.strip().splitlines()[-3:])[-STDERR_TAIL:]
        except (OSError, ValueError):
            return ""
        return f" (its stderr ends: {tail!r})" if tail else ""

    def _start_error(self, exc: BaseException, during: str = "starting") -> NbagentError:
        """What went wrong, as an NbagentError naming the server."""
        leaf = _leaf(exc)
        if isinstance(leaf, NbagentError):
            return leaf
        who = f"MCP server {self.name!r}"
        if isinstance(leaf, asyncio.CancelledError):
            return ToolError(f"{who} was stopped while {during}")
        if getattr(leaf, "code", None) == _connection_closed():
            return ToolError(f"{who} exited or closed its output while {during}{self._stderr_tail()}")
        module = type(leaf).__module__.split(".")[0]
        if module.startswith("httpx"):
            status = getattr(getattr(leaf, "response", None), "status_code", 0)
            kind = "auth" if status in (401, 403) else "network"
            what = f"HTTP {status}" if status else f"{type(leaf).__name__}: {_first_line(leaf)}"
            return NbagentError(f"{who} at {_safe_url(self.url or '')}: {what}", kind=kind, http_code=status or None)
        if isinstance(leaf, (PermissionError, FileNotFoundError)):
            return ConfigError(f"{who} could not be started: {leaf}")
        if isinstance(leaf, ValueError) and module in ("pydantic", "pydantic_core", "json"):
            return ProtocolError(f"{who} answered something that is not MCP: {_first_line(leaf)}")
        return ToolError(f"{who} failed while {during}: {type(leaf).__name__}: {_first_line(leaf)}"
                         f"{self._stderr_tail()}")


def _not_mcp(error: Exception) -> str:
    """What a line that is not MCP held (its start, quoted), else the parser's first line."""
    errors = getattr(error, "errors", None)
    try:
        found = errors()[0].get("input") if callable(errors) else None
    except Exception:  # noqa: BLE001 - only a nicer message is at stake
        found = None
    if isinstance(found, (str, bytes)) and found:
        text = found.decode("utf-8", "replace") if isinstance(found, bytes) else found
        return f"{text[:80]!r}{' …' if len(text) > 80 else ''} ({_first_line(error)})"
    return _first_line(error)


def mcp_tools(server: str | list[str] | tuple[str, ...] | McpServer, *, name: str | None = None,
              headers: dict[str, str] | None = None, env: dict[str, str] | None = None,
              cwd: str | os.PathLike | None = None, timeout: float = DEFAULT_START_TIMEOUT,
              max_message_bytes: int = MAX_MESSAGE_BYTES) -> McpServer:
    """The tools of an MCP server, listed when first needed: pass the result to ``Agent(mcp=[...])``.

    ``server``: a command (``"uvx mcp-server-time"`` or a list) spoken to over stdio, or an
    ``http(s)://`` URL (streamable HTTP; ``headers=`` are sent with every request). ``name``
    overrides the server's own name (used in cards and to prefix clashing tool names). A command
    starting with ``python`` runs with this interpreter; one not found is a ``config`` error at
    once. A stdio server's message over ``max_message_bytes`` is cut (a result's text, with a note)
    or answered with an error. ``.tools()`` lists them now; ``.close()`` stops the server.
    """
    if isinstance(server, McpServer):
        return server
    return McpServer(server, name=name, headers=headers, env=env, cwd=cwd, timeout=timeout,
                     max_message_bytes=max_message_bytes)


def as_mcp_servers(servers: Any) -> list[McpServer]:
    """``Agent(mcp=...)``: one server or a list of them (commands, URLs, ``McpServer`` objects)."""
    if servers is None:
        return []
    if isinstance(servers, (str, McpServer)):
        servers = [servers]
    return [mcp_tools(s) for s in servers]


def _tool_name(remote: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", remote)[:64] or "tool"


_PYTHON = re.compile(r"python(3(\.\d+)?)?")


def _with_kernel_python(command: list[str]) -> list[str]:
    """A command starting with a bare ``python`` (``python3``, ``python3.11``) runs with this
    interpreter (the kernel's), not whichever ``python`` is first on PATH."""
    return [sys.executable, *command[1:]] if _PYTHON.fullmatch(command[0]) else command


_RUNNERS = {"python", "python3", "uv", "uvx", "npx", "node", "pipx", "sh", "bash", "deno", "bun", "docker"}


def _label(command: list[str] | None, url: str | None) -> str:
    """A name for a server before it names itself: its URL's host, program, module or script."""
    if url is not None:
        return urlsplit(url).hostname or "mcp"
    words = command or ["mcp"]
    program = os.path.splitext(os.path.basename(words[0]))[0]
    if program not in _RUNNERS and not program.startswith("python"):
        return program
    rest = words[1:]
    for i, word in enumerate(rest):
        if word == "-m" and i + 1 < len(rest):
            return rest[i + 1]
        if word == "-c":
            break
        if not word.startswith("-") and word not in ("run", "exec"):
            return os.path.splitext(os.path.basename(word))[0] or program
    return program


def _connection_closed() -> int:
    from mcp_types import CONNECTION_CLOSED

    return CONNECTION_CLOSED


def _safe_url(url: str) -> str:
    """The URL without credentials or query (they may hold secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _leaf(exc: BaseException) -> BaseException:
    """The first meaningful exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (inner or list(exc.exceptions))[0]
    return exc
