"""The user's variable names in the kernel, for the chat box's ``@name`` autocomplete.

Left out: underscore names, modules, and the names IPython put there itself (``In``, ``Out``,
``get_ipython``, ``exit``, ...: the shell's ``user_ns_hidden``, unless the user rebound them).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Mapping

MAX_NAMES = 500  # the popup filters as the user types; a namespace bigger than this is cut


@dataclass(frozen=True)
class VariableName:
    """One name the user can mention: ``@name``, shown with its type's name."""

    name: str
    type_name: str


def user_namespace() -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The running IPython shell's user namespace and its hidden names; both empty outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return {}, {}
    shell = get_ipython()
    if shell is None:
        return {}, {}
    return shell.user_ns, getattr(shell, "user_ns_hidden", {})


def variable_names(namespace: Mapping[str, Any] | None = None, hidden: Mapping[str, Any] | None = None,
                   limit: int = MAX_NAMES) -> list[VariableName]:
    """The names a user would mention, sorted case-insensitively, at most ``limit``.

    ``namespace=None`` reads the running IPython shell's (``hidden`` then defaults to its
    ``user_ns_hidden``); a name in ``hidden`` is left out while it still holds the same object."""
    if namespace is None:
        namespace, shell_hidden = user_namespace()
        hidden = shell_hidden if hidden is None else hidden
    hidden = hidden or {}
    out = []
    for name, value in list(namespace.items()):
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            continue
        if isinstance(value, types.ModuleType) or (name in hidden and hidden[name] is value):
            continue
        out.append(VariableName(name, type(value).__name__))
    out.sort(key=lambda v: (v.name.lower(), v.name))
    return out[:max(0, limit)]
