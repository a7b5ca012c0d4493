"""Tools: typed Python functions the model can call.

``@tool`` turns a type-hinted, documented function (sync or async) into a ``Tool`` with a JSON
schema; it stays callable like the function. ``Tool(name, description, input_schema, handler)``
builds one by hand (the handler gets the model's arguments as keyword arguments).
``await tool.run(args)`` validates, runs the handler (sync ones in a worker thread) and returns a
``ToolOutput``; a handler that raises becomes an error result ("ValueError: ..."), never an exception.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import enum
import functools
import inspect
import json
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable

from .docstrings import parse_docstring
from ..core.errors import NbagentError
from ..providers.base import ToolSpec

DEFAULT_MAX_RESULT_CHARS = 20_000  # results longer than this are cut (per-tool override)
DATAFRAME_MAX_ROWS = 60
DATAFRAME_MAX_COLS = 20

_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NoneType = type(None)
_NO_DEFAULT = object()


@dataclass
class ToolOutput:
    """The result of one tool run: ``text`` goes to the model, ``value`` is the raw return."""

    text: str
    is_error: bool = False
    value: Any = None
    error: str = ""


class Tool:
    """A function the model can call: name, description, JSON schema and handler."""

    def __init__(self, name: str, description: str | None, input_schema: dict | None,
                 handler: Callable[..., Any], requires_approval: bool = False, *,
                 max_result_chars: int | None = None) -> None:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise NbagentError(
                f"invalid tool name {name!r}: providers require 1-64 characters of letters, "
                "digits, '_' or '-' (pass name=... to @tool to choose another)",
                kind="config",
            )
        if not callable(handler):
            raise NbagentError(f"the handler of tool {name!r} is not callable", kind="config")
        self.name = name
        self.description = description or ""
        self.input_schema = input_schema or {"type": "object", "properties": {}}
        self.handler = handler
        self.requires_approval = bool(requires_approval)
        self.max_result_chars = max_result_chars
        self._hints: dict[str, Any] = {}  # parameter -> annotation, for dict -> instance conversion

    @classmethod
    def from_function(cls, fn: Callable[..., Any], *, name: str | None = None,
                      description: str | None = None, requires_approval: bool = False,
                      max_result_chars: int | None = None) -> "Tool":
        """Build a Tool from a function's signature, type hints and docstring."""
        summary, param_docs = parse_docstring(inspect.getdoc(fn) or "")
        schema, hints = function_schema(fn, param_docs)
        self = cls(name or getattr(fn, "__name__", ""), summary if description is None else description,
                   schema, fn, requires_approval, max_result_chars=max_result_chars)
        self._hints = hints
        try:
            functools.update_wrapper(self, fn, updated=())
        except (AttributeError, TypeError):
            pass
        return self

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.handler(*args, **kwargs)

    def __repr__(self) -> str:
        params = list((self.input_schema.get("properties") or {}).keys())
        flag = ", requires_approval=True" if self.requires_approval else ""
        return f"Tool(name={self.name!r}, params={params!r}{flag})"

    def validate(self, args: dict) -> list[str]:
        """Human-readable problems of ``args`` against the input schema ([] when valid)."""
        if not isinstance(args, dict):
            return [f"arguments must be a JSON object, got {_json_type(args)}"]
        return _validate(args, self.input_schema, "")

    async def run(self, args: dict | None = None) -> ToolOutput:
        """Validate, call the handler and format its result; never raises on tool errors."""
        args = {} if args is None else args
        problems = self.validate(args)
        if not problems:
            try:
                kwargs = {k: _coerce(v, self._hints.get(k)) for k, v in args.items()}
            except Exception as exc:  # e.g. a pydantic ValidationError
                problems = [f"{type(exc).__name__}: {exc}"]
        if problems:
            msg = f"Invalid arguments for tool {self.name!r}: " + "; ".join(problems)
            return ToolOutput(text=msg, is_error=True, error=msg)
        try:
            if _is_async(self.handler):
                value = await self.handler(**kwargs)
            else:
                value = await asyncio.to_thread(self.handler, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            return ToolOutput(text=msg, is_error=True, error=msg)
        return ToolOutput(text=format_result(value, self.max_result_chars), value=value)


def tool(fn: Callable[..., Any] | str | None = None, *, name: str | None = None,
         description: str | None = None, requires_approval: bool = False,
         max_result_chars: int | None = None) -> Any:
    """Make a Tool from a function: ``@tool``, ``@tool()``, ``@tool("name")`` or ``@tool(name=...)``."""
    if isinstance(fn, str):
        name, fn = fn, None

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(f, name=name, description=description,
                                  requires_approval=requires_approval,
                                  max_result_chars=max_result_chars)

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
                raise NbagentError(f"tools must be Tool objects or functions, got "
                                   f"{type(item).__name__}", kind="config")
            item = tool(item)
        if item.name in out:
            raise NbagentError(f"two tools are named {item.name!r}; names must be unique", kind="config")
        out[item.name] = item
    return out


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


# --- result formatting ----------------------------------------------------------


def format_result(value: Any, max_chars: int | None = None) -> str:
    """The text the model sees for a tool's return value, capped at ``max_chars``."""
    limit = DEFAULT_MAX_RESULT_CHARS if max_chars is None else max_chars
    try:
        text = _to_text(value)
    except Exception:  # a broken __str__/to_string must not end the turn
        text = object.__repr__(value)
    if limit is not None and limit >= 0 and len(text) > limit:
        cut = len(text) - limit
        text = f"{text[:limit]}\n… [truncated {cut:,} chars]"
    return text


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    kind = _pandas_kind(value)
    if kind == "DataFrame":
        rows, cols = value.shape
        body = value.to_string(max_rows=DATAFRAME_MAX_ROWS, max_cols=DATAFRAME_MAX_COLS)
        return f"DataFrame: {rows:,} rows x {cols:,} columns\n{body}"
    if kind == "Series":
        label = f" {value.name!r}" if value.name is not None else ""
        body = value.to_string(max_rows=DATAFRAME_MAX_ROWS)
        return f"Series{label}: {len(value):,} rows, dtype {value.dtype}\n{body}"
    structured = (dataclasses.is_dataclass(value) and not isinstance(value, type)) or _is_pydantic_model(
        type(value))
    if value is None or isinstance(value, (dict, list, tuple, int, float, bool)) or structured:
        return json.dumps(_jsonable(value), ensure_ascii=False, default=str)
    return str(value)


def _pandas_kind(obj: Any) -> str | None:
    if type(obj).__module__.split(".")[0] != "pandas":
        return None
    import pandas as pd  # only once we know the object is a pandas one

    if isinstance(obj, pd.DataFrame):
        return "DataFrame"
    if isinstance(obj, pd.Series):
        return "Series"
    return None


def _is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_json_schema") and any(
        c.__module__.split(".")[0] == "pydantic" for c in tp.__mro__[1:]
    )


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if _is_pydantic_model(type(value)):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, (str, int, float, bool)) else k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    return value


# --- JSON schema from type hints ------------------------------------------------


def function_schema(fn: Callable[..., Any], param_docs: dict[str, str] | None = None) -> tuple[dict, dict]:
    """The input schema of ``fn`` and its resolved parameter annotations."""
    param_docs = param_docs or {}
    sig = inspect.signature(fn)
    hints = _resolve_hints(fn, sig)
    props: dict[str, Any] = {}
    required: list[str] = []
    extra_ok = False
    for pname, param in sig.parameters.items():
        if param.kind is param.VAR_KEYWORD:
            extra_ok = True
            continue
        if param.kind is param.VAR_POSITIONAL:
            continue
        prop = dict(_schema_for(hints.get(pname, Any)))
        if pname in param_docs and "description" not in prop:
            prop["description"] = param_docs[pname]
        if param.default is inspect.Parameter.empty:
            required.append(pname)
        elif (default := _json_default(param.default)) is not _NO_DEFAULT:
            prop["default"] = default
        props[pname] = prop
    schema = {"type": "object", "properties": props, "required": required}
    if not extra_ok:
        schema["additionalProperties"] = False
    return schema, hints


def _json_default(value: Any) -> Any:
    """A default as JSON, or _NO_DEFAULT when it has no JSON form (it is then left out)."""
    try:
        value = _jsonable(value)
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return _NO_DEFAULT


def _resolve_hints(obj: Any, sig: inspect.Signature | None = None) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except Exception:
        pass
    # resolve one by one: one unresolvable annotation must not lose the others
    out: dict[str, Any] = {}
    globalns = getattr(inspect.unwrap(obj), "__globals__", {}) if callable(obj) else {}
    raw = {k: p.annotation for k, p in sig.parameters.items()} if sig else getattr(obj, "__annotations__", {})
    for key, ann in raw.items():
        if isinstance(ann, str):
            try:
                ann = eval(ann, dict(globalns))  # noqa: S307 - the user's own annotation
            except Exception:
                ann = Any
        out[key] = Any if ann is inspect.Parameter.empty else ann
    return out


def _literal_schema(values: list[Any]) -> dict:
    kinds = {_json_type(v) for v in values}
    return {"type": kinds.pop(), "enum": values} if len(kinds) == 1 else {"enum": values}


def _schema_for(tp: Any, _depth: int = 0) -> dict:
    """A JSON schema for one annotation; {} (no constraint) for what it cannot express."""
    if _depth > 8:
        return {}
    try:
        return _schema_for_inner(tp, _depth)
    except Exception:
        return {}


def _schema_for_inner(tp: Any, depth: int) -> dict:
    sub = functools.partial(_schema_for, _depth=depth + 1)
    if tp in (Any, object, inspect.Parameter.empty) or isinstance(tp, (str, typing.TypeVar)):
        return {}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", _NoneType: "null", None: "null"}
    if origin is None and isinstance(tp, collections.abc.Hashable) and tp in simple:
        return {"type": simple[tp]}
    if origin is typing.Annotated:
        schema = dict(sub(args[0]))
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if origin is typing.Literal:
        return _literal_schema([_jsonable(a) for a in args])
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [sub(a) for a in args]}
    if tp in (list, set, frozenset, tuple) or origin in (
        list, set, frozenset, collections.abc.Sequence, collections.abc.Iterable, collections.abc.Set,
    ):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = sub(args[0])
        if tp in (set, frozenset) or origin in (set, frozenset, collections.abc.Set):
            schema["uniqueItems"] = True
        return schema
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": sub(args[0])}
        n = len(args)
        return {"type": "array", "prefixItems": [sub(a) for a in args], "minItems": n, "maxItems": n}
    if tp is dict or origin in (dict, collections.abc.Mapping):
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"] = sub(args[1])
        return schema
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _literal_schema([m.value for m in tp])
    if _is_pydantic_model(tp):
        return _clean_pydantic_schema(tp.model_json_schema())
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _resolve_hints(tp)
        _, docs = parse_docstring(tp.__doc__ or "")
        props, required = {}, []
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            prop = dict(sub(hints.get(f.name, Any)))
            if f.name in docs:
                prop.setdefault("description", docs[f.name])
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
            elif (default := _json_default(f.default)) is not _NO_DEFAULT:
                prop["default"] = default
            props[f.name] = prop
        return {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    if typing.is_typeddict(tp):
        hints = _resolve_hints(tp)
        req = getattr(tp, "__required_keys__", set(hints))
        props = {k: sub(v) for k, v in hints.items()}
        return {"type": "object", "properties": props, "required": [k for k in hints if k in req],
                "additionalProperties": False}
    return {}


def _clean_pydantic_schema(schema: dict) -> dict:
    """Inline ``$ref``s into ``$defs`` and drop the ``title`` noise pydantic adds."""
    defs = schema.get("$defs", {})

    def walk(node: Any, depth: int) -> Any:
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = defs.get(node["$ref"].rsplit("/", 1)[-1])
            if target is None or depth > 8:
                return {}
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**walk(target, depth + 1), **walk(rest, depth)}
        out = {}
        for key, val in node.items():
            if key in ("title", "$defs"):
                continue
            if key == "properties":
                out[key] = {k: walk(v, depth + 1) for k, v in val.items()}
            elif key in ("anyOf", "allOf", "oneOf", "prefixItems"):
                out[key] = [walk(v, depth + 1) for v in val]
            elif key in ("items", "additionalProperties", "not"):
                out[key] = walk(val, depth + 1)
            else:
                out[key] = val
        return out

    return walk(schema, 0)


# --- argument conversion -----------------------------------------------------------


def _coerce(value: Any, tp: Any) -> Any:
    """Turn JSON values into the annotated Python type (dataclasses, models, enums, tuples)."""
    if value is None or tp is None or tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _coerce(value, args[0])
    if origin in (typing.Union, types.UnionType):
        for arm in args:
            if arm is not _NoneType and not _validate(value, _schema_for(arm), ""):
                return _coerce(value, arm)
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return value if isinstance(value, tp) else tp(value)
    if _is_pydantic_model(tp):
        return tp.model_validate(value) if isinstance(value, dict) else value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = _resolve_hints(tp)
        return tp(**{k: _coerce(v, hints.get(k)) for k, v in value.items()})
    if isinstance(value, list):
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return tuple(_coerce(v, a) for v, a in zip(value, args))
        items = [_coerce(v, args[0]) for v in value] if args else list(value)
        if tp is tuple or origin is tuple:
            return tuple(items)
        if tp in (set, frozenset) or origin in (set, frozenset):
            return (origin or tp)(items)
        return items
    if isinstance(value, dict) and origin is dict and len(args) == 2:
        return {k: _coerce(v, args[1]) for k, v in value.items()}
    return value


# --- validation -------------------------------------------------------------------------

_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, (list, tuple)),
    "object": lambda v: isinstance(v, dict),
}


def _json_type(v: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](v):
            return name
    return type(v).__name__


def _same(a: Any, b: Any) -> bool:
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _short(v: Any) -> str:
    text = json.dumps(v, default=str, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _validate(value: Any, schema: Any, path: str) -> list[str]:
    if not isinstance(schema, dict) or not schema:
        return []
    where = f"{path!r}: " if path else ""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = [_validate(value, s, path) for s in schema[key]]
            if not any(not b for b in branches):
                kinds = sorted({s.get("type", "value") for s in schema[key] if isinstance(s, dict)} - {"value"})
                if len(branches) == 1:
                    return branches[0]
                expected = " or ".join(kinds) if kinds else "one of the allowed shapes"
                return [f"{where}expected {expected}, got {_json_type(value)} {_short(value)}"]
    problems: list[str] = []
    for sub in schema.get("allOf", []):
        problems += _validate(value, sub, path)
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        allowed = ", ".join(_short(e) for e in schema["enum"])
        return problems + [f"{where}must be one of {allowed}; got {_short(value)}"]
    types_ = schema.get("type")
    if types_ is not None:
        types_ = [types_] if isinstance(types_, str) else list(types_)
        if not any(_TYPE_CHECKS.get(t, lambda v: True)(value) for t in types_):
            return problems + [f"{where}expected {' or '.join(types_)}, got {_json_type(value)} {_short(value)}"]
    if isinstance(value, dict):
        problems += _validate_object(value, schema, path)
    elif isinstance(value, (list, tuple)):
        prefix = schema.get("prefixItems") or []
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items")
            problems += _validate(item, sub, f"{path}[{i}]")
        if len(value) < schema.get("minItems", 0):
            problems.append(f"{where}needs at least {schema['minItems']} items, got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where}allows at most {schema['maxItems']} items, got {len(value)}")
    return problems


def _validate_object(value: dict, schema: dict, path: str) -> list[str]:
    problems: list[str] = []
    props = schema.get("properties") or {}
    noun = "property" if path else "argument"
    owner = f"{path!r}: " if path else ""
    for key in schema.get("required", []):
        if key not in value:
            problems.append(f"{owner}missing required {noun} {key!r}")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        child = f"{path}.{key}" if path else str(key)
        if key in props:
            problems += _validate(item, props[key], child)
        elif extra is False:
            allowed = ", ".join(repr(p) for p in props) or "none"
            problems.append(f"{owner}unexpected {noun} {key!r} (allowed: {allowed})")
        elif isinstance(extra, dict):
            problems += _validate(item, extra, child)
    return problems
