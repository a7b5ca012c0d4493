"""An MCP server of the tests' own (the SDK's FastMCP, now ``MCPServer``).

``python mcp_server.py`` serves over stdio; ``--http-socket FD`` serves streamable HTTP at /mcp on the
listening socket FD its parent passed (bound and listening before the server starts: no port to race for); ``--garbage`` writes lines that are not JSON-RPC to stdout instead, ``--silent`` nothing; ``--linger`` keeps the
process alive after its input ends.
"""

from __future__ import annotations

import os
import struct
import sys
import time
import zlib
from typing import Annotated

from pydantic import Field

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image

server = MCPServer("nbagent-test")


def red_png(size: int = 4) -> bytes:
    """A small red square as PNG bytes (no imaging library needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def forecast(city: str) -> dict:
    """A made-up weather forecast (structured content)."""
    return {"city": city, "temperature_c": 21, "sky": "clear"}


@server.tool()
def red_square() -> Image:
    """A red square image."""
    return Image(data=red_png(), format="png")


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ValueError(message)


@server.tool()
def server_pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def crash() -> str:
    """Exit the server process at once."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def request_header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header ('' when absent or not over HTTP)."""
    headers = ctx.headers or {}
    return headers.get(name.lower(), "")


@server.tool()
def big(megabytes: int) -> str:
    """A reply of that many megabytes of text."""
    return "x" * (megabytes * 1024 * 1024)


@server.tool()
def match(text: Annotated[str, Field(pattern=r"^(a|aa)+$")]) -> str:
    """Echo a text of a's (its schema's pattern backtracks on a long non-match)."""
    return f"matched {len(text)}"


@server.tool()
def get_current_time(timezone: str) -> str:
    """A fixed time (its name clashes with mcp-server-time's tool on purpose)."""
    return f"12:00 in {timezone}"


if __name__ == "__main__":
    if "--silent" in sys.argv:
        time.sleep(60)
    elif "--garbage" in sys.argv:
        for _ in range(3):
            print("hello, this is not JSON-RPC", flush=True)
        time.sleep(60)
    elif "--http-socket" in sys.argv:  # serve on the listening socket the parent made and passed as this fd
        import socket

        import anyio
        import uvicorn

        listening = socket.socket(fileno=int(sys.argv[sys.argv.index("--http-socket") + 1]))
        web = uvicorn.Server(uvicorn.Config(server.streamable_http_app(host="127.0.0.1"), log_level="warning"))
        anyio.run(web.serve, [listening])
    else:
        server.run()
        if "--linger" in sys.argv:  # outlive the end of input: only a kill stops it now
            time.sleep(600)
