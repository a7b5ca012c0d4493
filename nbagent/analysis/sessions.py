"""Frames in saved sessions, and usage across many saved sessions (``load_sessions``)."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

from ..core.ledger import TurnRecord
from ..core.session_file import gc_paused, read_session_head
from ..core.steps import Step
from .columns import HISTORY, HISTORY_INDEX, TOOL_CALL_INDEX, TOOL_CALLS, USAGE, USAGE_INDEX, Column, Table
from .frames import require_pandas, tool_call_rows, usage_frame

EXPORT_VERSION = 3  # 3: prices_version (was prices_date), approvals


def json_rows(table: Table, index: Column, columns: Sequence[Column]) -> list[dict]:
    """The rows of a frame as JSON-ready dicts (the index as the first key), from the same column specs."""
    names = [index.name] + [c.name for c in columns]
    values = [c.to_json(c.extract(table)) for c in (index, *columns)]
    return [dict(zip(names, row)) for row in zip(*values)]


def export_frames(steps: Sequence[Step], records: Sequence[TurnRecord], pricing: Mapping | None = None) -> dict:
    """The frames as JSON rows (``Conversation.save(path, frames=True)`` embeds them).

    ``{"version", "prices_version", "usage": [...], "tool_calls": [...], "approvals": [...], "history": [...]}``:
    timestamps as ISO 8601 UTC strings, missing values as ``null``. ``history``
    leaves out ``content`` and ``thinking``: the saved ``steps`` hold them in full.
    Needs numpy (the column extractors are vectorized), not pandas.
    """
    from .approvals import approvals_json_rows
    from .pricing import PRICES_VERSION

    history = [c for c in HISTORY if c.name not in ("content", "thinking")]
    return {
        "version": EXPORT_VERSION,
        "prices_version": PRICES_VERSION,
        "usage": json_rows(Table(records, pricing), USAGE_INDEX, USAGE),
        "tool_calls": json_rows(Table(tool_call_rows(steps)), TOOL_CALL_INDEX, TOOL_CALLS),
        "approvals": approvals_json_rows(steps),
        "history": json_rows(Table(steps), HISTORY_INDEX, history),
    }


_GLOB_CHARS = frozenset("*?[")


def expand_paths(paths_or_glob: Any) -> list[Path]:
    """Session files named by a path, a glob pattern, a directory (its ``*.json``) or a list of those
    (in order, each once). A name that exists is taken literally before any glob (``run[1].json``)."""
    items = [paths_or_glob] if isinstance(paths_or_glob, (str, os.PathLike)) else list(paths_or_glob)
    out: list[tuple[Path, str | None]] = []  # each path and its real path when already known
    for item in items:
        text = os.path.expanduser(os.fspath(item))
        if os.path.isfile(text) or os.path.islink(text):  # a literal name first, even "run[1].json"
            out.append((Path(text), None))
        elif _GLOB_CHARS.intersection(text) and not os.path.isdir(text):
            out.extend((Path(p), None) for p in sorted(glob.glob(text, recursive=True)) if os.path.isfile(p))
        elif os.path.isdir(text):
            out.extend(_folder_files(text))
        else:
            out.append((Path(text), None))
    seen: set[str] = set()
    unique = []
    for p, real in out:
        key = real or os.path.realpath(p)  # never raises: a link loop is refused when the file is read
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def _folder_files(folder: str) -> list[tuple[Path, str | None]]:
    """A folder's ``*.json`` by name, with the real path of each that is not a link (one scan)."""
    real = os.path.realpath(folder)
    with os.scandir(folder) as it:
        found = sorted((e.name, e.is_symlink()) for e in it if e.name.endswith(".json"))
    return [(Path(folder, name), None if link else os.path.join(real, name)) for name, link in found]


def load_sessions(paths_or_glob: Any, pricing: Mapping | None = None):
    """One usage DataFrame across saved sessions.

    ``paths_or_glob`` is a path, a glob pattern (``"sessions/*.json"``,
    ``"**/*.json"``), a directory (its ``*.json``) or a list of those. Rows
    are the turns of every session's ``turns`` ledger, with ``session_id``
    (the conversation id), ``path`` and ``turn`` first, and ``user`` (``Agent(user=...)``, ""
    when not recorded) last. A pattern that
    matches nothing gives an empty frame; a missing or corrupt file raises
    ``NbagentError(kind="io")`` naming it.

    Only each file's ledger is parsed (``read_turns``: files saved by this
    version keep it before the steps), so a thousand sessions load in about a
    second; damage in a file's steps shows only when ``Conversation.load`` reads it.
    """
    pd = require_pandas()
    records: list[TurnRecord] = []
    session_ids: list[str] = []
    file_paths: list[str] = []
    users: list[str] = []
    with gc_paused():  # tens of thousands of records: the collector would rescan them over and over
        for path in expand_paths(paths_or_glob):
            head = read_session_head(path)
            recs = head.turns
            records.extend(recs)
            session_ids.extend([head.conversation_id] * len(recs))
            file_paths.extend([str(path)] * len(recs))
            users.extend([head.user] * len(recs))
        df = usage_frame(records, pricing=pricing)
    turn = df.index.to_numpy()
    df = df.reset_index(drop=True)
    df.insert(0, "turn", turn)
    df.insert(0, "path", pd.array(file_paths, dtype="string"))
    df.insert(0, "session_id", pd.Categorical(session_ids, categories=list(dict.fromkeys(session_ids))))
    df["user"] = pd.array(users, dtype="string")
    return df
