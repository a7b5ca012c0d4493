"""Token prices and cost: what a turn cost in US dollars.

Prices come from `genai-prices <https://github.com/pydantic/genai-prices>`_,
pydantic's maintained price database (imported on first use). A :class:`Price`
holds USD per 1M tokens: ``input`` (uncached input), ``cached_input`` (cache
reads), ``cache_write`` (tokens written to a prompt cache) and ``output``
(every generated token, thinking included); ``source`` says where it came from
(:data:`PRICES_VERSION`, e.g. ``"genai-prices 0.2.3"``). Where genai-prices
lists no cache-read or cache-write rate the input rate applies, as it does in
genai-prices (OpenAI and Gemini charge no write premium).

Lookup (:func:`get_price`), first match wins:

1. the per-call ``pricing=`` mapping (``{"my-model": {"input": 1.0, "output": 2.0}}``),
2. :func:`set_price` overrides,
3. ``local`` / ``demo`` (provider, or model ``demo``/``local``/``smollm2``): free, 0.0,
4. genai-prices: the nbagent provider maps to the provider id its wire's spec
   names (``openai`` and ``openai-responses`` -> ``openai``, ``anthropic``/``claude``
   -> ``anthropic``, ``gemini``/``google`` -> ``google``; :func:`pricing_id`); a name genai-prices knows, e.g.
   ``openrouter``, as is; ``provider_api_url`` picks the provider of an
   OpenAI-compatible endpoint; a provider it does not know, e.g. ``mock``,
   leaves the match to the model name). The model name is tried as given (lower case),
   then without a ``provider:`` / ``models/`` prefix; genai-prices' own match
   rules resolve snapshots (``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``).

A model none of these knows (``my-finetune``) has no price and costs NaN, never
0 and never a guess by prefix. Lookups are cached per (model, provider).

Tiers: some models cost more above a prompt size (Claude Sonnet 4.5 and Gemini
2.5 Pro above 200k input tokens); as in genai-prices the tier applies to all
tokens of a request whose input passes it. :meth:`Price.cost` picks the tier
from ``input_tokens``; the usage DataFrame from each turn's input tokens per
model call (exact for one call, the average for a turn of several).
Prices are today's: a model whose price changed is priced at the current rate.

Cost of one call or turn (:func:`token_cost`, the one formula)::

    uncached = max(input - cached - cache_write, 0)
    usd = (uncached * input + cached * cached_input + cache_write * cache_write_rate
           + (output + thinking) * output) / 1e6

A user price without ``cached_input`` reads cache at the input rate, without
``cache_write`` writes at 1.25x input (Anthropic's 5-minute cache write).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, replace
from typing import Any
from collections.abc import Mapping
from datetime import UTC

__all__ = [
    "Price",
    "PRICES_VERSION",  # noqa: F822 - computed on first use by the module's __getattr__
    "PRICES_DATE",  # noqa: F822 - its old name, likewise
    "FREE_PROVIDERS",
    "OVERRIDE",
    "FREE",
    "get_price",
    "price_source",
    "pricing_id",
    "set_price",
    "reset_prices",
    "cost",
    "token_cost",
    "normalize_model",
    "context_window",
]

OVERRIDE = "override"  # price_source of a pricing= / set_price price
FREE = "free"  # price_source of local and demo models


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens. ``None`` rates fall back as described in the module docs.

    ``tiers``: ``(start, Price)`` pairs, ascending; a request with more than
    ``start`` input tokens pays that tier's rates on every token.
    """

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    source: str = ""
    date: str = ""
    tiers: tuple = ()

    @property
    def cached_rate(self) -> float:
        return self.input if self.cached_input is None else self.cached_input

    @property
    def cache_write_rate(self) -> float:
        return self.input * 1.25 if self.cache_write is None else self.cache_write

    def at(self, input_tokens: float) -> Price:
        """The flat price (no tiers) of a request with ``input_tokens`` input tokens: its tier's."""
        for start, tier in reversed(self.tiers):
            if input_tokens > start:
                return tier
        return replace(self, tiers=()) if self.tiers else self

    def cost(
        self,
        input_tokens: int = 0,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
        thinking_tokens: int = 0,
        output_tokens: int = 0,
    ) -> float:
        """USD for these token counts of one request (see the module docstring)."""
        p = self.at(input_tokens)
        return token_cost(p.input, p.cached_rate, p.cache_write_rate, p.output,
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


#: Providers whose every model is free (they run on this machine).
FREE_PROVIDERS = frozenset({"demo", "local", "replay"})  # a replay calls no one
_FREE_MODELS = frozenset({"demo", "local", "smollm2"})
_FREE_PRICE = Price(0.0, 0.0, 0.0, 0.0, source="runs locally: free")


def pricing_id(provider: str) -> str:
    """The genai-prices provider id of an nbagent provider name or prefix (each wire's spec says its
    own: ``claude`` -> ``anthropic``, ``gemini`` -> ``google``); another name as it is."""
    from ..providers import wire_spec

    spec = wire_spec(provider)
    return provider if spec is None else spec.pricing_id


_USER_PRICES: dict[str, Price] = {}
_CATALOG: dict[tuple, Any] = {}  # (model, provider, api url) -> (ModelInfo | None, Price | None)
_CATALOG_SNAPSHOT: list = [None]  # the genai-prices snapshot _CATALOG was filled from

_PREFIX = re.compile(r"^(?:[a-z0-9_.\-]+[:/])+")
_SUFFIXES = (  # snapshot suffixes a user price covers too (set_price("gpt-4o") prices gpt-4o-2024-08-06)
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


def prices_version() -> str:
    """Where catalog prices come from: ``"genai-prices <version>"`` (plus the date of an
    ``UpdatePrices`` refresh when one replaced the bundled data)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        label = f"genai-prices {version('genai-prices')}"
    except PackageNotFoundError:  # pragma: no cover - a dependency
        return "genai-prices (not installed)"
    if "genai_prices" in sys.modules:
        snapshot = sys.modules["genai_prices"].data_snapshot.get_snapshot()
        if snapshot.from_auto_update:
            label += f" updated {snapshot.timestamp:%Y-%m-%d}"
    return label


def __getattr__(name: str) -> Any:
    # PRICES_VERSION (and PRICES_DATE, its old name) are computed on first use
    if name in ("PRICES_VERSION", "PRICES_DATE"):
        return prices_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        first, last = vals[0], vals[-1]
        if first is None or last is None:
            raise _config_error(f"price for {model!r} needs numeric input and output rates")
        if len(vals) == 2:
            return Price(first, last, source="user override")
        if len(vals) == 3:
            return Price(first, last, cached_input=vals[1], source="user override")
        return Price(first, last, cached_input=vals[1], cache_write=vals[2], source="user override")
    raise _config_error(
        f"price for {model!r} must be a Price, a mapping with input/output, or a tuple; got {type(value).__name__}"
    )


def _config_error(message: str):
    from ..core.errors import ConfigError

    return ConfigError(message)


def _candidates(model: str):
    """``model`` normalized, then with one snapshot suffix after another stripped."""
    name = normalize_model(model)
    while name:
        yield name
        for pattern in _SUFFIXES:
            stripped = pattern.sub("", name)
            if stripped != name:
                name = stripped
                break
        else:
            return


def _lookup(table: Mapping[str, Any], model: str) -> Any:
    """A user price for ``model`` (exact key, else normalized, else without snapshot suffixes)."""
    if not table:
        return None
    if model in table:  # exact key as given by the user
        return table[model]
    normalized = {normalize_model(k): v for k, v in table.items()}
    for name in _candidates(model):
        if name in normalized:
            return normalized[name]
    return None


def _is_free(model: str, provider: str) -> bool:
    prov = (provider or "").strip().lower()
    text = (model or "").strip().lower()
    head = text.split(":", 1)[0] if ":" in text else ""
    return prov in FREE_PROVIDERS or head in FREE_PROVIDERS or normalize_model(text) in _FREE_MODELS


def _resolve(model: str, provider: str, pricing: Mapping[str, Any] | None,
             provider_api_url: str | None = None) -> tuple[Price | None, str | None]:
    """The price and its ``price_source`` label (None, None when unknown)."""
    for table in (pricing, _USER_PRICES):
        if table:
            found = _lookup(table, model)
            if found is not None:
                return _coerce_price(found, model), OVERRIDE
    if _is_free(model, provider):
        return _FREE_PRICE, FREE
    price = _catalog(model, provider, provider_api_url)[1]
    return (price, price.source) if price is not None else (None, None)


def get_price(model: str, provider: str = "", pricing: Mapping[str, Any] | None = None, *,
              provider_api_url: str | None = None) -> Price | None:
    """The :class:`Price` for ``model`` or ``None`` when unknown (precedence: module docs)."""
    return _resolve(model, provider, pricing, provider_api_url)[0]


def price_source(model: str, provider: str = "", pricing: Mapping[str, Any] | None = None, *,
                 provider_api_url: str | None = None) -> str | None:
    """Where the price of ``model`` comes from: ``"override"``, ``"free"``,
    ``"genai-prices <version>"``, or None when it has no price."""
    return _resolve(model, provider, pricing, provider_api_url)[1]


def context_window(model: str, provider: str = "") -> int | None:
    """The model's context window in tokens from genai-prices, None when unknown."""
    if not model or _is_free(model, provider):
        return None
    info = _catalog(model, provider, None)[0]
    return None if info is None or not info.context_window else int(info.context_window)


def _catalog(model: str, provider: str, api_url: str | None) -> tuple[Any, Price | None]:
    """(genai-prices ModelInfo, Price) of ``model``, (None, None) when it has none; cached."""
    from genai_prices import data_snapshot

    snapshot = data_snapshot.get_snapshot()
    if _CATALOG_SNAPSHOT[0] is not snapshot:  # UpdatePrices replaced the data
        _CATALOG.clear()
        _CATALOG_SNAPSHOT[0] = snapshot
    key = (model, provider, api_url)
    if key not in _CATALOG:
        info = _find_model(snapshot, model, provider, api_url)
        _CATALOG[key] = (info, None if info is None else _price_of(info))
    return _CATALOG[key]


def _find_model(snapshot: Any, model: str, provider: str, api_url: str | None) -> Any:
    from genai_prices import data_snapshot

    text = (model or "").strip().lower()
    prov = (provider or "").strip().lower()
    if not prov and ":" in text:  # "anthropic:claude-sonnet-4-5"
        prov = text.split(":", 1)[0]
    provider_id = pricing_id(prov) or None
    if api_url or (provider_id and data_snapshot.find_provider_by_id(snapshot.providers, provider_id) is None):
        provider_id = None  # a provider genai-prices does not know ("mock", a plugin): match by model
    refs = dict.fromkeys(r for r in (text.split(":", 1)[1] if ":" in text else text, normalize_model(text)) if r)
    for ref in refs:
        try:
            return snapshot.find_provider_model(ref, None, provider_id, api_url)[1]
        except LookupError:
            continue
    return None


def _price_of(info: Any) -> Price | None:
    """A :class:`Price` (with its tiers) from a genai-prices ModelInfo's current prices."""
    from datetime import datetime

    prices = info.get_prices(datetime.now(UTC))
    rates = [getattr(prices, k, None) for k in ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")]
    if rates[0] is None or rates[1] is None:
        return None
    rates[2] = rates[0] if rates[2] is None else rates[2]  # unlisted cache rates: the input rate
    rates[3] = rates[0] if rates[3] is None else rates[3]
    source = prices_version()
    starts = sorted({t.start for r in rates for t in getattr(r, "tiers", ())})

    def at(tokens: float) -> Price:
        inp, out, cached, write = (float(_rate_at(r, tokens)) for r in rates)
        return Price(inp, out, cached_input=cached, cache_write=write, source=source)

    base = at(0)
    return replace(base, tiers=tuple((s, at(s + 1)) for s in starts)) if starts else base


def _rate_at(rate: Any, tokens: float) -> Any:
    """A genai-prices rate (Decimal or TieredPrices) for a request of ``tokens`` input tokens."""
    for tier in reversed(getattr(rate, "tiers", ())):
        if tokens > tier.start:
            return tier.price
    return getattr(rate, "base", rate)


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
