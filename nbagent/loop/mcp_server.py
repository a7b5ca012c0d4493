"""An MCP server over streamable HTTP on loopback, guarded by a bearer token (for ``nbagent.serve``).

``McpHttpServer(list_tools, call_tool, port=0)`` (``list_tools`` gives a ``ServedTool`` each) runs the
official ``mcp`` SDK's low-level ``Server`` under uvicorn on a daemon thread, bound to 127.0.0.1 (a free
port by default). Every HTTP request passes ``BearerGuard`` first:

- its ``Host`` must name this loopback address and port, else 421 (no DNS rebinding);
- an ``Origin`` header, when sent, must be a loopback origin, else 403 (no web page calls it);
- ``Authorization: Bearer <token>`` must match the random token (``hmac.compare_digest``), else 401.

The token lives in ``token`` and in ``token_path``, a file only its owner may read (like Jupyter's
kernel connection files), removed at ``stop()``: the clients' setup lines and the stdio bridge read it
from there, so no notebook output holds it; no repr, log line or error message carries it. ``call_tool(client,
name, args)`` gets the client (its title, else its name, and version from its ``initialize``) and
returns ``(text, is_error)``; an error becomes an MCP tool result with ``isError`` set.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from collections.abc import Awaitable, Callable

from ..core.errors import ConfigError
from ..providers.base import ToolSpec

LOOPBACK = "127.0.0.1"
PATH = "/mcp"
START_TIMEOUT = 20.0  # seconds uvicorn may take to listen
STOP_TIMEOUT = 10.0
GRACE = 1  # seconds open requests (a client's event stream) get to end when the server stops
SERVER_NAME = "nbagent"


@dataclass(frozen=True)
class ClientInfo:
    """Who called: the MCP client as it introduced itself in ``initialize`` (its title, else its name)."""

    name: str = "mcp-client"
    version: str = ""

    @property
    def label(self) -> str:
        """``"Claude Code 2.1.0"``: the name, and the version when the client gave one."""
        return f"{self.name} {self.version}".strip()


@dataclass(frozen=True)
class ServedTool:
    """A tool as listed to clients: its spec, and whether it only reads (MCP's ``readOnlyHint``: Codex
    then calls it without asking; a tool that edits or runs code is left to the client's own prompt)."""

    spec: ToolSpec
    read_only: bool


TOKEN_VARIABLE = "NBAGENT_MCP_TOKEN"  # where the clients' configurations and the stdio bridge take the token from


def token_path(port: int) -> Path:
    """Where the server on ``port`` keeps its token: Jupyter's runtime folder (else ~/.nbagent/run)."""
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        folder = Path(jupyter_runtime_dir())
    except ImportError:
        folder = Path.home() / ".nbagent" / "run"
    return folder / f"nbagent-mcp-{port}.token"


def write_token(path: Path, token: str) -> None:
    """The token, in a file only this user may read (created so: never briefly readable by others)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token)


def read_token(url: str) -> str:
    """The token for the server at ``url``: ``$NBAGENT_MCP_TOKEN``, else its token file."""
    given = os.environ.get(TOKEN_VARIABLE, "").strip()
    if given:
        return given
    port = urlsplit(url).port
    path = token_path(port) if port else None
    if path is None or not path.is_file():
        raise ConfigError(f"no token for {url}: set ${TOKEN_VARIABLE}, or run this on the machine whose "
                          "notebook serves it (its token file is gone when the server stops)")
    return path.read_text(encoding="utf-8").strip()


CallTool = Callable[[ClientInfo, str, dict], Awaitable[tuple[str, bool]]]


def require_loopback(host: str) -> None:
    """Refuse (``ConfigError``) a bind address that is not this machine's loopback."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ConfigError(f"nbagent serves the notebook on loopback only (127.0.0.1), not on {host!r}: "
                          "anyone who can reach the port could run code in this kernel")


class BearerGuard:
    """ASGI middleware: loopback ``Host``, loopback ``Origin`` (if any) and the bearer token."""

    def __init__(self, app: Any, token: str, port_of: Callable[[], int]) -> None:
        self.app, self.token, self.port_of = app, token, port_of

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self.refusal(headers)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, text = refusal
        extra = [(b"www-authenticate", b'Bearer realm="nbagent"')] if status == 401 else []
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"), *extra]})
        await send({"type": "http.response.body", "body": text.encode()})

    def refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        """(status, reason) for a request to refuse; None lets it through."""
        port = self.port_of()
        if headers.get("host", "") not in {f"{LOOPBACK}:{port}", f"localhost:{port}"}:
            return 421, "Host must be this loopback server"
        origin = headers.get("origin")
        if origin is not None and not _loopback_origin(origin):
            return 403, "Origin not allowed: this server answers local MCP clients, not web pages"
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return 401, "a bearer token is required (Authorization: Bearer <token>)"
        return None


def _loopback_origin(origin: str) -> bool:
    host = urlsplit(origin).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class McpHttpServer:
    """The running server: ``url``, ``token``, ``port``, ``stop()``."""

    def __init__(self, list_tools: Callable[[], list[ServedTool]], call_tool: CallTool, *, port: int = 0,
                 host: str = LOOPBACK, instructions: str = "") -> None:
        require_loopback(host)
        import uvicorn

        self.token = secrets.token_urlsafe(32)
        self.list_tools, self.call_tool = list_tools, call_tool
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._socket.bind((LOOPBACK, port))
        except OSError as exc:
            self._socket.close()
            raise ConfigError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}") from None
        self.port = int(self._socket.getsockname()[1])
        self.url = f"http://{LOOPBACK}:{self.port}{PATH}"
        self.token_path = token_path(self.port)
        app = BearerGuard(self._mcp_app(instructions), self.token, lambda: self.port)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                timeout_graceful_shutdown=GRACE)  # an open client stream does not hold stop()
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name="nbagent-serve", daemon=True)
        self._thread.start()
        write_token(self.token_path, self.token)
        deadline = time.monotonic() + START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ConfigError(f"the MCP server did not start on {LOOPBACK}:{self.port}")
            time.sleep(0.01)

    def _mcp_app(self, instructions: str) -> Any:
        import mcp_types as types
        from mcp.server.lowlevel import Server
        from mcp.server.transport_security import TransportSecuritySettings

        async def list_tools(ctx: Any, params: Any) -> Any:
            return types.ListToolsResult(tools=[
                types.Tool(name=t.spec.name, description=t.spec.description, input_schema=t.spec.input_schema,
                           annotations=types.ToolAnnotations(read_only_hint=t.read_only))
                for t in self.list_tools()])

        async def call_tool(ctx: Any, params: Any) -> Any:
            text, is_error = await self.call_tool(_client_of(ctx), params.name, dict(params.arguments or {}))
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

        server: Any = Server(SERVER_NAME, instructions=instructions or None, on_list_tools=list_tools,
                             on_call_tool=call_tool)
        security = TransportSecuritySettings(  # the SDK's own check, behind BearerGuard's
            enable_dns_rebinding_protection=True, allowed_hosts=[f"{LOOPBACK}:*", "localhost:*"],
            allowed_origins=[f"http://{LOOPBACK}:*", "http://localhost:*"])
        return server.streamable_http_app(streamable_http_path=PATH, host=LOOPBACK, transport_security=security)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop serving and free the port (idempotent)."""
        self._server.should_exit = True
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(STOP_TIMEOUT)
        self._socket.close()
        self.token_path.unlink(missing_ok=True)

    def __repr__(self) -> str:  # never the token
        return f"McpHttpServer(url={self.url!r}, running={self.running})"


def _client_of(ctx: Any) -> ClientInfo:
    """The client's display name (its ``title`` when it sends one: Claude Code sends name "claude-code",
    title "Claude Code"), else its ``name``, and its version."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    name = str(getattr(info, "title", "") or getattr(info, "name", "") or "").strip()[:80]
    version = str(getattr(info, "version", "") or "").strip()[:40]
    return ClientInfo(name or "mcp-client", version)

