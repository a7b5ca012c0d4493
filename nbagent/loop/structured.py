"""Structured output: turn what the user passes as ``response_format`` into a JSON schema."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..core.errors import ConfigError


def schema_of(response_format: Any) -> dict | None:
    """A JSON schema from a dict, a pydantic model class or a dataclass type."""
    if response_format is None or isinstance(response_format, dict):
        return response_format
    schema_fn = getattr(response_format, "model_json_schema", None)
    if callable(schema_fn):  # pydantic v2 model class
        schema = schema_fn()
        schema.setdefault("title", getattr(response_format, "__name__", "response"))
        return schema
    if dataclasses.is_dataclass(response_format) and isinstance(response_format, type):
        from .tool_schema import schema_for

        schema = dict(schema_for(response_format))
        schema["title"] = response_format.__name__
        return schema
    raise ConfigError(
        "response_format must be a JSON schema dict, a pydantic model class or a dataclass",
    )
