"""``nbagent.list_sessions``: one row per saved conversation, newest first.

Reads only each file's head (settings and turn ledger, never the steps), like ``load_sessions``,
and only of files new or changed since the folder's index last saw them (``session_index.py``).
A damaged or foreign file in the folder is a row too, with the reason in ``error``: listing never
fails on one bad file.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Mapping

from ..core.errors import NbagentError
from ..core.session_file import SessionHead, gc_paused, read_session_head
from .session_index import FileStat, SessionIndex, folder_stats, row_from
from .estimate import spend
from .frames import require_pandas
from .sessions import expand_paths

TITLE_CHARS = 80
COLUMNS = ("path", "title", "created", "updated", "model", "models", "turns", "tokens", "cost_usd", "user",
           "budget_usd", "out_of_budget", "conversation_id", "error")


@dataclass
class SessionRow:
    """One row of ``list_sessions``."""

    path: str
    title: str = ""
    created: float | None = None
    updated: float | None = None
    model: str = ""  # the model the next turn would use
    models: str = ""  # every model that answered, in order, comma-separated
    turns: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    user: str = ""
    budget_usd: float | None = None
    out_of_budget: bool = False  # see ``out_of_budget``
    conversation_id: str = ""
    error: str = ""  # why the file could not be read ("" when it could)


def title_of(prompt: str, n: int = TITLE_CHARS) -> str:
    """The first prompt on one line, cut to ``n`` characters."""
    text = " ".join(prompt.split())
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def out_of_budget(turns: list, cost: float, last_cost: float, budget: float | None) -> bool:
    """Whether what is left of ``budget`` is less than the last turn cost (the next turn like it
    would be refused), or the loop stopped a turn because of the budget."""
    if budget is None:
        return False
    stopped = any(t.error and "budget" in t.error.lower() for t in turns)
    return stopped or budget - cost < last_cost


def session_row(head: SessionHead, cost: float, last_cost: float) -> SessionRow:
    """A session file's row from its head, its turns' cost and its last turn's cost (dollars)."""
    turns = head.turns
    models = list(dict.fromkeys(f"{t.provider}:{t.model}" if t.provider else t.model for t in turns if t.model))
    budget = head.settings.budget_usd if head.settings is not None else None
    return SessionRow(
        path=str(head.path), title=title_of(turns[0].prompt) if turns else "",
        created=turns[0].started_at if turns else head.saved_at,
        updated=head.saved_at or (turns[-1].finished_at if turns else None),
        model=head.model or (models[-1] if models else ""), models=", ".join(models), turns=len(turns),
        tokens=sum(t.usage.total_token_count for t in turns), cost_usd=cost, user=head.user,
        budget_usd=budget, out_of_budget=out_of_budget(turns, cost, last_cost, budget),
        conversation_id=head.conversation_id)


def turn_costs(heads: list[SessionHead], pricing: Mapping | None) -> list[list[float]]:
    """Each session's turn costs (unknown prices count 0), priced in one pass where the same prices
    apply; a session with its own price overrides (``Agent(pricing=...)``) with those."""
    own = [pricing is None and h.settings is not None and bool(h.settings.pricing) for h in heads]
    shared = [t for h, o in zip(heads, own) if not o for t in h.turns]
    flat = turn_prices(shared, pricing) if shared else []
    out, i = [], 0
    for head, has_own in zip(heads, own):
        if has_own:
            pricing = head.settings.pricing if head.settings is not None else None
            out.append([spend([t], pricing).usd for t in head.turns])
        else:
            out.append(flat[i: i + len(head.turns)])
            i += len(head.turns)
    return out


def turn_prices(turns: list, pricing: Mapping | None) -> list[float]:
    """The cost of each turn in dollars, unknown prices as 0 (the usage frame's one formula)."""
    import numpy as np

    from .columns import USAGE
    from .tables import Table

    (cost,) = [c for c in USAGE if c.name == "cost_usd"]
    return np.nan_to_num(np.asarray(cost.extract(Table(turns, pricing)), dtype=np.float64)).tolist()


def _rows(paths: list[Path], pricing: Mapping | None) -> list[SessionRow]:
    """The row of each path: from the folder's index when the file is unchanged (``pricing=None``),
    else from its head; the index then learns the new rows (``session_index.py``)."""
    from .pricing import PRICES_VERSION

    found: list[SessionRow | None] = [None] * len(paths)
    where = [os.path.split(os.fspath(p)) for p in paths]  # (folder, name): strings, no Path parsing
    indexes: dict[str, SessionIndex] = {}
    stats: dict[str, dict[str, FileStat]] = {}
    if pricing is None:
        for i, (folder, name) in enumerate(where):
            if folder not in indexes:
                stats[folder] = folder_stats(Path(folder or "."))
                indexes[folder] = SessionIndex(Path(folder or "."), PRICES_VERSION)
            stat = stats[folder].get(name)
            if stat is not None:
                found[i] = indexes[folder].row(name, stat, functools.partial(_indexed_row, os.fspath(paths[i])))
    made = [i for i, row in enumerate(found) if row is None]
    logs = _agent_heads([paths[i] for i in made])
    heads: list[SessionHead] = []
    head_at: list[int] = []
    for i in made:
        try:
            heads.append(logs.get(paths[i]) or read_session_head(paths[i]))
            head_at.append(i)
        except NbagentError as exc:
            found[i] = SessionRow(path=os.fspath(paths[i]), error=str(exc))
    for head, costs, i in zip(heads, turn_costs(heads, pricing), head_at):
        found[i] = session_row(head, float(sum(costs)), costs[-1] if costs else 0.0)
    for i in made:
        folder, name = where[i]
        stat, row = stats.get(folder, {}).get(name), found[i]
        if stat is not None and row is not None:
            indexes[folder].put(name, stat, row)
    for folder, index in indexes.items():
        index.keep_only(set(stats[folder]))
        index.save()
    return [r for r in found if r is not None]


def _agent_heads(paths: list[Path]) -> dict[Path, SessionHead]:
    """The heads of the other agents' logs among ``paths`` (``agent_logs``; read together, so a
    message two logs hold counts once); a file none can read is left to the session reader."""
    from .agent_logs.ledgers import agent_ledgers, as_head

    logs = [p for p in paths if Path(p).suffix != ".json"]
    try:
        return {p: as_head(ledger) for p, ledger in agent_ledgers(logs).items()}
    except NbagentError:  # one unreadable log: each read alone, the bad one named in its row
        out = {}
        for p in logs:
            try:
                out.update({q: as_head(ledger) for q, ledger in agent_ledgers([p]).items()})
            except NbagentError:
                continue
        return out


def listed_rows(folder_or_glob: Any, pricing: Mapping | None = None) -> list[SessionRow]:
    """The rows of :func:`list_sessions` as :class:`SessionRow` values, newest first, without
    pandas frames (what the session browser sends to the page)."""
    paths = expand_paths(folder_or_glob, logs=True)
    with gc_paused():
        rows = _rows(paths, pricing)
    return sorted(rows, key=_newest_first)


def _newest_first(row: SessionRow) -> tuple[bool, float]:
    known = row.updated is not None and not math.isnan(row.updated)
    return (not known, -row.updated if known and row.updated is not None else 0.0)


def _indexed_row(path: str, values: list) -> SessionRow:
    return row_from(SessionRow, values, path)


def list_sessions(folder_or_glob: Any, pricing: Mapping | None = None):
    """A DataFrame of saved conversations, newest first (see the module docstring).

    ``folder_or_glob`` is a folder (its ``*.json``, and ``*.jsonl``: Claude Code and Codex session
    logs, recognised by content), a glob pattern, a path or a list of those.
    Columns: path, title (the first prompt, trimmed), created, updated (UTC timestamps), model,
    models, turns, tokens, cost_usd, user, budget_usd, out_of_budget (what is left of the budget
    would not pay for another turn like the last, or a turn was stopped by it), conversation_id,
    error (why a file could not be read; "" when it could).
    """
    pd = require_pandas()
    paths = expand_paths(folder_or_glob, logs=True)
    with gc_paused():
        rows = _rows(paths, pricing)
    from .literal_frame import literal_frame

    df = literal_frame(pd.DataFrame({c: [getattr(r, c) for r in rows] for c in COLUMNS}, columns=list(COLUMNS)))
    from .column_values import utc_times

    for name in ("created", "updated"):  # datetime64[ns, UTC] like every frame, whatever the values
        seconds = [getattr(r, name) for r in rows]
        df[name] = utc_times([math.nan if v is None else v for v in seconds])
    df = df.astype({"turns": "int64", "tokens": "int64", "cost_usd": "float64", "out_of_budget": "bool",
                    "budget_usd": "float64"})
    return df.sort_values("updated", ascending=False, na_position="last", kind="stable").reset_index(drop=True)
