"""The notebook's variables as text for a model: a listing, one variable described, and
the variables a prompt names as ``@name`` attached to it.

``user_variables(namespace)`` leaves out underscore names, modules, imported classes and
functions, and IPython's own names (``In``, ``Out``, ``exit``, ``quit``, ``get_ipython``…). Everything is capped: a model gets a
summary, never a whole table.
"""

from __future__ import annotations

import difflib
import re
import reprlib
import sys
import types
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping

MAX_NAMES = 500  # names offered to the chat box's @ list (it filters as the user types)
LIST_MAX_CHARS = 4_000  # list_variables' text, at most
LIST_MAX_NAMES = 200  # variables listed, at most
DESCRIBE_MAX_CHARS = 4_000  # describe_variable's text, at most
HEAD_ROWS = 5
MAX_COLUMNS = 40  # a DataFrame's columns listed one by one, at most
DTYPES_SHOWN = 6  # dtypes in a listing line
IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})
ATTACH_HEADER = "Attached notebook variables"
_MENTION = re.compile(r"(?<![\w@.])@([A-Za-z_][A-Za-z0-9_]*)\b(?!@)")


def user_variables(namespace: Mapping[str, Any], hidden: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The names a user made: no underscore names, modules, imported classes and functions, or
    IPython's own names.

    IPython's own names are those in ``hidden`` (default: the shell's ``user_ns_hidden`` when
    ``namespace`` is its user namespace) still holding the same object, so a name the user rebound
    stays; with no such record, the usual ones (``In``, ``Out``, ``exit``…) are left out by name."""
    hidden = _hidden_names(namespace) if hidden is None else hidden
    out = {}
    for name, value in list(namespace.items()):
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            continue
        if isinstance(value, types.ModuleType):
            continue
        if (name in hidden and hidden[name] is value) if hidden else name in IPYTHON_NAMES:
            continue
        if _imported_definition(value):  # from x import SomeClass, some_function
            continue
        out[name] = value
    return out


@dataclass(frozen=True)
class VariableName:
    """One name the user can mention: ``@name``, shown with its type's name."""

    name: str
    type_name: str


def variable_names(namespace: Mapping[str, Any] | None = None, hidden: Mapping[str, Any] | None = None,
                   limit: int = MAX_NAMES) -> list[VariableName]:
    """The names a user would mention (the chat box's ``@name`` list), sorted case-insensitively,
    at most ``limit``; ``namespace=None`` reads the running IPython shell's (empty outside one)."""
    if namespace is None:
        namespace = shell_namespace() or {}
    out = [VariableName(name, type(value).__name__) for name, value in user_variables(namespace, hidden).items()]
    out.sort(key=lambda v: (v.name.lower(), v.name))
    return out[:max(0, limit)]


def shell_namespace() -> dict | None:
    """The running IPython shell's user namespace (None outside one; IPython is never imported here)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell.user_ns if shell is not None else None


def _imported_definition(value: Any) -> bool:
    """A class or function defined in a module, not in the notebook itself."""
    if not isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return False
    return getattr(value, "__module__", None) not in (None, "__main__")


def _hidden_names(namespace: Mapping[str, Any]) -> Mapping[str, Any]:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and getattr(shell, "user_ns", None) is namespace:
        return getattr(shell, "user_ns_hidden", {}) or {}
    return {}


# --- list_variables ------------------------------------------------------------------------


def list_variables_text(namespace: dict) -> str:
    """One line a variable: name, type, shape or length, dtypes in short, memory size."""
    names = user_variables(namespace)
    if not names:
        return "No variables yet: the notebook's namespace has no user variables."
    lines = [f"{len(names)} variable{'s' if len(names) != 1 else ''} (name: type, shape, size):"]
    used = len(lines[0])
    for i, (name, value) in enumerate(sorted(names.items(), key=lambda kv: kv[0].lower())):
        line = f"- {name}: {summary_line(value)}"
        if i >= LIST_MAX_NAMES or used + len(line) + 1 > LIST_MAX_CHARS:
            lines.append(f"… and {len(names) - i} more not listed (ask describe_variable for one by name)")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def summary_line(value: Any) -> str:
    """``DataFrame, 12 rows × 3 columns (month: object, revenue: int64), 1.2 KB``-like text."""
    kind = type(value).__name__
    parts = [kind]
    try:
        shape = _shape(value)
        if shape:
            parts.append(shape)
        dtypes = _dtypes_short(value)
        if dtypes:
            parts[-1] += f" ({dtypes})"
        parts.append(_size(_memory(value)))
    except Exception:  # a strange object must not break the listing
        pass
    if callable(value) and not isinstance(value, type) and kind in ("function", "builtin_function_or_method"):
        parts = [f"function{_signature(value)}"]
    return ", ".join(parts)


def size_text(value: Any) -> str:
    """A value's shape or length as ``list_variables`` says it ("7 rows × 3 columns", "length 4"),
    "" when it has none or cannot tell."""
    try:
        return _shape(value)
    except Exception:  # a strange object must not break the caller
        return ""


def _shape(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        if len(shape) == 2 and _pandas(value):
            return f"{shape[0]:,} rows × {shape[1]:,} columns"
        if len(shape) == 1 and _pandas(value):
            return f"{shape[0]:,} rows, dtype {value.dtype}"
        return "shape " + "×".join(str(n) for n in shape) + (f", dtype {value.dtype}" if hasattr(value, "dtype") else "")
    if isinstance(value, (str, bytes)):
        return f"{len(value):,} characters" if isinstance(value, str) else f"{len(value):,} bytes"
    if isinstance(value, (list, tuple, dict, set, frozenset)) or (hasattr(value, "__len__") and not isinstance(value, type)):
        return f"length {len(value):,}"
    if isinstance(value, (int, float, complex, bool)):
        return f"value {reprlib.repr(value)}"
    return ""


def _dtypes_short(value: Any) -> str:
    if not (_pandas(value) and hasattr(value, "columns")):
        return ""
    pairs = [f"{c}: {t}" for c, t in list(value.dtypes.items())[:DTYPES_SHOWN]]
    more = len(value.columns) - DTYPES_SHOWN
    return ", ".join(pairs) + (f", … {more} more" if more > 0 else "")


def _memory(value: Any) -> int:
    if _pandas(value) and hasattr(value, "memory_usage"):
        deep = len(value) <= 1_000_000  # deep counts strings one by one
        usage = value.memory_usage(deep=deep)
        return int(usage.sum()) if hasattr(usage, "sum") else int(usage)
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    return sys.getsizeof(value)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _pandas(value: Any) -> bool:
    return (type(value).__module__ or "").split(".")[0] == "pandas"


def _signature(fn: Any) -> str:
    import inspect

    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(…)"


# --- describe_variable ---------------------------------------------------------------------


def describe_variable_text(namespace: dict, name: str) -> str:
    """What a user would look at to know ``name``: for a DataFrame its columns (dtype,
    non-null count), ``head()`` and ``describe()``; otherwise its printed form. Capped.

    An unknown name raises ``NameError`` naming close matches.
    """
    name = name.strip()
    if name not in namespace:
        raise NameError(unknown_name_message(name, user_variables(namespace)))
    value = namespace[name]
    head = f"{name}: {summary_line(value)}"
    if _pandas(value) and hasattr(value, "columns"):
        body = _frame_description(value)
    elif _pandas(value) and hasattr(value, "dtype"):
        body = _series_description(value)
    else:
        body = _printed(value)
    return cap(f"{head}\n{body}", DESCRIBE_MAX_CHARS, "of the description")


def unknown_name_message(name: str, variables: dict) -> str:
    close = difflib.get_close_matches(name, list(variables), n=3, cutoff=0.6)
    if not close:
        lowered = {n.lower(): n for n in variables}
        close = [lowered[n] for n in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)]
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    known = sorted(variables)[:20]
    listing = f" Variables: {', '.join(known)}{' …' if len(variables) > 20 else ''}." if known else ""
    return f"no variable named {name!r} in the notebook{hint}{listing}"


def _frame_description(frame: Any) -> str:
    rows = len(frame)
    lines = ["columns (name: dtype, non-null count):"]
    counts = frame.count()
    for col, dtype in list(frame.dtypes.items())[:MAX_COLUMNS]:
        lines.append(f"- {col}: {dtype}, {int(counts[col]):,} of {rows:,} non-null")
    if len(frame.columns) > MAX_COLUMNS:
        lines.append(f"… {len(frame.columns) - MAX_COLUMNS} more columns")
    lines += ["", f"head({HEAD_ROWS}):", frame.head(HEAD_ROWS).to_string(max_cols=12, max_colwidth=30)]
    try:
        numeric = frame.select_dtypes("number")
        stats = frame.describe() if len(numeric.columns) else frame.describe(include="all")
        lines += ["", "describe():", stats.to_string(max_cols=12, max_colwidth=30)]
    except (ValueError, TypeError):  # e.g. no columns at all
        pass
    return "\n".join(lines)


def _series_description(series: Any) -> str:
    lines = [f"non-null: {int(series.count()):,} of {len(series):,}",
             f"head({HEAD_ROWS}):", series.head(HEAD_ROWS).to_string()]
    try:
        lines += ["describe():", series.describe().to_string()]
    except (ValueError, TypeError):
        pass
    return "\n".join(lines)


def _printed(value: Any) -> str:
    if callable(value) and getattr(value, "__doc__", None) and isinstance(value, types.FunctionType):
        doc = (value.__doc__ or "").strip().splitlines()[0]
        return f"def {value.__name__}{_signature(value)}: {doc}"
    shown = reprlib.Repr()
    shown.maxlist = shown.maxtuple = shown.maxset = shown.maxfrozenset = shown.maxdeque = 50
    shown.maxdict = 40
    shown.maxstring = shown.maxother = 2_000
    shown.maxlevel = 4
    if isinstance(value, (list, tuple, dict, set, frozenset, str)):
        return shown.repr(value)
    try:
        text = repr(value)  # arrays and most objects summarise themselves
    except Exception as exc:
        text = f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"
    return text


def cap(text: str, limit: int, what: str = "") -> str:
    """``text`` cut to about ``limit`` characters, keeping its start and end, with a note of the cut."""
    if len(text) <= limit:
        return text
    head = int(limit * 0.7)
    tail = max(limit - head, 0)
    cut = len(text) - head - tail
    note = f"\n… [{cut:,} characters {what + ' ' if what else ''}cut] …\n"
    return text[:head] + note + (text[-tail:] if tail else "")


# --- @name in a prompt ---------------------------------------------------------------------


def mentioned_variables(prompt: str, namespace: dict) -> list[str]:
    """The ``@name`` references in ``prompt`` that name a notebook variable, in order, once each.

    An email-like ``a@b`` is not a reference; unknown names are left alone.
    """
    variables = user_variables(namespace)
    found: list[str] = []
    for match in _MENTION.finditer(prompt):
        name = match.group(1)
        if name in variables and name not in found:
            found.append(name)
    return found


def attach_variables(prompt: str, namespace: dict) -> tuple[str, list[str]]:
    """``prompt`` followed by ``describe_variable`` of each ``@name`` it mentions, and those names.

    The prompt text says what was attached (a header naming them), so the transcript shows it.
    """
    names = mentioned_variables(prompt, namespace)
    if not names:
        return prompt, []
    blocks = [f"\n\n[{ATTACH_HEADER}: {', '.join('@' + n for n in names)}]"]
    for name in names:
        try:
            text = describe_variable_text(namespace, name)
        except Exception as exc:  # a variable whose description fails is still named
            text = f"{name}: could not be described ({type(exc).__name__}: {exc})"
        blocks.append(f"--- @{name} ---\n{text}")
    return prompt.rstrip() + "\n".join(blocks), names
