"""The HTTP + SSE machinery every HTTP provider shares.

``HTTPProvider.stream`` POSTs the request a subclass builds, maps error
replies to ``NbagentError`` (see ERRORS.md), retries retryable failures
that happen before the first byte of a successful body, decodes the SSE
body and runs it through the subclass's parser. Subclasses implement
``build_http_request``, ``new_parser`` and, if their error envelope needs
it, ``parse_error``.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import re
import time
import weakref
from typing import Any, AsyncIterator, Iterable, Mapping, Protocol

import httpx

from ..core.errors import NbagentError, redact, register_secret
from .base import Event, ModelRequest, Provider
from .sse import SSEDecoder, SSEEvent

__all__ = [
    "HTTPProvider",
    "StreamParser",
    "classify_error",
    "error_from_payload",
    "is_context_length_message",
    "parse_json",
    "retry_after_from_headers",
]

_CONTEXT_RE = re.compile(
    r"context.length|context.window|maximum context|prompt is too long|input is too long"
    r"|too many (input )?tokens|reduce the length|exceeds the (model's )?(maximum|context)"
    r"|input token count|token count of|exceeds the available context size",
    re.IGNORECASE,
)
_QUOTA_CODES = {"insufficient_quota", "billing_error", "billing_hard_limit_reached"}
_AUTH_CODES = {"invalid_api_key", "api_key_invalid", "authentication_error", "permission_error",
               "unauthenticated", "permission_denied"}
_CODE_KINDS = {
    "rate_limit_exceeded": "rate_limit",
    "rate_limit_error": "rate_limit",
    "resource_exhausted": "rate_limit",
    "overloaded_error": "server",
    "api_error": "server",
    "server_error": "server",
    "server_is_overloaded": "server",
    "unavailable": "server",
    "internal": "server",
    "timeout_error": "timeout",
    "deadline_exceeded": "timeout",
    "context_length_exceeded": "context_length",
    "invalid_request_error": "invalid_request",
    "invalid_argument": "invalid_request",
    "not_found_error": "invalid_request",
    "model_not_found": "invalid_request",
    "tool_use_failed": "invalid_request",
    "failed_precondition": "invalid_request",
}
_RETRYABLE_KINDS = {"rate_limit", "server", "timeout"}


class StreamParser(Protocol):
    """What ``new_parser`` returns: SSE events in, provider events out."""

    def feed(self, event: SSEEvent) -> list[Event]: ...

    def close(self) -> list[Event]: ...


# --- error helpers -----------------------------------------------------------


def is_context_length_message(text: str) -> bool:
    """True when an error message says the prompt does not fit the context."""
    return bool(text and _CONTEXT_RE.search(text))


def classify_error(
    status: int | None,
    message: str,
    *,
    codes: Iterable[Any] = (),
    provider: str | None = None,
    retry_after: float | None = None,
) -> NbagentError:
    """Build an ``NbagentError`` from an HTTP status, message and error codes.

    ``codes`` are the provider's error code / type / status strings; they
    refine the status (e.g. ``insufficient_quota`` makes a 429 final,
    ``API_KEY_INVALID`` makes a Gemini 400 an auth error). ``status`` may be
    None for in-band stream errors, where the codes alone decide.
    """
    names = {str(c).lower() for c in codes if c not in (None, "")}
    context = is_context_length_message(message) or "context_length_exceeded" in names
    if names & _AUTH_CODES:
        kind, retryable = "auth", False
    elif names & _QUOTA_CODES:
        kind, retryable = "rate_limit", False
    elif status is None or status == 200:
        kind = next((k for n, k in _CODE_KINDS.items() if n in names), "protocol")
        if context:
            kind = "context_length"
        retryable = kind in _RETRYABLE_KINDS
    elif status in (401, 403):
        kind, retryable = "auth", False
    elif status == 402:
        kind, retryable = "rate_limit", False
    elif status == 408:
        kind, retryable = "timeout", True
    elif status == 409:
        kind, retryable = "server", True
    elif status == 429:
        kind, retryable = "rate_limit", True
    elif status == 499 or status >= 500:
        kind, retryable = "server", True
    elif context and status in (400, 413, 422):
        kind, retryable = "context_length", False
    else:
        kind, retryable = "invalid_request", False
    message = message or (f"HTTP {status}" if status else "the model stream reported an error")
    return NbagentError(
        message,
        kind=kind,
        retryable=retryable,
        http_code=status if status and status != 200 else None,
        provider=provider,
        retry_after=retry_after,
    )


def error_from_payload(
    payload: Any, *, status: int | None = None, provider: str | None = None
) -> NbagentError:
    """Map an ``{"error": ...}`` envelope (OpenAI, Anthropic, Gemini, Ollama) to an error.

    ``payload`` is the decoded body or the value of its ``error`` key; the
    error may be a string or an object whose ``code`` is a string or an int.
    """
    if isinstance(payload, list) and payload:
        payload = payload[0]
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if not isinstance(err, dict):
        return classify_error(status, str(err or ""), provider=provider)
    message = str(err.get("message") or err.get("detail") or "")
    codes: list[Any] = [err.get("type"), err.get("status")]
    code = err.get("code")
    in_band_status = None
    if isinstance(code, int) or (isinstance(code, str) and code.isdigit()):
        in_band_status = int(code)
    else:
        codes.append(code)
    if isinstance(err.get("status_code"), int):
        in_band_status = err["status_code"]
    retry_after = None
    details = err.get("details")
    for detail in details if isinstance(details, list) else []:
        if not isinstance(detail, dict):
            continue
        codes.append(detail.get("reason"))
        violations = detail.get("violations")
        for violation in violations if isinstance(violations, list) else []:
            if isinstance(violation, dict) and "perday" in str(violation.get("quotaId", "")).lower():
                codes.append("insufficient_quota")  # a daily quota: waiting a minute won't help
        delay = detail.get("retryDelay")  # google.rpc.RetryInfo, e.g. "31s"
        if isinstance(delay, str) and re.fullmatch(r"\d+(\.\d+)?s", delay):
            retry_after = float(delay[:-1])
    metadata = err.get("metadata")
    if isinstance(metadata, dict) and metadata.get("raw") and metadata["raw"] not in message:
        message = f"{message} ({metadata['raw']})" if message else str(metadata["raw"])
    effective = status if status not in (None, 200) else in_band_status
    error = classify_error(
        effective, message, codes=codes, provider=provider, retry_after=retry_after
    )
    if status in (None, 200):  # an in-band error: keep the reported code for display
        error.http_code = in_band_status
    return error


def retry_after_from_headers(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def parse_json(data: str, provider: str | None = None) -> Any:
    """Decode one JSON payload from a stream; garbage is a ``protocol`` error."""
    try:
        return json.loads(data)
    except ValueError:
        snippet = data if len(data) <= 200 else data[:200] + "..."
        raise NbagentError(
            f"the server sent data that is not JSON: {snippet!r}", kind="protocol", provider=provider
        ) from None


# --- the provider ------------------------------------------------------------


class HTTPProvider(Provider):
    """Base class of providers that stream SSE over HTTP with httpx."""

    name = "http"
    default_base_url: str = ""
    sse_raw_lines: bool = False
    retry_base_delay: float = 0.5  # seconds; doubled on each retry, with jitter
    retry_max_delay: float = 8.0
    max_retry_after: float = 60.0  # cap on a server-requested wait

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        max_retries: int = 2,
        http_client: httpx.AsyncClient | None = None,
        context_window: int | None = None,
        retry_base_delay: float | None = None,
    ) -> None:
        self.model = model
        self._api_key = api_key or None
        register_secret(self._api_key)
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_retries = max(0, int(max_retries))
        if retry_base_delay is not None:
            self.retry_base_delay = retry_base_delay
        if context_window is not None:
            self.context_window = context_window
        self.http_client = http_client  # caller-owned; never closed here
        self._client: httpx.AsyncClient | None = None
        self._client_loop: weakref.ref | None = None
        self._guard: Any = None

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
            reason = httpx.codes.get_reason_phrase(status)
            detail = text[:300] if text and not text.startswith("<") else reason
            error = classify_error(status, f"HTTP {status}: {detail}".rstrip(": "), provider=self.name)
        error.http_code = status
        return error

    # -- connection -----------------------------------------------------------

    async def _get_client(self) -> httpx.AsyncClient:
        if self.http_client is not None:
            return self.http_client
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
        return httpx.Timeout(self.read_timeout, connect=self.connect_timeout)

    async def aclose(self) -> None:
        """Close the pooled client (a later call opens a new one)."""
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
        raise NbagentError(
            "the server answered with a single JSON document instead of an event stream "
            "(does it support streaming?)",
            kind="protocol",
            provider=self.name,
        )


    def _retry_delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_retry_after)
        delay = min(self.retry_base_delay * (2**attempt), self.retry_max_delay)
        return delay * random.uniform(0.75, 1.25)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        """POST the request, retry what may be retried, yield parsed events."""
        url, headers, body = self.build_http_request(request)
        attempt = 0
        while True:
            client = await self._get_client()
            got_bytes = False
            try:
                async with client.stream(
                    "POST", url, headers=headers, json=body, timeout=self._timeout()
                ) as response:
                    if not 200 <= response.status_code < 300:
                        raw = await response.aread()
                        error = self.parse_error(response.status_code, raw, response.headers)
                        error.retry_after = _first(
                            retry_after_from_headers(response.headers), error.retry_after
                        )
                        _apply_should_retry(error, response.headers)
                        cause = None
                    else:
                        if _is_plain_json(response.headers):
                            raw = await response.aread()
                            got_bytes = bool(raw)
                            self._raise_for_json_body(raw)
                            chunks = _once(raw)
                        else:
                            chunks = response.aiter_bytes()
                        parser = self.new_parser(request)
                        decoder = SSEDecoder(raw_lines=self.sse_raw_lines)
                        async for chunk in chunks:
                            if not chunk:
                                continue
                            got_bytes = True
                            for sse in decoder.feed(chunk):
                                for event in parser.feed(sse):
                                    yield event
                        if not got_bytes:
                            raise NbagentError(
                                "the server replied HTTP 200 with an empty body",
                                kind="protocol",
                                http_code=response.status_code,
                                provider=self.name,
                            )
                        for sse in decoder.flush():
                            for event in parser.feed(sse):
                                yield event
                        for event in parser.close():
                            yield event
                        return
            except httpx.TimeoutException as exc:
                if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)):
                    message = f"could not connect to {_host(url)} within {self.connect_timeout:g} s"
                else:
                    message = f"no data from {_host(url)} for {self.read_timeout:g} s (read_timeout)"
                error = NbagentError(
                    message,
                    kind="timeout",
                    retryable=isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)),
                    provider=self.name,
                )
                cause = exc
            except httpx.UnsupportedProtocol as exc:
                raise NbagentError(
                    f"bad base_url {self.base_url!r}: {_describe(exc)}", kind="config", provider=self.name
                ) from exc
            except httpx.TransportError as exc:
                if got_bytes:
                    message = f"the connection to {_host(url)} broke mid-stream ({_describe(exc)})"
                else:
                    message = f"could not reach {_host(url)} ({_describe(exc)})"
                error = NbagentError(
                    message, kind="network", retryable=not got_bytes, provider=self.name
                )
                cause = exc
            except httpx.DecodingError as exc:
                raise NbagentError(
                    f"could not decode the response body ({_describe(exc)})",
                    kind="protocol",
                    provider=self.name,
                ) from exc
            if got_bytes:  # output may have started: never retry
                raise error from cause
            if error.retryable and attempt < self.max_retries:
                await asyncio.sleep(self._retry_delay(attempt, error.retry_after))
                attempt += 1
                continue
            if attempt:
                error.message = f"{error.message} (after {attempt + 1} attempts)"
                error.args = (error.message,)
            raise error from cause


async def _close_on_loop_shutdown(client: httpx.AsyncClient) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await client.aclose()


def _is_plain_json(headers: Mapping[str, str]) -> bool:
    return headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _apply_should_retry(error: NbagentError, headers: Mapping[str, str]) -> None:
    value = (headers.get("x-should-retry") or "").lower()
    if value in ("true", "false"):
        error.retryable = value == "true"


def _host(url: str) -> str:
    try:
        return httpx.URL(url).host or url
    except Exception:  # noqa: BLE001 - only for messages
        return "the server"


def _describe(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return redact(text[:200])
