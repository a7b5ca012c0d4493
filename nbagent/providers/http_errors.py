"""Error replies of every provider mapped to ``NbagentError`` kinds (see ERRORS.md).

``classify_error`` decides the kind and whether a retry may help from the
HTTP status and the provider's error code and message; ``error_from_payload``
reads the error envelopes of OpenAI, Anthropic, Gemini and OpenAI-compatible
servers (a Google ``details[].detail`` sentence replaces an empty or
placeholder message); ``retry_after_from_headers`` honours ``retry-after`` /
``retry-after-ms``.
"""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any
from collections.abc import Iterable, Mapping

from ..core.errors import NbagentError

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
        message = _with_detail(message, detail_text(detail.get("detail")))
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


_DETAIL_MESSAGE = re.compile(r'message:\s*"((?:[^"\\]|\\.)*)"')


def detail_text(value: Any) -> str:
    """The readable sentence of a ``google.rpc.DebugInfo`` ``detail`` ("" when none).

    ``[ORIGINAL ERROR] generic::failed_precondition: User location is not
    supported ... [google.rpc.error_details_ext] { message: "..." }`` gives
    ``User location is not supported ...``.
    """
    if not isinstance(value, str) or not value.strip():
        return ""
    match = _DETAIL_MESSAGE.search(value)
    if match:
        return match.group(1).strip()
    text = re.sub(r"^\[ORIGINAL ERROR\]\s*(generic::\w+:\s*)?", "", value.strip())
    return re.sub(r"\s*\[google\.rpc\.[^\]]*\].*$", "", text, flags=re.DOTALL).strip()


def _with_detail(message: str, detail: str) -> str:
    """``detail`` instead of an empty or placeholder message (``$grpcMessage``), else ``message``.

    A real message is kept alone: details may echo the request (an API key).
    """
    if detail and (not message.strip() or message.strip().startswith("$")):
        return detail
    return message


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
