"""JSON schemas from Python type hints, and checking the model's arguments against them.

``function_schema(fn)`` builds a tool's input schema from its signature and
docstring; ``schema_for(annotation)`` one annotation's schema; ``coerce``
turns validated JSON arguments into the annotated Python values (dataclasses,
pydantic models, enums, tuples); ``validate_value`` lists what does not fit.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import inspect
import json
import types
import typing
from typing import Any, Callable

from .docstrings import parse_docstring

_NoneType = type(None)
_NO_DEFAULT = object()


def is_pydantic_model(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "model_json_schema") and any(
        c.__module__.split(".")[0] == "pydantic" for c in tp.__mro__[1:]
    )


def jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if is_pydantic_model(type(value)):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, (str, int, float, bool)) else k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
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
    hints = resolve_hints(fn, sig)
    props: dict[str, Any] = {}
    required: list[str] = []
    extra_ok = False
    for pname, param in sig.parameters.items():
        if param.kind is param.VAR_KEYWORD:
            extra_ok = True
            continue
        if param.kind is param.VAR_POSITIONAL:
            continue
        prop = dict(schema_for(hints.get(pname, Any)))
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
        value = jsonable(value)
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return _NO_DEFAULT


def resolve_hints(obj: Any, sig: inspect.Signature | None = None) -> dict[str, Any]:
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
    kinds = {json_type(v) for v in values}
    return {"type": kinds.pop(), "enum": values} if len(kinds) == 1 else {"enum": values}


def schema_for(tp: Any, _depth: int = 0) -> dict:
    """A JSON schema for one annotation; {} (no constraint) for what it cannot express."""
    if _depth > 8:
        return {}
    try:
        return _schema_for_inner(tp, _depth)
    except Exception:
        return {}


def _schema_for_inner(tp: Any, depth: int) -> dict:
    # long because: one flat dispatch over every kind of annotation (scalars, Annotated, Literal,
    # unions, containers, enums, dataclasses, TypedDicts, pydantic), each case a few lines.
    sub = functools.partial(schema_for, _depth=depth + 1)
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
        return _literal_schema([jsonable(a) for a in args])
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
    if is_pydantic_model(tp):
        return _clean_pydantic_schema(tp.model_json_schema())
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = resolve_hints(tp)
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
        hints = resolve_hints(tp)
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


def coerce(value: Any, tp: Any) -> Any:
    """Turn JSON values into the annotated Python type (dataclasses, models, enums, tuples)."""
    if value is None or tp is None or tp is Any:
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return coerce(value, args[0])
    if origin in (typing.Union, types.UnionType):
        for arm in args:
            if arm is not _NoneType and not validate_value(value, schema_for(arm), ""):
                return coerce(value, arm)
        return value
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return value if isinstance(value, tp) else tp(value)
    if is_pydantic_model(tp):
        return tp.model_validate(value) if isinstance(value, dict) else value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = resolve_hints(tp)
        return tp(**{k: coerce(v, hints.get(k)) for k, v in value.items()})
    if isinstance(value, list):
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return tuple(coerce(v, a) for v, a in zip(value, args))
        items = [coerce(v, args[0]) for v in value] if args else list(value)
        if tp is tuple or origin is tuple:
            return tuple(items)
        if tp in (set, frozenset) or origin in (set, frozenset):
            return (origin or tp)(items)
        return items
    if isinstance(value, dict) and origin is dict and len(args) == 2:
        return {k: coerce(v, args[1]) for k, v in value.items()}
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


def json_type(v: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](v):
            return name
    return type(v).__name__


def _same(a: Any, b: Any) -> bool:
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _short(v: Any) -> str:
    text = json.dumps(v, default=str, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_value(value: Any, schema: Any, path: str) -> list[str]:
    if not isinstance(schema, dict) or not schema:
        return []
    where = f"{path!r}: " if path else ""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = [validate_value(value, s, path) for s in schema[key]]
            if not any(not b for b in branches):
                kinds = sorted({s.get("type", "value") for s in schema[key] if isinstance(s, dict)} - {"value"})
                if len(branches) == 1:
                    return branches[0]
                expected = " or ".join(kinds) if kinds else "one of the allowed shapes"
                return [f"{where}expected {expected}, got {json_type(value)} {_short(value)}"]
    problems: list[str] = []
    for sub in schema.get("allOf", []):
        problems += validate_value(value, sub, path)
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        allowed = ", ".join(_short(e) for e in schema["enum"])
        return problems + [f"{where}must be one of {allowed}; got {_short(value)}"]
    types_ = schema.get("type")
    if types_ is not None:
        types_ = [types_] if isinstance(types_, str) else list(types_)
        if not any(_TYPE_CHECKS.get(t, lambda v: True)(value) for t in types_):
            return problems + [f"{where}expected {' or '.join(types_)}, got {json_type(value)} {_short(value)}"]
    if isinstance(value, dict):
        problems += _validate_object(value, schema, path)
    elif isinstance(value, (list, tuple)):
        prefix = schema.get("prefixItems") or []
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items")
            problems += validate_value(item, sub, f"{path}[{i}]")
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
            problems += validate_value(item, props[key], child)
        elif extra is False:
            allowed = ", ".join(repr(p) for p in props) or "none"
            problems.append(f"{owner}unexpected {noun} {key!r} (allowed: {allowed})")
        elif isinstance(extra, dict):
            problems += validate_value(item, extra, child)
    return problems
