"""Tools: typed Python functions the model can call.

``@tool`` turns a type-hinted, documented function (sync or async) into a ``Tool`` with a JSON
schema; it stays callable like the function. ``Tool(name, description, input_schema, handler)``
builds one by hand (the handler gets the model's arguments as keyword arguments).
``await tool.run(args)`` validates, runs the handler (sync ones in a worker thread) and returns a
``ToolOutput``; a handler that raises becomes an error result ("ValueError: ..."), never an exception.

A tool may also override ``preview(args)``: what the call will do, computed before the call waits
for approval (a notebook cell tool's diff, ``Step.preview``). While ``preview`` and ``run`` execute, the
loop sets :func:`current_call` to the call's :class:`ToolCallContext` (call id, turn, conversation,
model, who approved), which tools that record what they did read.

Rich results: a pandas DataFrame / Series, a matplotlib Figure or a PIL image also gets a
``ToolOutput.display`` (mime type -> data: an escaped ``text/html`` table or a base64
``image/png``, size-capped) that the tool's step carries to the widget's tool card; the model
gets the compact text of ``format_result``.
"""

from __future__ import annotations

import asyncio
import base64
import collections.abc
import contextvars
import dataclasses
import functools
import inspect
import io
import json
import math
import re
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from .docstrings import parse_docstring
from .tool_threads import ToolTimeout, run_in_daemon_thread
from .tool_process import FunctionRef, function_ref, run_in_process
from .tool_schema import coerce, function_schema, is_pydantic_model, json_type, jsonable, validate_value
from ..core.errors import ConfigError
from ..core.steps import CellPreview, VariableChange
from ..providers.base import ToolSpec

DEFAULT_MAX_RESULT_CHARS = 20_000  # results longer than this are cut (per-tool override)
DATAFRAME_MAX_ROWS = 60
DATAFRAME_MAX_COLS = 20
DISPLAY_MAX_BYTES = 400_000  # a rich display (HTML table, base64 PNG) larger than this is not kept
IMAGE_MAX_PIXELS = 1024  # images are scaled down to at most this many pixels a side

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass
class ToolOutput:
    """The result of one tool run: ``text`` goes to the model, ``value`` is the raw return."""

    text: str
    is_error: bool = False
    value: Any = None
    error: str = ""
    display: dict | None = None  # mime type -> data, for showing the value to the user
    changes: tuple[VariableChange, ...] = ()  # code tools: the variables the code created, changed, deleted


@dataclass(frozen=True)
class ToolCallContext:
    """The tool call being previewed or run, as the loop knows it (see :func:`current_call`)."""

    call_id: str
    turn: int = -1
    conversation_id: str = ""
    model: str = ""
    decided_by: str = ""  # "user", "policy allow_all", ... ("" while previewing)


_current_call: contextvars.ContextVar[ToolCallContext | None] = contextvars.ContextVar("nbagent_tool_call",
                                                                                       default=None)


def current_call() -> ToolCallContext | None:
    """The call whose ``preview`` or ``run`` is executing in this task (None outside the loop)."""
    return _current_call.get()


def set_current_call(context: ToolCallContext | None) -> contextvars.Token:
    """Make ``context`` the current call of this task (the loop's; reset with ``reset_current_call``)."""
    return _current_call.set(context)


def reset_current_call(token: contextvars.Token) -> None:
    _current_call.reset(token)


class Tool:
    """A function the model can call: name, description, JSON schema and handler."""

    runs_code = False  # True for tools that run code or edit cells (a course policy's run_code = false drops them)

    def __init__(self, name: str, description: str | None, input_schema: dict | None,
                 handler: Callable[..., Any], requires_approval: bool = False, *,
                 max_result_chars: int | None = None, timeout: float | None = None,
                 server: str = "", isolate: bool = False) -> None:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise ConfigError(
                f"invalid tool name {name!r}: providers require 1-64 characters of letters, "
                "digits, '_' or '-' (pass name=... to @tool to choose another)",
            )
        if not callable(handler):
            raise ConfigError(f"the handler of tool {name!r} is not callable")
        self.name = name
        self.description = description or ""
        self.input_schema = input_schema or {"type": "object", "properties": {}}
        self.handler = handler
        self.requires_approval = bool(requires_approval)
        self.max_result_chars = max_result_chars
        self.timeout = timeout  # seconds; None: the connection's tool_timeout
        self.server = server  # the MCP server the tool comes from ("": the user's own tool)
        self._hints: dict[str, Any] = {}  # parameter -> annotation, for dict -> instance conversion
        self.isolate = bool(isolate)  # each call in a subprocess that a timeout or Stop kills
        self._ref: FunctionRef | None = function_ref(handler, name) if self.isolate else None

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None,
                      description: str | None = None, requires_approval: bool = False,
                      max_result_chars: int | None = None, timeout: float | None = None,
                      isolate: bool = False) -> Tool:
        """Build a Tool from a function's signature, type hints and docstring."""
        summary, param_docs = parse_docstring(inspect.getdoc(fn) or "")
        schema, hints = function_schema(fn, param_docs)
        self = cls(name or str(getattr(fn, "__name__", "")), summary if description is None else description,
                   schema, fn, requires_approval, max_result_chars=max_result_chars, timeout=timeout,
                   isolate=isolate)
        self._hints = hints
        try:
            functools.update_wrapper(self, fn, updated=())
        except (AttributeError, TypeError):
            pass
        return self

    @property
    def spec(self) -> ToolSpec:
        """What the model is told of the tool: its name, description and JSON schema."""
        return ToolSpec(self.name, self.description, self.input_schema)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.handler(*args, **kwargs)

    def __repr__(self) -> str:
        params = list((self.input_schema.get("properties") or {}).keys())
        flag = ", requires_approval=True" if self.requires_approval else ""
        return f"Tool(name={self.name!r}, params={params!r}{flag})"

    async def preview(self, args: dict) -> CellPreview | None:
        """What a call with ``args`` will do, shown before it is approved (None: nothing to show)."""
        return None

    def validate(self, args: dict) -> list[str]:
        """Human-readable problems of ``args`` against the input schema ([] when valid)."""
        if not isinstance(args, dict):
            return [f"arguments must be a JSON object, got {json_type(args)}"]
        return validate_value(args, self.input_schema, "")

    async def run(self, args: dict | None = None, *, timeout: float | None = None) -> ToolOutput:
        """Validate, call the handler and format its result; never raises on tool errors.

        Sync handlers run on a daemon thread of their own; past ``timeout`` seconds
        (the tool's own ``timeout`` wins) the call is abandoned and reported as an error.
        An ``isolate`` tool runs in a subprocess instead, killed at the timeout or on Stop.
        """
        args = {} if args is None else args
        problems = self.validate(args)
        kwargs: dict[str, Any] = {}
        for key, value in ([] if problems else args.items()):
            try:
                kwargs[key] = coerce(value, self._hints.get(key))
            except Exception as exc:  # e.g. a pydantic ValidationError
                problems.append(f"{key!r}: {type(exc).__name__}: {exc}")
        if problems:
            msg = f"Invalid arguments for tool {self.name!r}: " + "; ".join(problems)
            return ToolOutput(text=msg, is_error=True, error=msg)
        limit = self.timeout if self.timeout is not None else timeout
        try:
            value = await asyncio.wait_for(self._call(kwargs), limit)
        except TimeoutError:
            msg = str(ToolTimeout(self.name, limit or 0.0, killed=self.isolate))
            return ToolOutput(text=msg, is_error=True, error=msg)
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            return ToolOutput(text=msg, is_error=True, error=msg)
        display = await asyncio.to_thread(rich_display, value) if _rich_kind(value) else None
        return ToolOutput(text=format_result(value, self.max_result_chars), value=value, display=display)

    def _call(self, kwargs: dict) -> Any:
        if self._ref is not None:
            return run_in_process(self._ref, kwargs, unwrap=handler_of)
        return _call_handler(self.handler, kwargs)


def handler_of(obj: Any) -> Any:
    """What an isolated tool's process calls of the object its module names: a Tool's handler
    (``@tool`` replaced the function by the Tool), else the object itself."""
    return obj.handler if isinstance(obj, Tool) else obj


async def _call_handler(handler: Callable[..., Any], kwargs: dict) -> Any:
    if _is_async(handler):
        return await handler(**kwargs)
    value = await run_in_daemon_thread(handler, **kwargs)
    if inspect.isawaitable(value):
        value = await value
    return value


def tool(fn: Callable[..., Any] | str | None = None, *, name: str | None = None,
         description: str | None = None, requires_approval: bool = False,
         max_result_chars: int | None = None, timeout: float | None = None, isolate: bool = False) -> Any:
    """Make a Tool from a function: ``@tool``, ``@tool()``, ``@tool("name")`` or ``@tool(name=...)``.

    ``isolate=True`` runs each call in a new process (``spawn``) that a timeout or Stop really kills
    (terminate, then kill); the result or exception comes back pickled. The function must be
    importable -- defined at the top level of a module, not a lambda, a nested function or a
    notebook cell (a ``config`` error at decoration time) -- and its arguments and result must pickle.

    The docstring is the description the model reads; the type hints make the JSON schema::

        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     'Add two numbers.'
        ...     return a + b
        >>> add.name, add(2, 3)
        ('add', 5)
    """
    if isinstance(fn, str):
        name, fn = fn, None

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(f, name=name, description=description,
                                  requires_approval=requires_approval,
                                  max_result_chars=max_result_chars, timeout=timeout, isolate=isolate)

    return wrap if fn is None else wrap(fn)


def to_tools(items: Any) -> dict[str, Tool]:
    """Tools and plain callables (wrapped with ``tool()``) as a name -> Tool dict."""
    if items is None:
        return {}
    if isinstance(items, Tool) or callable(items) and not isinstance(items, type):
        items = [items]
    elif isinstance(items, collections.abc.Mapping):
        items = list(items.values())
    out: dict[str, Tool] = {}
    for item in items:
        if not isinstance(item, Tool):
            if not callable(item):
                raise ConfigError(f"tools must be Tool objects or functions, got "
                                  f"{type(item).__name__}")
            item = tool(item)
        if item.name in out:
            raise ConfigError(f"two tools are named {item.name!r}; names must be unique")
        out[item.name] = item
    return out


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or (callable(fn) and inspect.iscoroutinefunction(type(fn).__call__))


# --- result formatting ----------------------------------------------------------


def format_result(value: Any, max_chars: int | None = None) -> str:
    """The text the model sees for a tool's return value, capped at ``max_chars``."""
    limit = DEFAULT_MAX_RESULT_CHARS if max_chars is None else max_chars
    try:
        text = _to_text(value)
    except Exception as exc:  # noqa: BLE001 - a broken __str__/to_string must not end the turn
        text = f"[a {type(value).__name__} that cannot be shown as text: {type(exc).__name__}: {exc!s:.200}]"
    if limit is not None and limit >= 0 and len(text) > limit:
        cut = len(text) - limit
        text = f"{text[:limit]}\n… [truncated {cut:,} chars]"
    return text


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    rich = _rich_kind(value)
    if rich == "figure":
        w, h = (int(x) for x in value.get_size_inches() * value.dpi)
        titles = [a.get_title() for a in value.get_axes() if a.get_title()]
        named = f"; titles: {', '.join(repr(t) for t in titles)}" if titles else ""
        return f"[matplotlib figure, {w}x{h} px, {len(value.get_axes())} axes{named}; shown to the user as an image]"
    if rich == "image":
        return f"[image, {value.width}x{value.height} px, mode {value.mode}; shown to the user]"
    kind = _pandas_kind(value)
    if kind == "DataFrame":
        rows, cols = value.shape
        body = value.to_string(max_rows=DATAFRAME_MAX_ROWS, max_cols=DATAFRAME_MAX_COLS)
        return f"DataFrame: {rows:,} rows x {cols:,} columns\n{body}"
    if kind == "Series":
        label = f" {value.name!r}" if value.name is not None else ""
        body = value.to_string(max_rows=DATAFRAME_MAX_ROWS)
        return f"Series{label}: {len(value):,} rows, dtype {value.dtype}\n{body}"
    structured = (dataclasses.is_dataclass(value) and not isinstance(value, type)) or is_pydantic_model(
        type(value))
    if value is None or isinstance(value, (dict, list, tuple, int, float, bool)) or structured:
        data = jsonable(value)
        try:
            return json.dumps(data, ensure_ascii=False, default=str)
        except ValueError:  # an int past Python's limit for decimal text (4,300 digits)
            return json.dumps(_big_ints_as_text(data), ensure_ascii=False, default=str)
    return str(value)


def _big_ints_as_text(value: Any) -> Any:
    """``value`` with each int too long for ``str()`` replaced by :func:`big_int_text`."""
    if isinstance(value, dict):
        return {k: _big_ints_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_big_ints_as_text(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 14_000:
        return big_int_text(value)
    return value


def big_int_text(value: int) -> str:
    """An int of any size as readable text without ``str()``'s digit limit: its digit count,
    leading digits (as a float) and exact last 20 digits."""
    sign, n = ("-" if value < 0 else ""), abs(value)
    exponent = math.log10(n)
    digits = math.floor(exponent) + 1
    lead = 10 ** (exponent - math.floor(exponent))
    tail = f"{n % 10**20:020d}"
    return f"≈{sign}{lead:.8f}e+{digits - 1} (an integer of {digits:,} digits, ending …{tail})"


def _pandas_kind(obj: Any) -> str | None:
    if type(obj).__module__.split(".")[0] != "pandas":
        return None
    import pandas as pd  # only once we know the object is a pandas one

    if isinstance(obj, pd.DataFrame):
        return "DataFrame"
    if isinstance(obj, pd.Series):
        return "Series"
    return None


def _rich_kind(value: Any) -> str | None:
    """"table" (pandas), "figure" (matplotlib) or "image" (PIL) when ``value`` has a rich display."""
    module = type(value).__module__.split(".")[0]
    if module == "pandas":
        return "table" if _pandas_kind(value) else None
    if module == "matplotlib" and callable(getattr(value, "savefig", None)) and hasattr(value, "get_axes"):
        return "figure"
    if module == "PIL" and callable(getattr(value, "save", None)) and hasattr(value, "width"):
        return "image"
    return None


def rich_display(value: Any) -> dict | None:
    """What the user sees of a tool's value in its card (mime type -> data), or None.

    Tables are pandas' HTML with cells escaped (the widget sanitises it again), cut to
    DATAFRAME_MAX_ROWS x DATAFRAME_MAX_COLS; figures and images are PNG (base64), at most
    IMAGE_MAX_PIXELS a side. Anything past DISPLAY_MAX_BYTES, or that fails, gives None.
    """
    try:
        kind = _rich_kind(value)
        if kind == "table":
            frame = value.to_frame() if _pandas_kind(value) == "Series" else value
            data = {"text/html": frame.to_html(max_rows=DATAFRAME_MAX_ROWS, max_cols=DATAFRAME_MAX_COLS,
                                               escape=True, border=0, show_dimensions=True)}
        elif kind in ("figure", "image"):
            data = {"image/png": _png(value, kind)}
        else:
            return None
    except Exception:  # a display is a nicety: the model's text result stands alone
        return None
    return data if sum(len(v) for v in data.values()) <= DISPLAY_MAX_BYTES else None


def _png(value: Any, kind: str) -> str:
    buf = io.BytesIO()
    if kind == "figure":
        w, h = value.get_size_inches()
        dpi = min(float(value.dpi), IMAGE_MAX_PIXELS / max(w, h, 1e-6))
        value.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    else:
        image = value.copy()
        image.thumbnail((IMAGE_MAX_PIXELS, IMAGE_MAX_PIXELS))
        if image.mode not in ("RGB", "RGBA", "L", "LA", "P"):
            image = image.convert("RGBA")
        image.save(buf, format="PNG", optimize=True)
    return base64.b64encode(buf.getvalue()).decode("ascii")
