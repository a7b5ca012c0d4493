"""Token prices and cost: what a turn cost in US dollars.

``PRICES`` maps a model name to a :class:`Price` in USD per 1M tokens:
``input`` (uncached input), ``cached_input`` (cache reads), ``cache_write``
(tokens written to a prompt cache) and ``output`` (every generated token,
reasoning / thinking included). Each entry notes its ``source`` page and the
``date`` its values reflect (``PRICES_DATE``). Prices are the standard
(non-batch, interactive, short-context) tier; long-context tiers
(Gemini 2.5 Pro above 200k prompt tokens, Claude Sonnet 4/4.5 with the 1M
context beta above 200k) cost more and are not modelled.

These values were transcribed from the providers' official pricing pages and
were not re-checked online when this file was written: prices change, so check
the page and override what differs::

    from nbagent.analysis.pricing import set_price
    set_price("gpt-4.1-mini", input=0.40, cached_input=0.10, output=1.60)

or pass ``pricing={"my-model": {"input": 1.0, "output": 2.0}}`` to
``conv.usage_df()`` / ``usage_summary()`` / ``load_sessions()`` for one call.

Lookup (:func:`get_price`) tolerates a provider prefix (``openai:gpt-4.1-mini``,
``models/gemini-2.5-flash``, ``anthropic/claude-sonnet-4-5``), upper case, and
the usual snapshot suffixes (``claude-sonnet-4-5-20250929``,
``gpt-4o-2024-08-06``, ``claude-3-5-haiku-latest``, ``gemini-2.0-flash-001``,
``gemini-2.5-flash-preview-05-20``). It never guesses by prefix: a model it does
not know (``gpt-5-pro``, ``my-finetune``) has no price and costs NaN, not 0.
The ``local`` and ``demo`` models run on your machine and cost 0.0 explicitly.

Cost of one call or turn (:func:`cost`)::

    uncached = max(input - cached - cache_write, 0)
    usd = (uncached * input + cached * cached_input + cache_write * cache_write_rate
           + (output + thinking) * output) / 1e6

``cached_input`` defaults to the input rate when a price does not know it, and
``cache_write`` to 1.25x the input rate (Anthropic's 5-minute cache write).
OpenAI and Gemini charge no write premium: their entries set
``cache_write = input``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = [
    "Price",
    "PRICES",
    "PRICES_DATE",
    "FREE_PROVIDERS",
    "get_price",
    "set_price",
    "reset_prices",
    "cost",
    "token_cost",
    "normalize_model",
]

PRICES_DATE = "2025-11-24"

_OPENAI = "https://openai.com/api/pricing/ (platform.openai.com/docs/pricing)"
_ANTHROPIC = "https://docs.anthropic.com/en/docs/about-claude/pricing"
_GEMINI = "https://ai.google.dev/gemini-api/docs/pricing"


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens. ``None`` rates fall back as described in the module docs."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    source: str = ""
    date: str = ""

    @property
    def cached_rate(self) -> float:
        return self.input if self.cached_input is None else self.cached_input

    @property
    def cache_write_rate(self) -> float:
        return self.input * 1.25 if self.cache_write is None else self.cache_write

    def cost(
        self,
        input_tokens: int = 0,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
        thinking_tokens: int = 0,
        output_tokens: int = 0,
    ) -> float:
        """USD for these token counts (see the module docstring)."""
        return token_cost(self.input, self.cached_rate, self.cache_write_rate, self.output,
                          input_tokens, cached_tokens, cache_write_tokens, thinking_tokens + output_tokens)

    def usage_cost(self, usage: Any) -> float:
        """USD for a ``UsageMetadata``."""
        return self.cost(usage.prompt_token_count, usage.cached_content_token_count,
                         usage.cache_write_token_count, usage.thoughts_token_count, usage.candidates_token_count)


def token_cost(input_rate, cached_rate, write_rate, output_rate, input_tokens, cached_tokens,
               cache_write_tokens, generated_tokens):
    """The cost formula, the only one: USD from rates per 1M tokens and token counts.

    Works on numbers and on numpy arrays alike (the DataFrames price whole
    columns with it). ``generated_tokens`` is thinking plus output.
    """
    uncached = input_tokens - cached_tokens - cache_write_tokens
    uncached = uncached * (uncached > 0)
    return (uncached * input_rate + cached_tokens * cached_rate + cache_write_tokens * write_rate
            + generated_tokens * output_rate) / 1e6


def _p(inp, cached, write, out, source, note=""):
    src = source + (f"; {note}" if note else "")
    return Price(input=inp, output=out, cached_input=cached, cache_write=write, source=src, date=PRICES_DATE)


_FREE = "runs locally: free"

#: model name -> Price (USD per 1M tokens). Edit with :func:`set_price`.
PRICES: dict[str, Price] = {
    # OpenAI: cached input at the "cached input" rate; no charge for cache writes.
    "gpt-5": _p(1.25, 0.125, 1.25, 10.00, _OPENAI),
    "gpt-5-mini": _p(0.25, 0.025, 0.25, 2.00, _OPENAI),
    "gpt-5-nano": _p(0.05, 0.005, 0.05, 0.40, _OPENAI),
    "gpt-4.1": _p(2.00, 0.50, 2.00, 8.00, _OPENAI),
    "gpt-4.1-mini": _p(0.40, 0.10, 0.40, 1.60, _OPENAI),
    "gpt-4.1-nano": _p(0.10, 0.025, 0.10, 0.40, _OPENAI),
    "gpt-4o": _p(2.50, 1.25, 2.50, 10.00, _OPENAI),
    "gpt-4o-mini": _p(0.15, 0.075, 0.15, 0.60, _OPENAI),
    "o3": _p(2.00, 0.50, 2.00, 8.00, _OPENAI, "after the June 2025 price cut"),
    "o4-mini": _p(1.10, 0.275, 1.10, 4.40, _OPENAI),
    # Anthropic: cache reads 0.1x input, 5-minute cache writes 1.25x input.
    "claude-opus-4-5": _p(5.00, 0.50, 6.25, 25.00, _ANTHROPIC),
    "claude-opus-4-1": _p(15.00, 1.50, 18.75, 75.00, _ANTHROPIC),
    "claude-opus-4": _p(15.00, 1.50, 18.75, 75.00, _ANTHROPIC),
    "claude-sonnet-4-5": _p(3.00, 0.30, 3.75, 15.00, _ANTHROPIC, "prompts <= 200k tokens"),
    "claude-sonnet-4": _p(3.00, 0.30, 3.75, 15.00, _ANTHROPIC, "prompts <= 200k tokens"),
    "claude-3-7-sonnet": _p(3.00, 0.30, 3.75, 15.00, _ANTHROPIC),
    "claude-haiku-4-5": _p(1.00, 0.10, 1.25, 5.00, _ANTHROPIC),
    "claude-3-5-haiku": _p(0.80, 0.08, 1.00, 4.00, _ANTHROPIC),
    # Gemini: paid tier, text input; thinking billed as output; cache storage
    # (per hour) is not a token price and is not included.
    "gemini-2.5-pro": _p(1.25, 0.125, 1.25, 10.00, _GEMINI, "prompts <= 200k tokens"),
    "gemini-2.5-flash": _p(0.30, 0.03, 0.30, 2.50, _GEMINI, "text/image/video input"),
    "gemini-2.5-flash-lite": _p(0.10, 0.01, 0.10, 0.40, _GEMINI, "text/image/video input"),
    "gemini-2.0-flash": _p(0.10, 0.025, 0.10, 0.40, _GEMINI, "text/image/video input"),
    # Local and offline models: free.
    "demo": _p(0.0, 0.0, 0.0, 0.0, _FREE),
    "local": _p(0.0, 0.0, 0.0, 0.0, _FREE),
    "smollm2": _p(0.0, 0.0, 0.0, 0.0, _FREE),
}

#: Providers whose every model is free (they run on this machine).
FREE_PROVIDERS = frozenset({"demo", "local"})
_FREE_PRICE = PRICES["local"]

_USER_PRICES: dict[str, Price] = {}

_PREFIX = re.compile(r"^(?:[a-z0-9_.\-]+[:/])+")
_SUFFIXES = (
    re.compile(r"-\d{8}$"),  # claude-sonnet-4-5-20250929
    re.compile(r"-\d{4}-\d{2}-\d{2}$"),  # gpt-4o-2024-08-06
    re.compile(r"-latest$"),  # claude-3-5-haiku-latest
    re.compile(r"-\d{3}$"),  # gemini-2.0-flash-001
    re.compile(r"-preview(?:-\d{2}-\d{2}(?:-\d{2,4})?)?$"),  # gemini-2.5-flash-preview-05-20
    re.compile(r"-exp(?:-\d{2}-\d{2})?$"),  # gemini-2.0-flash-exp
)


def normalize_model(model: str) -> str:
    """Lower-case ``model`` and drop a ``provider:`` / ``models/`` prefix."""
    name = (model or "").strip().lower()
    return _PREFIX.sub("", name)


def _candidates(model: str):
    name = normalize_model(model)
    if not name:
        return
    yield name
    seen = {name}
    changed = True
    while changed:  # strip one known suffix at a time (e.g. "-preview-05-20" then "-001")
        changed = False
        for pattern in _SUFFIXES:
            stripped = pattern.sub("", name)
            if stripped != name and stripped:
                name = stripped
                if name not in seen:
                    seen.add(name)
                    yield name
                changed = True
                break


def _coerce_price(value: Any, model: str) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, Mapping):
        try:
            return Price(
                input=float(value["input"]),
                output=float(value["output"]),
                cached_input=None if value.get("cached_input") is None else float(value["cached_input"]),
                cache_write=None if value.get("cache_write") is None else float(value["cache_write"]),
                source=str(value.get("source", "user override")),
                date=str(value.get("date", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise _config_error(f"price for {model!r} needs numeric 'input' and 'output' ({exc})") from None
    if isinstance(value, (tuple, list)) and 2 <= len(value) <= 4:
        # (input, output) | (input, cached_input, output) | (input, cached_input, cache_write, output)
        vals = [None if v is None else float(v) for v in value]
        if len(vals) == 2:
            return Price(vals[0], vals[1], source="user override")
        if len(vals) == 3:
            return Price(vals[0], vals[2], cached_input=vals[1], source="user override")
        return Price(vals[0], vals[3], cached_input=vals[1], cache_write=vals[2], source="user override")
    raise _config_error(
        f"price for {model!r} must be a Price, a mapping with input/output, or a tuple; got {type(value).__name__}"
    )


def _config_error(message: str):
    from ..core.errors import NbagentError

    return NbagentError(message, kind="config")


def _lookup(table: Mapping[str, Any], model: str) -> Any:
    if not table:
        return None
    if model in table:  # exact key as given by the user
        return table[model]
    normalized = {normalize_model(k): v for k, v in table.items()} if table is not PRICES else table
    for name in _candidates(model):
        if name in normalized:
            return normalized[name]
    return None


def get_price(model: str, provider: str = "", pricing: Mapping[str, Any] | None = None) -> Price | None:
    """The :class:`Price` for ``model`` or ``None`` when unknown.

    Precedence: the per-call ``pricing`` mapping, then :func:`set_price`
    overrides, then ``PRICES``. A ``provider`` of ``local`` or ``demo`` (or a
    ``local:...`` / ``demo:...`` model name) is free.
    """
    for table in (pricing, _USER_PRICES):
        if table:
            found = _lookup(table, model)
            if found is not None:
                return _coerce_price(found, model)
    found = _lookup(PRICES, model)
    if found is not None:
        return found
    prov = (provider or "").strip().lower()
    head = (model or "").strip().lower().split(":", 1)[0] if ":" in (model or "") else ""
    if prov in FREE_PROVIDERS or head in FREE_PROVIDERS:
        return _FREE_PRICE
    return None


def set_price(
    model: str,
    *,
    input: float,
    output: float,
    cached_input: float | None = None,
    cache_write: float | None = None,
    source: str = "user override",
) -> Price:
    """Override (or add) the price of ``model`` for this process; USD per 1M tokens."""
    name = normalize_model(model)
    if not name:
        raise _config_error("set_price needs a model name")
    for label, value in (("input", input), ("output", output), ("cached_input", cached_input), ("cache_write", cache_write)):
        if value is not None and (not isinstance(value, (int, float)) or value < 0 or math.isnan(value)):
            raise _config_error(f"set_price: {label} must be a non-negative number, got {value!r}")
    price = Price(
        input=float(input),
        output=float(output),
        cached_input=None if cached_input is None else float(cached_input),
        cache_write=None if cache_write is None else float(cache_write),
        source=source,
    )
    _USER_PRICES[name] = price
    return price


def reset_prices(model: str | None = None) -> None:
    """Forget one :func:`set_price` override, or all of them."""
    if model is None:
        _USER_PRICES.clear()
    else:
        _USER_PRICES.pop(normalize_model(model), None)


def cost(
    model: str,
    input_tokens: int = 0,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
    thinking_tokens: int = 0,
    output_tokens: int = 0,
    *,
    provider: str = "",
    pricing: Mapping[str, Any] | None = None,
) -> float:
    """USD for one call or turn; NaN when the model has no known price.

    ``input_tokens`` counts every input token (cached and cache-written
    included, like ``UsageMetadata.prompt_token_count``); ``output_tokens``
    the non-thinking generated tokens (``candidates_token_count``).
    """
    price = get_price(model, provider, pricing)
    if price is None:
        return math.nan
    return price.cost(input_tokens, cached_tokens, cache_write_tokens, thinking_tokens, output_tokens)



def context_window(model: str, provider: str = "") -> int | None:
    """The model's context window in tokens, None when unknown."""
    return None
