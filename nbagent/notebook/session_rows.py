"""A folder's saved sessions as JSON rows: what the session browser lists and the chat's History shows."""

from __future__ import annotations

import math
import os
from typing import Any

from ..core.session_file import gc_paused
from .turn_codec import jsonable

ROW_FIELDS = ("path", "title", "created", "updated", "models", "turns", "tokens", "cost_usd", "user", "error")
__all__ = ["ROW_FIELDS", "session_rows"]


def session_rows(folder: str | os.PathLike) -> list[dict]:
    """``list_sessions(folder)`` as JSON rows, newest first (timestamps as ISO strings, unknown
    numbers as None), made from its rows without a DataFrame (10,000 sessions list in well under a
    second from the folder's index)."""
    from ..analysis.column_values import iso  # the session list: when it is asked for
    from ..analysis.session_list import listed_rows

    rows = []
    with gc_paused():  # 10,000 new dicts: the collector would rescan every live object several times
        for r in listed_rows(folder):
            row: dict[str, Any] = {name: getattr(r, name) for name in ROW_FIELDS}
            row["created"] = None if r.created is None else iso(r.created)
            row["updated"] = None if r.updated is None else iso(r.updated)
            if isinstance(r.cost_usd, float) and math.isnan(r.cost_usd):
                row["cost_usd"] = None
            rows.append(row)
        return jsonable(rows)
