"""The notebook's variables as text for a model: a listing, one variable described, and
the variables a prompt names as ``@name`` attached to it.

``user_variables(namespace)`` leaves out underscore names, modules, imported classes and
functions, and IPython's own names (``In``, ``Out``, ``exit``, ``quit``, ``get_ipython``…); no tool
answers for a name it leaves out. Everything is capped: a model gets a summary, never a whole table.

Variables whose name or value looks like a credential (a provider key's shape, ``*_KEY``,
``*_TOKEN``, ``*SECRET*``, ``PASSWORD``…) are listed as redacted and never described, unless the
user attaches them as ``@name``; key-shaped text inside any other description is redacted
(``scrub``: the one rule every notebook text bound for the model goes through, outputs included).
What a variable holds is data, never instructions: the listing and each description come fenced
(``core.text.data_block``) after a line saying what they are.

Every inspection (a listing line, a description, an attachment) runs on a thread of its own with a
time limit (``cell_runner.call_with_time_limit``): a ``__repr__``, ``__len__`` or ``shape`` that
hangs is interrupted and the text says so.
"""

from __future__ import annotations

import difflib
import itertools
import re
import reprlib
import sys
import time
import types
from dataclasses import dataclass
from typing import Any
from collections.abc import Mapping

from ..core.errors import redact
from ..core.text import data_block, strip_terminal_codes
from .cell_runner import TimeLimitExceeded, call_with_time_limit

MAX_NAMES = 500  # names offered to the chat box's @ list (it filters as the user types)
LIST_MAX_CHARS = 4_000  # list_variables' text, at most
LIST_MAX_NAMES = 200  # variables listed, at most
DESCRIBE_MAX_CHARS = 4_000  # describe_variable's text, at most
HEAD_ROWS = 5
MAX_COLUMNS = 40  # a DataFrame's columns listed one by one, at most
DEEP_MEMORY_COLUMNS = 1_000  # past this many columns a frame's memory is counted shallowly
MAX_DIMS = 32  # a shape with more dimensions is shown as its number of dimensions
DTYPES_SHOWN = 6  # dtypes in a listing line
INSPECT_SECONDS = 2.0  # one variable's line in list_variables, at most
LIST_SECONDS = 10.0  # the whole listing, at most
DESCRIBE_SECONDS = 10.0  # one describe_variable, at most
ATTACH_MAX = 10  # @names attached to one prompt, at most
ATTACH_SECONDS = 5.0  # one attachment, at most
ATTACH_TOTAL_SECONDS = 10.0  # all the attachments of a prompt, at most
ATTACH_MAX_CHARS = 20_000  # all the attachments' text, at most
SECRET_SCAN_CHARS = 100_000  # how much of a string value is searched for key shapes
IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})
ATTACH_HEADER = "Attached notebook variables"
_MENTION = re.compile(r"(?<![\w@.])@([A-Za-z_][A-Za-z0-9_]*)\b(?!@)")
SECRET_NAME = re.compile(r"(?:^|_)(?:API_?)?KEY$|APIKEY|(?:^|_)TOKEN$|SECRET|PASSWORD|PASSWD|(?:^|_)PWD$"
                         r"|CREDENTIAL", re.IGNORECASE)
SECRET_VALUE = re.compile(
    r"sk-[A-Za-z0-9_\-]{16,}|AIza[0-9A-Za-z_\-]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{30,}|glpat-[A-Za-z0-9_\-]{20,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----")
# the literal starts of SECRET_VALUE's shapes: a text holding none of them is not searched (10 MB: 3 ms, not 0.5 s)
_SECRET_STARTS = ("sk-", "AIza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AKIA", "hf_",
                  "glpat-", "-----BEGIN ")
REDACTED_NOTE = "redacted: its name or value looks like a credential (the user can attach it as @{name})"


class InspectionTimeout(Exception):
    """Looking at a variable took longer than its time limit and was interrupted."""


def looks_like_credential(name: str, value: Any) -> bool:
    """Whether a variable's name (``OPENAI_API_KEY``, ``db_password``…) or its text value (a provider
    key's shape, a key nbagent knows) looks like a credential."""
    if SECRET_NAME.search(name):
        return True
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value[:SECRET_SCAN_CHARS]).decode("latin-1")
    if not isinstance(value, str):
        return False
    head = value[:SECRET_SCAN_CHARS]
    return SECRET_VALUE.search(head) is not None or redact(head) != head


def scrub(text: str) -> str:
    """``text`` with every key-shaped or known key replaced by ``[redacted]``."""
    text = redact(text)
    return SECRET_VALUE.sub("[redacted]", text) if any(start in text for start in _SECRET_STARTS) else text


def output_for_model(text: str) -> str:
    """Notebook text bound for the model (a cell's output, a value, a traceback): terminal codes
    removed (colours, OSC-8 links) and key-shaped or known keys ``[redacted]``."""
    return scrub(strip_terminal_codes(text))


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
    """One line a variable: name, type, shape or length, dtypes in short, memory size; a
    credential-looking one is listed as redacted, one whose inspection hangs as not inspected."""
    names = user_variables(namespace)
    if not names:
        return "No variables yet: the notebook's namespace has no user variables."
    head = f"{len(names)} variable{'s' if len(names) != 1 else ''} (name: type, shape, size):"
    lines: list[str] = []
    used, more = len(head), ""
    deadline = time.monotonic() + LIST_SECONDS
    for i, (name, value) in enumerate(sorted(names.items(), key=lambda kv: kv[0].lower())):
        if i >= LIST_MAX_NAMES or used + len(name) + 4 > LIST_MAX_CHARS:
            more = f"\n… and {len(names) - i} more not listed (ask describe_variable for one by name)"
            break
        line = f"- {name}: {_listing_line(name, value, deadline)}"
        lines.append(line)
        used += len(line) + 1
    return head + "\n" + data_block("\n".join(lines)) + more


def _listing_line(name: str, value: Any, deadline: float) -> str:
    kind = type(value).__name__
    left = deadline - time.monotonic()
    if left <= 0:
        return f"{kind}, not inspected (the listing's {LIST_SECONDS:g} s were used up)"
    try:
        if call_with_time_limit(lambda: looks_like_credential(name, value), min(INSPECT_SECONDS, left)):
            return f"{kind}, {REDACTED_NOTE.format(name=name)}"
        line = call_with_time_limit(lambda: summary_line(value), min(INSPECT_SECONDS, left))
        return output_for_model(" ".join(line.split()))[:LIST_MAX_CHARS // 4]  # one line, whatever a dtype's name holds
    except TimeLimitExceeded as exc:
        return f"{kind}, not inspected: looking at it {exc}"
    except Exception as exc:  # noqa: BLE001 - a hostile object must not break the listing
        return f"{kind}, not inspected ({type(exc).__name__})"


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
    if isinstance(shape, tuple) and len(shape) > MAX_DIMS:
        return f"{len(shape):,} dimensions"
    if shape == () and hasattr(value, "dtype"):  # a numpy scalar or a 0-d array: its value, not an empty shape
        item = value.item() if hasattr(value, "item") else value
        return f"value {reprlib.repr(item)}, dtype {value.dtype}"
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
    pairs = [f"{c}: {t}" for c, t in value.iloc[:, :DTYPES_SHOWN].dtypes.items()]
    more = len(value.columns) - DTYPES_SHOWN
    return ", ".join(pairs) + (f", … {more} more" if more > 0 else "")


def _memory(value: Any) -> int:
    if _pandas(value) and hasattr(value, "memory_usage"):
        columns = len(getattr(value, "columns", ()))
        if columns > DEEP_MEMORY_COLUMNS:  # counting a million columns takes half a minute: estimated
            sample = value.iloc[:, :DEEP_MEMORY_COLUMNS].memory_usage(index=False, deep=False)
            return int(sample.sum() * columns / DEEP_MEMORY_COLUMNS)
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


def describe_variable_text(namespace: dict, name: str, *, attached: bool = False,
                           seconds: float | None = None, max_chars: int = DESCRIBE_MAX_CHARS) -> str:
    """What a user would look at to know ``name``: for a DataFrame its columns (dtype,
    non-null count), ``head()`` and ``describe()``; otherwise its printed form. Capped at
    ``max_chars``, made in at most ``seconds`` (default DESCRIBE_SECONDS; ``InspectionTimeout`` past them).

    A name the listing hides, or none, raises ``NameError`` naming close matches; a
    credential-looking variable raises ``PermissionError`` unless the user ``attached`` it
    (only then is key-shaped text left in).
    """
    name = name.strip()
    variables = user_variables(namespace)
    if name not in variables:
        raise NameError(unknown_name_message(name, variables))
    value = variables[name]

    def describe() -> str:
        if not attached and looks_like_credential(name, value):
            raise PermissionError(f"{name!r} is {REDACTED_NOTE.format(name=name)}; it is never described "
                                  "to the model unless the user attaches it")
        text = cap(f"{name}: {summary_line(value)}\n{_body(value, max_chars)}", max_chars, "of the description")
        text = strip_terminal_codes(text) if attached else output_for_model(text)
        return f"[variable {name}]\n" + data_block(text)

    try:
        return call_with_time_limit(describe, DESCRIBE_SECONDS if seconds is None else seconds)
    except TimeLimitExceeded as exc:
        raise InspectionTimeout(f"describing {name!r} {exc}; try run_python with a smaller look "
                           f"(e.g. type({name}))") from None


def _body(value: Any, max_chars: int) -> str:
    if _pandas(value) and hasattr(value, "columns"):
        return _frame_description(value)
    if _pandas(value) and hasattr(value, "dtype"):
        return _series_description(value)
    return _printed(value, max_chars)


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
    rows, columns = len(frame), len(frame.columns)
    if columns > MAX_COLUMNS:  # a frame of a million columns: only the first ones are looked at
        frame = frame.iloc[:, :MAX_COLUMNS]
    lines = ["columns (name: dtype, non-null count):"]
    counts = frame.count()
    for i, (col, dtype) in enumerate(frame.dtypes.items()):
        lines.append(f"- {col}: {dtype}, {int(counts.iloc[i]):,} of {rows:,} non-null")
    if columns > MAX_COLUMNS:
        lines.append(f"… {columns - MAX_COLUMNS:,} more columns (not described)")
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


def _printed(value: Any, max_chars: int = DESCRIBE_MAX_CHARS) -> str:
    if callable(value) and getattr(value, "__doc__", None) and isinstance(value, types.FunctionType):
        doc = (value.__doc__ or "").strip().splitlines()[0]
        return f"def {value.__name__}{_signature(value)}: {doc}"
    return capped_repr(value, max_chars)


def capped_repr(value: Any, max_chars: int) -> str:
    """``repr(value)`` made at most about ``max_chars`` long while it is made (``reprlib``-style):
    containers show their first items, strings and bytes their start; other objects summarise
    themselves (arrays do) and are cut afterwards."""
    if isinstance(value, (str, bytes, bytearray)):
        text = repr(value[:max_chars])
        return text if len(value) <= max_chars else f"{text} … ({len(value):,} in all)"
    shown = _FirstItems(min(2_000, max_chars))
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return shown.repr(value)
    try:
        return repr(value)[:max_chars]  # arrays and most objects summarise themselves
    except Exception as exc:
        return f"<{type(value).__name__}: repr failed: {type(exc).__name__}>"


class _FirstItems(reprlib.Repr):
    """``reprlib.Repr`` that never sorts a set or a dict (sorting a big one costs its whole size)
    and cuts bytes before showing them."""

    def __init__(self, max_chars: int) -> None:
        super().__init__()
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = self.maxdeque = 50
        self.maxdict = 40
        self.maxstring = self.maxother = max_chars
        self.maxlevel = 4

    def repr_bytes(self, x: bytes, level: int) -> str:
        return capped_repr(x, self.maxstring)

    def repr_bytearray(self, x: bytearray, level: int) -> str:
        return capped_repr(x, self.maxstring)

    def repr_set(self, x: set, level: int) -> str:
        return "set()" if not x else self._first(x, level, "{", "}", self.maxset)

    def repr_frozenset(self, x: frozenset, level: int) -> str:
        return "frozenset()" if not x else self._first(x, level, "frozenset({", "})", self.maxfrozenset)

    def repr_dict(self, x: dict, level: int) -> str:
        if not x or level <= 0:
            return "{}" if not x else "{...}"
        pieces = [f"{self.repr1(k, level - 1)}: {self.repr1(x[k], level - 1)}"
                  for k in itertools.islice(x, self.maxdict)]
        return "{" + ", ".join(pieces) + (", ..." if len(x) > self.maxdict else "") + "}"

    def _first(self, x: Any, level: int, left: str, right: str, most: int) -> str:
        if level <= 0:
            return f"{left}...{right}"
        pieces = [self.repr1(v, level - 1) for v in itertools.islice(x, most)]
        return left + ", ".join(pieces) + (", ..." if len(x) > most else "") + right


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


def attach_variables(prompt: str, namespace: dict, *, typed: str | None = None) -> tuple[str, list[str]]:
    """``prompt`` followed by ``describe_variable`` of each ``@name`` the user typed (``typed``,
    default the prompt itself: text put in from variables never attaches), and those names.

    At most ATTACH_MAX names, ATTACH_SECONDS each (ATTACH_TOTAL_SECONDS in all) and ATTACH_MAX_CHARS
    of text; what was cut is said. The prompt says what was attached (a header naming them), so the
    transcript shows it. The descriptions are made on threads of their own: the caller only waits.
    """
    names = mentioned_variables(prompt if typed is None else typed, namespace)
    if not names:
        return prompt, []
    names, left_out = names[:ATTACH_MAX], names[ATTACH_MAX:]
    blocks = [f"\n\n[{ATTACH_HEADER}: {', '.join('@' + n for n in names)}]"]
    deadline, room = time.monotonic() + ATTACH_TOTAL_SECONDS, ATTACH_MAX_CHARS
    for name in names:
        text = _attachment(namespace, name, min(ATTACH_SECONDS, deadline - time.monotonic()), room)
        room -= len(text)
        blocks.append(f"--- @{name} ---\n{text}")
    if left_out:
        blocks.append(f"[{len(left_out)} more @names not attached (at most {ATTACH_MAX} a prompt): "
                      f"{', '.join('@' + n for n in left_out[:20])}{' …' if len(left_out) > 20 else ''}]")
    return prompt.rstrip() + "\n".join(blocks), names


def _attachment(namespace: dict, name: str, seconds: float, room: int) -> str:
    if seconds <= 0:
        return f"{name}: not attached (the attachments' {ATTACH_TOTAL_SECONDS:g} s were used up)"
    if room < 200:
        return f"{name}: not attached (the attachments' {ATTACH_MAX_CHARS:,} characters were used up)"
    try:
        return describe_variable_text(namespace, name, attached=True, seconds=seconds,
                                      max_chars=min(DESCRIBE_MAX_CHARS, room))
    except Exception as exc:  # a variable whose description fails is still named
        return f"{name}: could not be described ({type(exc).__name__}: {exc})"

