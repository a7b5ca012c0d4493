"""A folder's saved sessions as JSON rows: what the session browser lists and the chat's History shows."""

from __future__ import annotations

import math
import os
from typing import Any

from .widget_wire import jsonable

ROW_FIELDS = ("path", "title", "created", "updated", "models", "turns", "tokens", "cost_usd", "user", "error")
__all__ = ["ROW_FIELDS", "session_rows"]


def session_rows(folder: str | os.PathLike) -> list[dict]:
    """``list_sessions(folder)`` as JSON rows (timestamps as ISO strings, unknown numbers as None)."""
    from ..analysis.session_list import list_sessions  # pandas and the frames: when the list is asked for

    df = list_sessions(folder)
    rows = []
    for rec in df.to_dict("records"):
        row: dict[str, Any] = {}
        for name in ROW_FIELDS:
            value = rec.get(name)
            if hasattr(value, "isoformat"):
                value = None if value != value else value.isoformat()  # NaT != NaT
            elif isinstance(value, float) and math.isnan(value):
                value = None
            row[name] = value
        rows.append(row)
    return jsonable(rows)
