"""``python -m nbagent mcp --connect URL``: a served notebook for clients that speak MCP over stdio only.

The bridge is an MCP server on stdin/stdout (the official SDK) that forwards ``tools/list`` and
``tools/call`` to the streamable-HTTP server ``nbagent.serve()`` runs at ``URL``, with the bearer
token from ``$NBAGENT_MCP_TOKEN`` or the server's token file (mcp_server.py). It connects at the first
request, introducing itself upstream with the stdio client's own name and version, so approval cards
and provenance name the real agent. A server that cannot be reached is an MCP error on each request.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import ConfigError
from .mcp_server import read_token


class Upstream:
    """The HTTP session to the served notebook, opened once in its own task (anyio wants it so)."""

    def __init__(self, url: str, token: str) -> None:
        import anyio

        self.url, self.token = url, token
        self.wanted, self.ready = anyio.Event(), anyio.Event()
        self.client_info: Any = None
        self.client: Any = None
        self.error: str = ""

    async def hold(self) -> None:
        """Wait for the first request, connect, and keep the session until cancelled."""
        import anyio
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        await self.wanted.wait()
        try:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"},
                                          timeout=httpx2.Timeout(30.0, read=None)) as http:
                transport = streamable_http_client(self.url, http_client=http)
                async with Client(transport, client_info=self.client_info, mode="legacy") as client:
                    self.client = client
                    self.ready.set()
                    await anyio.sleep_forever()
        except Exception as exc:  # told to the client at each request
            self.error = f"cannot reach the served notebook at {self.url}: {type(exc).__name__}"
            self.ready.set()

    async def session(self, ctx: Any) -> Any:
        if not self.wanted.is_set():
            params = getattr(ctx.session, "client_params", None)
            self.client_info = getattr(params, "client_info", None)
            self.wanted.set()
        await self.ready.wait()
        if self.client is None:
            raise ConfigError(self.error)
        return self.client


async def bridge(url: str) -> None:
    """Serve ``url``'s tools on stdin/stdout until stdin closes."""
    import anyio
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    upstream = Upstream(url, read_token(url))

    async def list_tools(ctx: Any, params: Any) -> Any:
        return await (await upstream.session(ctx)).list_tools()

    async def call_tool(ctx: Any, params: Any) -> Any:
        return await (await upstream.session(ctx)).call_tool(params.name, dict(params.arguments or {}))

    server: Any = Server("nbagent", on_list_tools=list_tools, on_call_tool=call_tool)
    async with anyio.create_task_group() as group:
        group.start_soon(upstream.hold)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        group.cancel_scope.cancel()


def run_bridge(url: str) -> str:
    """The CLI's ``mcp --connect URL``: runs until the client closes stdin."""
    import anyio

    if not url.startswith(("http://127.0.0.1:", "http://localhost:")):
        raise ConfigError(f"--connect takes the loopback URL nbagent.serve() printed (http://127.0.0.1:PORT/mcp), "
                          f"not {url!r}")
    anyio.run(bridge, url)
    return ""
