"""Frames in saved sessions, and usage across many saved sessions (``load_sessions``)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping, Sequence

from ..core.ledger import TurnRecord
from ..core.session_file import SessionLedger, gc_paused, ledger_arrays, ledger_columns, read_session_ledger
from ..core.steps import Step
from .columns import HISTORY, HISTORY_INDEX, TOOL_CALL_INDEX, TOOL_CALLS, USAGE, USAGE_INDEX, Column
from .tables import ArrowTurnTable, Table, TurnTable
from .frames import build_frame, require_pandas, tool_call_rows

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


def expand_paths(paths_or_glob: Any, logs: bool = False) -> list[Path]:
    """Session files named by a path, a glob pattern, a directory (its ``*.json``; ``logs``: and its
    ``*.jsonl``, other agents' logs) or a list of those (in order, each once). A name that exists is
    taken literally before any glob (``run[1].json``)."""
    items = [paths_or_glob] if isinstance(paths_or_glob, (str, os.PathLike)) else list(paths_or_glob)
    out: list[tuple[Path, str | None]] = []  # each path and its real path when already known
    for item in items:
        text = os.path.expanduser(os.fspath(item))
        if os.path.isfile(text) or os.path.islink(text):  # a literal name first, even "run[1].json"
            out.append((Path(text), None))
        elif _GLOB_CHARS.intersection(text) and not os.path.isdir(text):
            out.extend((Path(p), None) for p in sorted(glob.glob(text, recursive=True)) if os.path.isfile(p))
        elif os.path.isdir(text):
            out.extend(_folder_files(text, (".json", ".jsonl") if logs else (".json",)))
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


def _folder_files(folder: str, suffixes: tuple[str, ...]) -> list[tuple[Path, str | None]]:
    """A folder's files ending in ``suffixes`` by name, with the real path of each that is not a link (one scan)."""
    real = os.path.realpath(folder)
    with os.scandir(folder) as it:
        found = sorted((e.name, e.is_symlink()) for e in it if e.name.endswith(suffixes))
    return [(Path(folder, name), None if link else os.path.join(real, name)) for name, link in found]


@dataclass
class Ledgers:
    """The turns of many saved sessions as one usage table (``table``, in file order), and for each
    session its conversation id, path, user, number of turns and source (``"nbagent"``, or the
    agent whose log it is: ``agent_logs``)."""

    table: TurnTable
    ids: list[str]
    paths: list[str]
    users: list[str]
    lengths: list[int]
    sources: list[str] = field(default_factory=list)
    projects: list[str] = field(default_factory=list)  # an agent log's project or working folder ("": none)
    subagents: list[Any] = field(default_factory=list)  # an agent log's turns: each a subagent's (None: none)

    def per_row(self, values: Sequence[Any]) -> Any:
        """A value per session repeated over its rows (a numpy object array)."""
        import numpy as np

        column = np.empty(len(values), dtype=object)
        column[:] = values
        return np.repeat(column, self.lengths)


def read_ledgers(paths_or_glob: Any, pricing: Mapping | None = None) -> Ledgers:
    """The ledgers of the sessions ``paths_or_glob`` names (see :func:`load_sessions`), decoded
    into columns without a record per turn (``core/turn_columns.py``)."""
    return ledgers_of(expand_paths(paths_or_glob, logs=True), pricing)


def ledgers_of(paths: Sequence[Path], pricing: Mapping | None = None, arrow: bool = False) -> Ledgers:
    """:func:`read_ledgers` of session files already found (``expand_paths``); ``arrow``: the table
    over Arrow arrays (:class:`ArrowTurnTable`, for ``to_parquet``) when the ledgers allow."""
    with gc_paused():  # tens of thousands of dicts: the collector would rescan them over and over
        heads = session_ledgers(paths)
        arrays = ledger_arrays(heads) if arrow else None
        table = TurnTable(ledger_columns(heads), pricing) if arrays is None else ArrowTurnTable(arrays, pricing)
        out = Ledgers(table, [h.conversation_id for h in heads],
                      [str(h.path) for h in heads], [h.user for h in heads], [len(h.turns) for h in heads],
                      [getattr(h, "source", "nbagent") for h in heads], [getattr(h, "project", "") for h in heads],
                      [getattr(h, "subagent", None) for h in heads])
        del heads  # the parsed ledgers, freed before the collector resumes (it would scan them once more)
    return out


def session_ledgers(paths: Sequence[Path]) -> list[SessionLedger]:
    """The ledger of each file: an agent's log when a reader recognises it (``agent_logs``, an
    ``AgentLedger`` with its ``source`` and ``project``; a ``*.json`` is nbagent's), else nbagent's
    saved session."""
    from .agent_logs.ledgers import agent_ledgers

    agents = agent_ledgers([p for p in paths if p.suffix != ".json"])
    return [agents[p] if p in agents else read_session_ledger(p) for p in paths]


def load_sessions(paths_or_glob: Any, pricing: Mapping | None = None):
    """One usage DataFrame across saved sessions.

    ``paths_or_glob`` is a path, a glob pattern (``"sessions/*.json"``,
    ``"**/*.json"``), a directory (its ``*.json`` and ``*.jsonl``) or a list of those. Rows
    are the turns of every session's ``turns`` ledger, with ``session_id``
    (the conversation id), ``path`` and ``turn`` first, and ``user`` (``Agent(user=...)``, ""
    when not recorded) and ``source`` last. Claude Code and Codex session logs are read too,
    recognised by content (``agent_logs``): a row per model call, ``source`` naming the agent. A pattern that
    matches nothing gives an empty frame; a missing or corrupt file raises
    ``StorageError`` naming it.

    Only each file's ledger is parsed (``read_session_ledger``: files saved by this version keep
    it before the steps) and decoded in columns, never a record per turn, so 10,000 sessions load
    in about a sixth of the time ``json.loads`` takes to parse them; damage in a file's steps shows
    only when ``Conversation.load`` reads it.
    """
    with gc_paused():  # the paths, ledgers and columns of thousands of files: freed before the collector resumes
        return usage_frame(read_ledgers(paths_or_glob, pricing))


def usage_frame(ledgers: Ledgers):
    """:func:`load_sessions`'s frame of ledgers read."""
    import numpy as np

    pd = require_pandas()
    with gc_paused():
        df = build_frame(ledgers.table, USAGE_INDEX, USAGE)
        turn = df.index.to_numpy()
        df = df.reset_index(drop=True)
        df.insert(0, "turn", turn)
        df.insert(0, "path", pd.array(ledgers.per_row(ledgers.paths), dtype="string"))
        categories = list(dict.fromkeys(ledgers.ids))
        code = {c: i for i, c in enumerate(categories)}
        codes = np.repeat(np.asarray([code[i] for i in ledgers.ids], dtype=np.int32), ledgers.lengths)
        df.insert(0, "session_id", pd.Categorical.from_codes(codes, categories=categories))
        df["user"] = pd.array(ledgers.per_row(ledgers.users), dtype="string")
        df["source"] = pd.Categorical(ledgers.per_row(ledgers.sources))
        del ledgers
    return df
