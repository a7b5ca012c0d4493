"""Checking a JSON value against a JSON schema: types, enums, formats, limits, objects and arrays.

``validate_value(value, schema, path)`` lists what does not fit (``[]`` when it fits). It checks the
subset of JSON schema tool schemas use (``type``, ``enum``, ``anyOf`` / ``oneOf`` / ``allOf``,
``properties`` / ``required`` / ``additionalProperties``, ``items`` / ``prefixItems``, string
``format``s nbagent writes, number and length limits, ``pattern``). Used by the loop before running a
tool and by providers that read tool calls out of a model's text.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import re
import uuid
from collections.abc import Callable
from typing import Any

__all__ = ["json_type", "validate_value"]

_PARSERS: dict[str, Callable[[str], Any]] = {
    "date-time": datetime.datetime.fromisoformat, "date": datetime.date.fromisoformat,
    "time": datetime.time.fromisoformat, "uuid": uuid.UUID, "path": pathlib.Path,
}


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
    problems += _validate_format(value, schema, where) + _validate_limits(value, schema, where)
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


def _validate_format(value: Any, schema: dict, where: str) -> list[str]:
    parse = _PARSERS.get(schema.get("format", ""))
    if parse is None or not isinstance(value, str):
        return []
    try:
        parse(value)
    except ValueError:
        return [f"{where}expected a {schema['format']} string, got {_short(value)}"]
    return []


_NUMBER_LIMITS = {"minimum": (lambda v, n: v >= n, ">="), "exclusiveMinimum": (lambda v, n: v > n, ">"),
                  "maximum": (lambda v, n: v <= n, "<="), "exclusiveMaximum": (lambda v, n: v < n, "<")}


def _validate_limits(value: Any, schema: dict, where: str) -> list[str]:
    problems = []
    if _TYPE_CHECKS["number"](value):
        for keyword, (ok, sign) in _NUMBER_LIMITS.items():
            if keyword in schema and isinstance(schema[keyword], (int, float)) and not ok(value, schema[keyword]):
                problems.append(f"{where}must be {sign} {schema[keyword]}, got {_short(value)}")
        step = schema.get("multipleOf")
        if isinstance(step, (int, float)) and step > 0 and abs(value / step - round(value / step)) > 1e-9:
            problems.append(f"{where}must be a multiple of {step}, got {_short(value)}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            problems.append(f"{where}needs at least {schema['minLength']} characters, got {len(value)}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}allows at most {schema['maxLength']} characters, got {len(value)}")
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and _search(pattern, value) is False:
            problems.append(f"{where}must match the pattern {pattern!r}, got {_short(value)}")
    return problems


PATTERN_SECONDS = 0.5  # a schema pattern's match, at most (``regex`` module); past it, left unchecked
PLAIN_RE_CHARS = 16  # without ``regex``, values past this length are matched by ``re`` only for simple patterns
_RISKY = re.compile(r"\)\s*[*+{]|\\\d|\(\?[=!<]")  # a repeated group ((a+)+, (a|aa)*), backreferences, lookarounds


def _search(pattern: str, value: str) -> bool | None:
    """Whether ``pattern`` (JSON schema: unanchored) finds a match; None when it cannot be told in
    time or Python cannot compile it (the tool's server still checks).

    A schema may come from an MCP server: ``^(a+)+$`` on 28 characters takes ``re`` 20 s, doubling
    with each one. The ``regex`` module (the ``mcp`` extra) matches with a time limit; without it a
    pattern with a repeated group, backreferences or lookarounds is only matched on short values."""
    try:
        import regex
    except ImportError:
        regex = None
    if regex is not None:
        try:
            return regex.search(pattern, value, timeout=PATTERN_SECONDS, concurrent=True) is not None
        except TimeoutError:
            return None
        except regex.error:
            pass  # a pattern only ``re`` reads
    if len(value) > PLAIN_RE_CHARS and _RISKY.search(pattern):
        return None
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return None


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
