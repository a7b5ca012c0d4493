"""A real, scriptable HTTP server on 127.0.0.1 for provider fault tests.

Each incoming request pops the next *behaviour* from a queue; a behaviour is
``fn(exchange)`` and writes whatever bytes it likes through the
``Exchange`` (status line, chunks, a dropped socket, a stall). Ready-made
behaviours take the wire body as bytes, so any SSE format can reuse them::

    with FaultServer() as server:
        server.push(reply(429, b'{"error": ...}', {"retry-after": "0"}), sse(body))
        provider = OpenAIProvider("m", base_url=server.url + "/v1")
        ...
        assert len(server.requests) == 2

The server runs in a daemon thread; ``stop()`` (or leaving the ``with``)
interrupts stalled behaviours and closes the socket. Every request is
recorded (method, path, headers, parsed JSON body). The ``fault_server``
pytest fixture (tests/conftest.py) gives each test a started server; each
provider's wire format is in ``support.wires``.
"""

from __future__ import annotations

import json
import queue
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

__all__ = [
    "FaultServer",
    "Exchange",
    "RecordedRequest",
    "reply",
    "sse",
    "drop_after",
    "empty_200",
    "stall_after",
    "request_for",
    "collect",
    "text_of",
]


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None


class Exchange:
    """One request/response; behaviours write the response through it."""

    def __init__(self, handler: BaseHTTPRequestHandler, request: RecordedRequest, stopping: threading.Event):
        self.handler = handler
        self.request = request
        self._stopping = stopping
        self._chunked = False

    def start(self, status: int = 200, headers: dict | None = None, *, chunked: bool = True) -> None:
        """Send the status line and headers (chunked transfer encoding by default)."""
        self._chunked = chunked
        self.handler.send_response(status)
        for name, value in (headers or {}).items():
            self.handler.send_header(name, value)
        if chunked:
            self.handler.send_header("Transfer-Encoding", "chunked")
        self.handler.end_headers()
        self.handler.wfile.flush()

    def write(self, data: bytes) -> None:
        """Send bytes now (as one HTTP chunk when chunked)."""
        if not data:
            return
        if self._chunked:
            data = b"%x\r\n%s\r\n" % (len(data), data)
        self.handler.wfile.write(data)
        self.handler.wfile.flush()

    def end(self) -> None:
        """Finish the body normally."""
        if self._chunked:
            self.handler.wfile.write(b"0\r\n\r\n")
            self.handler.wfile.flush()

    def drop(self) -> None:
        """Cut the connection without finishing the body."""
        self.handler.close_connection = True
        try:
            self.handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def sleep(self, seconds: float) -> bool:
        """Wait (interrupted by ``stop()``); False when the server is stopping."""
        return not self._stopping.wait(seconds)


Behaviour = Callable[[Exchange], None]


def reply(status: int, body: bytes | dict | str = b"", headers: dict | None = None) -> Behaviour:
    """A complete, non-streamed reply (a dict body is sent as JSON)."""
    if isinstance(body, dict):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()

    def behave(ex: Exchange) -> None:
        hdrs = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
        ex.start(status, hdrs, chunked=False)
        ex.handler.wfile.write(body)

    return behave


def sse(body: bytes, *, chunk_size: int | None = None, delay: float = 0.0, headers: dict | None = None) -> Behaviour:
    """HTTP 200 streaming ``body``, optionally in ``chunk_size`` pieces ``delay`` seconds apart."""

    def behave(ex: Exchange) -> None:
        ex.start(200, {"Content-Type": "text/event-stream", **(headers or {})})
        step = chunk_size or len(body) or 1
        for i in range(0, len(body), step):
            if i and delay and not ex.sleep(delay):
                return
            ex.write(body[i : i + step])
        ex.end()

    return behave


def drop_after(prefix: bytes, *, status: int = 200) -> Behaviour:
    """Stream ``prefix`` (byte by byte in a few writes), then cut the connection."""

    def behave(ex: Exchange) -> None:
        ex.start(status, {"Content-Type": "text/event-stream"})
        half = len(prefix) // 2
        ex.write(prefix[:half])
        ex.write(prefix[half:])
        ex.sleep(0.05)  # let the client read what was sent
        ex.drop()

    return behave


def empty_200(*, content_type: str = "text/event-stream") -> Behaviour:
    """HTTP 200 with an empty body."""

    def behave(ex: Exchange) -> None:
        ex.start(200, {"Content-Type": content_type, "Content-Length": "0"}, chunked=False)

    return behave


def stall_after(prefix: bytes, seconds: float = 10.0) -> Behaviour:
    """Stream ``prefix`` then go silent for ``seconds`` (a read timeout for the client)."""

    def behave(ex: Exchange) -> None:
        ex.start(200, {"Content-Type": "text/event-stream"})
        ex.write(prefix)
        if ex.sleep(seconds):
            ex.end()

    return behave


def silent(seconds: float = 10.0) -> Behaviour:
    """Take the request and answer nothing for ``seconds`` (a first-byte timeout for the client), then hang up."""

    def behave(ex: Exchange) -> None:
        ex.sleep(seconds)
        ex.drop()

    return behave


def _unscripted(ex: Exchange) -> None:
    reply(418, {"error": {"message": "fault server: no behaviour scripted"}})(ex)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = RecordedRequest(
            self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, parsed
        )
        owner = self.server.owner
        owner.requests.append(request)
        try:
            behaviour = owner._queue.get_nowait()
        except queue.Empty:
            behaviour = _unscripted
        try:
            behaviour(Exchange(self, request, owner._stopping))
        except OSError:  # the client went away: fine for a fault server
            self.close_connection = True

    do_GET = do_POST

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # hundreds of clients may connect at once (load tests)
    block_on_close = False
    owner: "FaultServer"

    def handle_error(self, request, client_address) -> None:  # keep test output quiet
        pass


@dataclass
class FaultServer:
    """Scripted HTTP server; ``push`` behaviours, read ``requests``, always ``stop``."""

    requests: list[RecordedRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._queue: queue.Queue[Behaviour] = queue.Queue()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash)."""
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def push(self, *behaviours: Behaviour) -> "FaultServer":
        """Queue behaviours; each request consumes the next one."""
        for behaviour in behaviours:
            self._queue.put(behaviour)
        return self

    def start(self) -> "FaultServer":
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FaultServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# --- driving a provider against the server ------------------------------------------


def request_for(provider):
    """A one-message request for ``provider``'s model."""
    from nbagent.core.messages import Message, TextPart
    from nbagent.providers.base import ModelRequest

    return ModelRequest(provider.model, [Message("user", [TextPart("hi")])])


async def collect(provider) -> tuple[list, Any]:
    """Every event of one streamed call and the NbagentError it ended with (or None)."""
    from nbagent.core.errors import NbagentError

    events, error = [], None
    try:
        async for event in provider.stream(request_for(provider)):
            events.append(event)
    except NbagentError as exc:
        error = exc
    finally:
        await provider.aclose()
    return events, error


def text_of(events) -> str:
    from nbagent.providers.base import TextDelta

    return "".join(e.text for e in events if isinstance(e, TextDelta))
