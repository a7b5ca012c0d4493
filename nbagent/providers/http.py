"""The HTTP + SSE machinery every HTTP provider shares.

``HTTPProvider.stream`` POSTs the request a subclass builds, maps error
replies to ``NbagentError`` (see ERRORS.md), retries retryable failures
that happen before the first byte of a successful body (and retryable
in-band stream errors that come before any output; never a server that took
the request and stayed silent past ``first_byte_timeout``: it says how long it
waits meanwhile, with ``Waiting`` events), decodes the SSE body
and runs it through the subclass's parser. A 2xx body that is an HTML or
XML page (a proxy, a login portal) is a ``protocol`` error naming its
type. Subclasses implement ``build_http_request``, ``new_parser`` and, if
their error envelope needs it, ``parse_error``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import re
import weakref
from typing import TYPE_CHECKING, Any, Protocol
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping

from ..core.errors import ConfigError, NbagentError, NetworkError, ProtocolError, RequestTimeout, redact
from .credentials import clean_api_key, install_log_filter, split_base_url
from .base import NOTICES, Event, ModelRequest, Provider, Retrying, Usage, Waiting
from .http_errors import classify_error, error_from_payload, is_context_length_message, retry_after_from_headers
from .sse import SSEDecoder, SSEEvent
from .stream_json import UNDECODED, decode_payloads, parse_json

if TYPE_CHECKING:
    import httpx

install_log_filter()  # httpx logs request URLs (and so any key in a query) at INFO
# httpx itself is imported at the first request (``import httpx`` in the methods that use it): building a
# provider, and so ``Agent()`` and its first display, does not pay for it (issue #32)

__all__ = [
    "HTTPProvider",
    "StreamParser",
    "classify_error",
    "error_from_payload",
    "is_context_length_message",
    "parse_json",
    "retry_after_from_headers",
]

class StreamParser(Protocol):
    """What ``new_parser`` returns: SSE events in, provider events out.

    ``payload`` is the event's data already decoded as JSON (``stream_json.decode_payloads``), or
    ``UNDECODED``: then the parser decodes ``event.data`` itself (``parse_json``).
    """

    def feed(self, event: SSEEvent, payload: Any = UNDECODED) -> list[Event]: ...

    def close(self) -> list[Event]: ...


# --- error helpers -----------------------------------------------------------


class HTTPProvider(Provider):
    """Base class of providers that stream SSE over HTTP with httpx."""

    name = "http"
    default_base_url: str = ""
    sse_raw_lines: bool = False
    retry_base_delay: float = 0.5  # seconds; doubled on each retry, with jitter
    retry_max_delay: float = 8.0
    max_retry_after: float = 60.0  # cap on a server-requested wait
    waiting_notice_after: float = 5.0  # seconds without a reply before the step says it waits
    waiting_notice_every: float = 1.0  # then how often the notice counts up

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        connect_timeout: float = 10.0,
        first_byte_timeout: float = 30.0,
        read_timeout: float = 120.0,
        max_retries: int = 2,
        total_timeout: float = 90.0,
        http_client: httpx.AsyncClient | None = None,
        context_window: int | None = None,
        retry_base_delay: float | None = None,
    ) -> None:
        self.model = model
        self._api_key = clean_api_key(api_key, self.name)
        self.base_url, self._base_params = split_base_url(base_url or self.default_base_url)
        self.connect_timeout = connect_timeout  # to open a connection
        # from sending the request to the reply's headers; a server that took the request and stays
        # silent this long is given up, not asked again (it holds the request: a retry waits again)
        self.first_byte_timeout = first_byte_timeout
        self.read_timeout = read_timeout  # the longest silence between two reads of a streaming reply
        self.max_retries = max(0, int(max_retries))
        # every attempt until a reply's headers, with the waits between them (a streaming reply may run longer)
        self.total_timeout = float(total_timeout)
        if retry_base_delay is not None:
            self.retry_base_delay = retry_base_delay
        if context_window is not None:
            self.context_window = context_window
        self.http_client = http_client  # caller-owned; never closed here
        self._client: httpx.AsyncClient | None = None
        self._client_loop: weakref.ref | None = None
        self._guard: Any = None
        self._streams = 0  # replies being read now; aclose() waits for the last one
        self._close_when_idle = False

    @property
    def api_key(self) -> str | None:
        """The key in use (never shown in repr or errors)."""
        return self._api_key

    def __repr__(self) -> str:
        return redact(f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})")

    # -- subclass hooks -------------------------------------------------------

    def build_http_request(self, request: ModelRequest) -> tuple[str, dict, dict]:
        """Return (url, headers, json body) for one streaming call."""
        raise NotImplementedError

    def new_parser(self, request: ModelRequest) -> StreamParser:
        """Return a fresh parser for one response body."""
        raise NotImplementedError

    def parse_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> NbagentError:
        """Map a non-2xx reply to an error (understands the usual JSON envelopes)."""
        text = body.decode("utf-8", errors="replace").strip()
        try:
            payload = json.loads(text) if text else None
        except ValueError:
            payload = None
        if isinstance(payload, (dict, list)) and payload:
            error = error_from_payload(payload, status=status, provider=self.name)
        else:
            import httpx

            reason = httpx.codes.get_reason_phrase(status)
            detail = text[:300] if text and not text.startswith("<") else reason
            error = classify_error(status, f"HTTP {status}: {detail}".rstrip(": "), provider=self.name)
        error.http_code = status
        return error

    # -- connection -----------------------------------------------------------

    async def _get_client(self) -> httpx.AsyncClient:
        if self.http_client is not None:
            return self.http_client
        import httpx

        loop = asyncio.get_running_loop()
        bound = self._client_loop() if self._client_loop else None
        if self._client is None or self._client.is_closed or bound is not loop:
            # A client's pooled connections belong to the loop that opened them:
            # a new loop (a second asyncio.run) gets a fresh client.
            client = httpx.AsyncClient(
                timeout=self._timeout(), limits=httpx.Limits(max_keepalive_connections=10)
            )
            # The guard is an async generator started on this loop, so the loop's
            # shutdown (asyncio.run's shutdown_asyncgens) closes the client in time.
            guard = _close_on_loop_shutdown(client)
            await guard.__anext__()
            self._client, self._guard = client, guard
            self._client_loop = weakref.ref(loop)
        return self._client

    def _timeout(self) -> httpx.Timeout:
        import httpx

        return httpx.Timeout(self.read_timeout, connect=self.connect_timeout)

    async def aclose(self) -> None:
        """Close the pooled client (a later call opens a new one).

        Streams still being read (another conversation sharing this provider) finish first:
        the last one closes the client.
        """
        if self._streams:
            self._close_when_idle = True
            return
        self._close_when_idle = False
        guard, self._guard = self._guard, None
        bound = self._client_loop() if self._client_loop else None
        self._client, self._client_loop = None, None
        if guard is not None and bound is asyncio.get_running_loop():
            await guard.aclose()

    # -- streaming ------------------------------------------------------------

    def _raise_for_json_body(self, raw: bytes) -> None:
        """A 2xx ``application/json`` reply to a streaming call: an error or a non-streaming server."""
        text = raw.decode("utf-8", errors="replace").strip()
        if not text.startswith(("{", "[")):
            return  # mislabelled SSE: decode it normally
        payload = parse_json(text, self.name)
        first = payload[0] if isinstance(payload, list) and payload else payload
        if isinstance(first, dict) and first.get("error"):
            raise error_from_payload(first, provider=self.name)
        raise ProtocolError(
            "the server answered with a single JSON document instead of an event stream "
            "(does it support streaming?)",
            provider=self.name,
        )


    def _retry_delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_retry_after)
        delay = min(self.retry_base_delay * (2**attempt), self.retry_max_delay)
        return delay * random.uniform(0.75, 1.25)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        """POST the request, retry what may be retried, yield parsed events."""
        async for batch in self.stream_batches(request):
            for event in batch:
                if not isinstance(event, NOTICES):  # a notice for the loop, not part of the answer
                    yield event

    async def stream_batches(self, request: ModelRequest) -> AsyncIterator[list[Event]]:
        """The parsed events of each network read (see ``Provider.stream_batches``).

        This is the one path of an HTTP provider (``stream`` is its flat view): a subclass that
        prepares requests (``LocalProvider``) overrides this method, not ``stream``.
        """
        url, headers, body = self.build_http_request(request)
        import httpx

        url = str(httpx.URL(url).copy_merge_params(tuple(self._base_params))) if self._base_params else url
        self._streams += 1
        try:
            async for batch in self._attempts(request, url, headers, body):
                yield batch
        finally:
            self._streams -= 1
            if not self._streams and self._close_when_idle:
                await self.aclose()

    async def _attempts(self, request: ModelRequest, url: str, headers: dict,
                        body: dict) -> AsyncIterator[list[Event]]:
        import httpx

        attempt = 0
        deadline = asyncio.get_running_loop().time() + self.total_timeout
        while True:
            client = await self._get_client()
            progress = _Progress()
            cause: BaseException | None = None
            try:
                sending = self._send(client, url, headers, body, deadline)
                waits = sending.waits()
                try:
                    async for waiting in waits:
                        yield [waiting]
                finally:  # also when the caller stops reading mid-wait (Stop): the request is cancelled now
                    await waits.aclose()
                response = sending.response
                try:
                    if not 200 <= response.status_code < 300:
                        error = await self._error_reply(response)
                    else:
                        async for batch in self._body_batches(request, response, progress):
                            progress.output = progress.output or any(not isinstance(e, Usage) for e in batch)
                            yield batch
                        return
                finally:
                    await response.aclose()
            except NbagentError as exc:
                if not (progress.parsing and exc.retryable) or progress.output:
                    raise
                error, progress.got_bytes = exc, False  # an in-band error before any output: ask again
            except (FirstByteTimeout, httpx.TimeoutException, httpx.UnsupportedProtocol, httpx.TransportError,
                    httpx.DecodingError) as exc:
                error, cause = self._transport_error(exc, url, progress.got_bytes), exc
            if progress.got_bytes:  # output may have started: never retry
                raise error from cause
            silent = isinstance(cause, FirstByteTimeout)  # the server holds the request: never ask again
            delay = self._retry_delay(attempt, error.retry_after)
            in_time = asyncio.get_running_loop().time() + delay < deadline
            if error.retryable and not silent and attempt < self.max_retries and in_time:
                yield [Retrying(attempt + 2, self.max_retries + 1, _one_line(error.message), delay, _host(url))]
                await asyncio.sleep(delay)
                attempt += 1
                continue
            if attempt or (error.retryable and not in_time):
                late = "" if in_time else f", total_timeout {self.total_timeout:g} s reached"
                error.message = f"{error.message} (after {attempt + 1} attempt{'s' if attempt else ''}{late})"
                error.args = (error.message,)
            raise error from cause

    def _send(self, client: httpx.AsyncClient, url: str, headers: dict, body: dict, deadline: float) -> _Sending:
        """POST; the reply's headers are awaited at most ``first_byte_timeout`` seconds and never
        past ``deadline`` (the loop's clock: the end of ``total_timeout``)."""
        req = client.build_request("POST", url, headers=headers, json=body, timeout=self._timeout())
        limit = min(self.first_byte_timeout, max(0.0, deadline - asyncio.get_running_loop().time()))
        return _Sending(client.send(req, stream=True), limit, self.first_byte_timeout, _host(url),
                        self.waiting_notice_after, self.waiting_notice_every)

    async def _error_reply(self, response: httpx.Response) -> NbagentError:
        """The NbagentError of a non-2xx reply, with its retry advice."""
        raw = await response.aread()
        error = self.parse_error(response.status_code, raw, response.headers)
        error.retry_after = _first(retry_after_from_headers(response.headers), error.retry_after)
        _apply_should_retry(error, response.headers)
        return error

    async def _body_batches(self, request: ModelRequest, response: httpx.Response,
                            progress: _Progress) -> AsyncIterator[list[Event]]:
        """Decode a 2xx body (SSE, or one plain JSON document): the parsed events of each read."""
        content_type = _content_type(response.headers)
        if content_type in _NOT_A_STREAM:
            raw = await response.aread()
            raise ProtocolError(f"the server answered HTTP {response.status_code} with {content_type} "
                                f"instead of an event stream{_page_title(raw)}",
                                provider=self.name)
        if content_type == "application/json":
            raw = await response.aread()
            progress.got_bytes = bool(raw)
            self._raise_for_json_body(raw)
            chunks = _once(raw)
        else:
            chunks = response.aiter_bytes()
        parser = self.new_parser(request)
        decoded = takes_payload(parser)
        decoder = SSEDecoder(raw_lines=self.sse_raw_lines)
        progress.parsing = True
        async for chunk in chunks:
            if chunk:
                progress.got_bytes = True
                async for batch in _parsed(parser, decoder.events(chunk), decoded=decoded):
                    yield batch
        if not progress.got_bytes:
            raise ProtocolError("the server replied HTTP 200 with an empty body",
                                http_code=response.status_code, provider=self.name)
        async for batch in _parsed(parser, decoder.flush(), closing=True, decoded=decoded):
            yield batch

    def _transport_error(self, exc: Exception, url: str, got_bytes: bool) -> NbagentError:
        """The NbagentError for an httpx failure; raises at once for what no retry can fix."""
        import httpx

        if isinstance(exc, FirstByteTimeout) and exc.limit < self.first_byte_timeout:  # cut by total_timeout
            return RequestTimeout(f"no reply from {_host(url)} in the {exc.limit:.2g} s left of total_timeout",
                                  retryable=True, provider=self.name)
        if isinstance(exc, FirstByteTimeout):
            return RequestTimeout(f"no reply from {_host(url)} within {self.first_byte_timeout:g} s "
                                  "(first_byte_timeout): the server took the request and sent nothing; not "
                                  "asked again (raise first_byte_timeout= for a slow server)",
                                  retryable=True, provider=self.name)
        if isinstance(exc, httpx.TimeoutException):
            connect = isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout))
            if connect:
                message = f"could not connect to {_host(url)} within {self.connect_timeout:g} s"
            else:
                message = f"no data from {_host(url)} for {self.read_timeout:g} s (read_timeout)"
            return RequestTimeout(message, retryable=connect, provider=self.name)
        if isinstance(exc, httpx.UnsupportedProtocol):
            raise ConfigError(f"bad base_url {self.base_url!r}: {_describe(exc)}",
                              provider=self.name) from exc
        if isinstance(exc, httpx.DecodingError):
            raise ProtocolError(f"could not decode the response body ({_describe(exc)})",
                                provider=self.name) from exc
        if got_bytes:
            message = f"the connection to {_host(url)} broke mid-stream ({_describe(exc)})"
        else:
            message = f"could not reach {_host(url)} ({_describe(exc)})"
        return NetworkError(message, retryable=not got_bytes, provider=self.name)


def takes_payload(parser: StreamParser) -> bool:
    """Whether ``parser.feed`` takes the decoded JSON too; a parser written before it (a plugin's) is fed
    the event alone."""
    try:
        inspect.signature(parser.feed).bind(None, None)
    except (TypeError, ValueError):  # it takes the event only (or shows no signature)
        return False
    return True


async def _parsed(parser: StreamParser, sses: Iterable[SSEEvent], closing: bool = False,
                  decoded: bool = True) -> AsyncIterator[list[Event]]:
    """The events of these SSE events (their JSON decoded by ``decode_payloads``) as one batch; what came before a
    parse error is still delivered. Each SSE event and its JSON die once parsed: a read's worth alive at once
    would be promoted through the garbage collector's generations and trigger full collections."""
    batch: list[Event] = []
    try:
        if decoded:
            for sse, payload in decode_payloads(sses):
                batch.extend(parser.feed(sse, payload))
        else:
            for sse in sses:
                batch.extend(parser.feed(sse))
        if closing:
            batch.extend(parser.close())
    except NbagentError:
        if batch:
            yield batch
        raise
    if batch:
        yield batch


class _Sending:
    """One request on its way: ``waits()`` yields a :class:`Waiting` notice now and then until the reply's
    headers come (then ``response``), or raises :class:`FirstByteTimeout` at ``limit`` seconds."""

    def __init__(self, send: Any, limit: float, first_byte_timeout: float, host: str, after: float,
                 every: float) -> None:
        self._send, self.limit, self.shown_limit, self.host = send, limit, first_byte_timeout, host
        self.after, self.every = after, max(every, 0.05)
        self.response: Any = None

    async def waits(self) -> AsyncGenerator[Waiting, None]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        task = asyncio.ensure_future(self._send)
        try:
            tick = self.after
            while True:
                waited = loop.time() - start
                timeout = max(0.0, min(self.limit, tick) - waited)
                done, _ = await asyncio.wait({task}, timeout=timeout)
                if done:
                    self.response = task.result()  # a transport error is raised here
                    return
                waited = loop.time() - start
                if waited >= self.limit:
                    raise FirstByteTimeout(self.limit)
                if waited >= tick:
                    yield Waiting(waited, self.shown_limit, self.host)
                    tick += self.every
        finally:
            if not task.done():
                task.cancel()
            if self.response is None:  # given up, or the consumer went away: nothing left open
                await _settle(task)


async def _settle(task: asyncio.Future) -> None:
    """Wait for a cancelled send to end; close a reply that came anyway."""
    try:
        response = await task
    except BaseException:  # noqa: BLE001 - cancelled or failed: nothing to close
        return
    await response.aclose()


class FirstByteTimeout(Exception):
    """The server took the request but sent no reply headers within ``limit`` seconds
    (``first_byte_timeout``, or less when ``total_timeout`` ran out first). Not an httpx exception, so
    that this module is importable without httpx; ``_attempts`` catches it beside httpx's timeouts."""

    def __init__(self, limit: float) -> None:
        super().__init__(f"no reply within {limit:g} s")
        self.limit = limit


class _Progress:
    """How far a response body got: bytes read (then nothing is retried), parser started, output yielded."""

    got_bytes = False
    parsing = False
    output = False


async def _close_on_loop_shutdown(client: httpx.AsyncClient) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await client.aclose()


_NOT_A_STREAM = {"text/html", "application/xhtml+xml", "text/xml", "application/xml"}


def _content_type(headers: Mapping[str, str]) -> str:
    return headers.get("content-type", "").split(";")[0].strip().lower()


def _page_title(raw: bytes) -> str:
    """``: <the page's title>`` of an HTML page, else ``""`` (for messages)."""
    match = re.search(rb"<title[^>]*>(.*?)</title>", raw[:4096], re.IGNORECASE | re.DOTALL)
    title = " ".join(match.group(1).decode("utf-8", "replace").split())[:120] if match else ""
    return f' (page title "{title}")' if title else ""


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _apply_should_retry(error: NbagentError, headers: Mapping[str, str]) -> None:
    value = (headers.get("x-should-retry") or "").lower()
    if value in ("true", "false"):
        error.retryable = value == "true"


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _host(url: str) -> str:
    import httpx

    try:
        return httpx.URL(url).host or url
    except Exception:  # noqa: BLE001 - only for messages
        return "the server"


def _describe(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return redact(text[:200])
