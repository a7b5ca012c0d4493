"""Providers: one package per wire format (``openai_chat``, ``openai_responses``, ``anthropic``,
``gemini``), the local, demo and replay models, and the registry of model-string prefixes.

Every subpackage here is a wire package exporting one ``SPEC`` (a ``WireSpec``: prefixes, key
variables, pricing id, token names, model-name prefixes); the registry reads them on first use
(:func:`wire_specs`), so a new wire is its package and its spec.

``Agent(model="prefix:name")`` finds the provider factory registered under
``prefix``. Built-in prefixes are below; a separate package adds its own with
:func:`register` or, without any import, through the ``nbagent.providers``
entry-point group (the entry point's name is the prefix, its object the
factory)::

    [project.entry-points."nbagent.providers"]
    myllm = "my_package.provider:MyProvider"

Every factory is called the same way, like the built-in provider classes::

    factory(model_name, *, api_key=None, base_url=None, **options) -> Provider
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from ..core.errors import ConfigError, NbagentError, register_key_variable, register_secret
from ..core.text import exception_text
from .base import Provider
from .wire_spec import WireSpec

ENTRY_POINT_GROUP = "nbagent.providers"

Factory = Callable[..., Any]


@dataclass(frozen=True)
class Registration:
    prefix: str
    factory: Factory | str  # a callable, or "module:attribute" imported on first use
    default_model: str = ""


# the models that are no wire format (the wires come from their specs)
_BUILTIN = {
    "local": ("nbagent.providers.local:LocalProvider", "smollm2"),
    "demo": ("nbagent.providers.demo:DemoProvider", "demo"),
    "replay": ("nbagent.providers.replay:ReplayProvider", ""),
}

_registry: dict[str, Registration] = {p: Registration(p, f, d) for p, (f, d) in _BUILTIN.items()}
_specs: list[WireSpec] = []
_unregistered: set[str] = set()  # built-in prefixes unregister() removed before the specs were read
_entry_points_loaded = False


def wire_specs() -> tuple[WireSpec, ...]:
    """The ``SPEC`` of every wire package under ``nbagent/providers/`` (read once, by package name)."""
    if not _specs:
        found = []
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if not info.ispkg:
                continue
            spec = getattr(importlib.import_module(f"{__name__}.{info.name}"), "SPEC", None)
            if not isinstance(spec, WireSpec) or spec.package != info.name:
                raise ConfigError(f"the wire package nbagent.providers.{info.name} exports no WireSpec SPEC "
                                  "naming it")
            found.append(spec)
        for spec in found:
            for name in spec.key_variables:
                register_key_variable(name)  # scrubbed from every message from now on
            for prefix in spec.prefixes:
                if prefix not in _registry and prefix not in _unregistered:  # register() set in this process wins
                    _registry[prefix] = Registration(prefix, spec.factory, spec.default_model)
        _specs.extend(found)
    return tuple(_specs)


def wire_spec(prefix: str) -> WireSpec | None:
    """The spec of the wire a provider name or prefix names (``claude``: the Messages API's); None for
    a provider with no wire package (``local``, ``demo``, a plugin)."""
    return next((spec for spec in wire_specs() if prefix in spec.prefixes), None)


def aliases() -> frozenset[str]:
    """The prefixes that are another name of a wire (``claude``, ``google``)."""
    return frozenset(a for spec in wire_specs() for a in spec.aliases)


def guess_prefix(model: str) -> str | None:
    """The prefix a bare model name belongs to (``claude-…`` -> ``anthropic``; ``*.gguf`` -> ``local``)."""
    for spec in wire_specs():
        if spec.claims(model):
            return spec.name
    return "local" if model.strip().lower().endswith(".gguf") else None


def __getattr__(name: str) -> object:
    if name == "ALIASES":  # kept for callers of the former constant
        return aliases()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register(prefix: str, factory: Factory | str, *, default_model: str = "") -> None:
    """Make ``Agent(model="prefix:name")`` call ``factory(name, api_key=..., base_url=..., **options)``.

    ``factory`` is a callable (e.g. a Provider subclass) or ``"module:attribute"``.
    Registering a prefix again replaces it.
    """
    key = prefix.strip().lower()
    if not key or ":" in key:
        raise ConfigError(f"a provider prefix must be a non-empty word without ':', not {prefix!r}")
    _registry[key] = Registration(key, factory, default_model)


def unregister(prefix: str) -> None:
    """Forget a prefix (a built-in one too); unknown prefixes are ignored."""
    key = prefix.strip().lower()
    if not _specs:
        _unregistered.add(key)
    _registry.pop(key, None)


def registered() -> dict[str, Registration]:
    """Every known prefix (wires and entry points included)."""
    wire_specs()
    _load_entry_points()
    return dict(_registry)


def lookup(prefix: str) -> Registration | None:
    key = prefix.lower()
    if key not in _registry:
        wire_specs()
    if key not in _registry:
        _load_entry_points()
    return _registry.get(key)


def create(prefix: str, name: str, *, api_key: str | None = None, base_url: str | None = None,
           **options: Any) -> Any:
    """The provider for ``prefix:name`` (``name`` empty: the prefix's default model)."""
    reg = lookup(prefix)
    if reg is None:
        known = ", ".join(sorted(set(registered()) - aliases()))
        raise ConfigError(f"unknown provider {prefix!r}: known prefixes are {known}")
    register_secret(api_key)  # scrubbed from whatever a plugin's error says
    factory = _factory(reg)
    try:
        provider = factory(name or reg.default_model, api_key=api_key, base_url=base_url, **options)
    except (NbagentError, KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin may raise anything (SystemExit too): one typed error
        raise ConfigError(f"provider plugin {reg.prefix!r} ({_origin(reg)}) failed: {exception_text(exc)}") from None
    if not isinstance(provider, Provider):
        raise ConfigError(f"provider plugin {reg.prefix!r} ({_origin(reg)}) returned a "
                          f"{type(provider).__name__}, not an nbagent Provider")
    return provider


def _factory(reg: Registration) -> Factory:
    if not isinstance(reg.factory, str):
        return reg.factory
    module, _, attr = reg.factory.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (KeyboardInterrupt, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - ImportError, AttributeError, the plugin's own import-time error,
        # SystemExit from a plugin that calls sys.exit() at import: never the kernel's end, one typed error
        raise ConfigError(f"provider plugin {reg.prefix!r} ({reg.factory}) cannot be loaded: {exception_text(exc)}") from None


def _origin(reg: Registration) -> str:
    f = reg.factory
    return f if isinstance(f, str) else f"{getattr(f, '__module__', '?')}:{getattr(f, '__qualname__', repr(f))}"


def refresh() -> None:
    """Read the wire specs and the ``nbagent.providers`` entry points again (e.g. after installing a plugin)."""
    global _entry_points_loaded
    _specs.clear()
    wire_specs()
    _entry_points_loaded = False
    _load_entry_points()


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in _entry_points():
        if ep.name.lower() not in _registry:  # what register() set in this process wins
            _registry[ep.name.lower()] = Registration(ep.name.lower(), ep.value)


def _entry_points() -> list[Any]:
    """The group's entry points, distribution by distribution: one whose metadata cannot be read
    (a non-UTF-8 ``entry_points.txt``) is skipped with a warning, the others still load."""
    from importlib.metadata import distributions

    found, seen = [], set()
    for dist in distributions():
        try:
            name = dist.name or "?"
            if name.lower() in seen:  # the first on sys.path wins, as importlib.metadata.entry_points does
                continue
            seen.add(name.lower())
            found += [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
        except Exception as exc:  # noqa: BLE001 - another package's broken metadata must not break ours
            where = getattr(dist, "_path", "?")
            warnings.warn(f"nbagent: skipping the entry points of {where}: {exception_text(exc):.200}", RuntimeWarning,
                          stacklevel=3)
    return found
