"""JSON schemas from Python type hints, and checking the model's arguments against them.

``function_schema(fn)`` builds a tool's input schema from its signature and
docstring; ``schema_for(annotation)`` one annotation's schema; ``coerce``
turns validated JSON arguments into the annotated Python values (dataclasses,
pydantic models, enums, tuples, datetimes, UUIDs, paths); ``validate_value`` lists
what does not fit (types, enums, formats, ``Annotated`` limits).

``datetime``, ``date``, ``time``, ``UUID`` and ``Path`` are strings with a ``format`` (as pydantic
writes them); ``Annotated`` limits (``annotated_types.Ge`` / ``Le`` / ``Gt`` / ``Lt`` / ``MinLen`` /
``MaxLen`` / ``MultipleOf``, pydantic's ``Field(ge=..., max_length=..., pattern=...)``) become
``minimum`` / ``maxLength`` / ... . Any other type pydantic knows (``Decimal``, ``timedelta``,
``IPv4Address``, ...) gets the schema of pydantic's ``TypeAdapter`` and is converted by it, when
pydantic is installed; without it such a parameter takes any JSON value, passed as it is.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime
import enum
import functools
import inspect
import json
import pathlib
import types
import typing
import uuid
from typing import Any
from collections.abc import Callable

from ..core.json_schema import json_type, validate_value
from .docstrings import parse_docstring

__all__ = ["coerce", "function_schema", "is_pydantic_model", "json_type", "jsonable", "schema_for",
           "validate_value"]

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
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, (uuid.UUID, pathlib.PurePath)):
        return str(value)
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
    schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
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


_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", _NoneType: "null", None: "null"}
_ARRAYS = (list, set, frozenset, collections.abc.Sequence, collections.abc.Iterable, collections.abc.Set)
_SETS = (set, frozenset, collections.abc.Set)


def _schema_for_inner(tp: Any, depth: int) -> dict:
    """One dispatch over the kinds of annotation: typing forms here, containers and classes below."""
    sub = functools.partial(schema_for, _depth=depth + 1)
    if tp in (Any, object, inspect.Parameter.empty) or isinstance(tp, (str, typing.TypeVar)):
        return {}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is None and isinstance(tp, collections.abc.Hashable) and tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}
    if (fmt := string_format(tp)) is not None:
        return {"type": "string", "format": fmt}
    if origin is typing.Annotated:
        return annotated_schema(sub(args[0]), args[1:])
    if origin is typing.Literal:
        return _literal_schema([jsonable(a) for a in args])
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [sub(a) for a in args]}
    container = _container_schema(tp, origin, args, sub)
    return container if container is not None else _class_schema(tp, sub)


def _container_schema(tp: Any, origin: Any, args: tuple, sub: Callable[[Any], dict]) -> dict | None:
    """Lists, sets, tuples and dicts; None for anything else."""
    if tp in (list, set, frozenset, tuple) or origin in _ARRAYS:
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = sub(args[0])
        if tp in (set, frozenset) or origin in _SETS:
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
    return None


def _class_schema(tp: Any, sub: Callable[[Any], dict]) -> dict:
    """Enums, pydantic models, dataclasses, TypedDicts, then whatever pydantic's TypeAdapter knows."""
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _literal_schema([m.value for m in tp])
    if is_pydantic_model(tp):
        return _clean_pydantic_schema(tp.model_json_schema())
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_schema(tp, sub)
    if typing.is_typeddict(tp):
        hints = resolve_hints(tp)
        req = getattr(tp, "__required_keys__", set(hints))
        props = {k: sub(v) for k, v in hints.items()}
        return {"type": "object", "properties": props, "required": [k for k in hints if k in req],
                "additionalProperties": False}
    return _type_adapter_schema(tp)


def _dataclass_schema(tp: type, sub: Callable[[Any], dict]) -> dict:
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


# --- formats, limits, and what pydantic knows -------------------------------------------------

# string formats nbagent writes and checks itself, in the order to test them (datetime is a date)
_FORMATS: list[tuple[type, str]] = [(datetime.datetime, "date-time"), (datetime.date, "date"),
                                    (datetime.time, "time"), (uuid.UUID, "uuid"), (pathlib.PurePath, "path")]
# annotated_types / pydantic constraint attributes -> JSON schema keywords (numbers, then lengths)
_LIMITS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum",
           "multiple_of": "multipleOf", "min_length": "minLength", "max_length": "maxLength", "pattern": "pattern"}


def string_format(tp: Any) -> str | None:
    """The JSON schema ``format`` of a string-shaped type (``date-time``, ``uuid``, ...), or None."""
    if not isinstance(tp, type):
        return None
    return next((fmt for cls, fmt in _FORMATS if issubclass(tp, cls)), None)


def annotated_schema(base: dict, metadata: tuple) -> dict:
    """``Annotated[T, ...]``'s schema: T's, with string notes as its description and limits as keywords."""
    schema = dict(base)
    notes = [a for a in metadata if isinstance(a, str)]
    for item in _flat_metadata(metadata):
        for attr, keyword in _LIMITS.items():
            value = getattr(item, attr, None)
            if value is not None and not callable(value):
                schema[_array_keyword(keyword, schema)] = value
        description = getattr(item, "description", None)
        if isinstance(description, str) and description:
            notes.append(description)
    if notes:
        schema["description"] = " ".join(notes)
    return schema


def _flat_metadata(metadata: tuple) -> list[Any]:
    """Metadata objects with pydantic's ``FieldInfo`` / ``Interval`` opened into their parts."""
    out: list[Any] = []
    for item in metadata:
        if isinstance(item, str):
            continue
        out.append(item)
        inner = getattr(item, "metadata", None)
        if isinstance(inner, list):
            out += _flat_metadata(tuple(inner))
    return out


def _array_keyword(keyword: str, schema: dict) -> str:
    if schema.get("type") == "array" and keyword in ("minLength", "maxLength"):
        return keyword.replace("Length", "Items")
    return keyword


@functools.lru_cache(maxsize=256)
def _type_adapter(tp: Any) -> Any:
    """pydantic's TypeAdapter for ``tp``, or None (pydantic absent, or a type it does not know)."""
    try:
        from pydantic import TypeAdapter
    except ImportError:
        return None
    try:
        adapter = TypeAdapter(tp)
        adapter.json_schema()
    except Exception:
        return None
    return adapter


def _type_adapter_schema(tp: Any) -> dict:
    if not isinstance(tp, collections.abc.Hashable) or typing.get_origin(tp) is not None:
        return {}
    adapter = _type_adapter(tp)
    return {} if adapter is None else _clean_pydantic_schema(adapter.json_schema())


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
        out: dict[str, Any] = {}
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
    if (fmt := string_format(tp)) is not None:
        if not isinstance(value, str):
            return value
        return tp(value) if fmt in ("uuid", "path") else tp.fromisoformat(value)  # the annotated class itself
    if is_pydantic_model(tp):
        return tp.model_validate(value) if isinstance(value, dict) else value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = resolve_hints(tp)
        return tp(**{k: coerce(v, hints.get(k)) for k, v in value.items()})
    if isinstance(value, list):
        return _coerce_list(value, tp, origin, args)
    if isinstance(value, dict) and origin is dict and len(args) == 2:
        return {k: coerce(v, args[1]) for k, v in value.items()}
    return _coerce_by_adapter(value, tp)


def _coerce_list(value: list, tp: Any, origin: Any, args: tuple) -> Any:
    """A JSON array as the annotated sequence: a fixed tuple, a ``tuple[X, ...]``, a set or a list."""
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        return tuple(coerce(v, a) for v, a in zip(value, args))
    items = [coerce(v, args[0]) for v in value] if args else list(value)
    if tp is tuple or origin is tuple:
        return tuple(items)
    if tp in (set, frozenset) or origin in (set, frozenset):
        return (origin or tp)(items)
    return items


def _coerce_by_adapter(value: Any, tp: Any) -> Any:
    """A type nbagent does not convert itself, converted by pydantic when it knows it."""
    if not isinstance(tp, type) or typing.get_origin(tp) is not None or isinstance(value, tp):
        return value
    if tp in (float, complex) and not isinstance(value, str):  # JSON's numbers are already right
        return value
    adapter = _type_adapter(tp)
    return value if adapter is None else adapter.validate_python(value)
