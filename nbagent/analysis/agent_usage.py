"""Every coding agent's usage on this machine in one frame (``nbagent.agent_usage``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.chat_session import open_session_fd
from ..core.errors import StorageError
from .agent_logs.folders import Found, log_files, standard_folders
from .agent_logs.progress import Progress
from .agent_logs.readers import read_log
from .sessions import Ledgers, ledgers_of, usage_frame

NBAGENT_MARK = b"nbagent.session"  # in the head of every session file nbagent saves
HEAD_BYTES = 4096


def agent_usage(*paths: str | os.PathLike, sessions: str | os.PathLike | Sequence[Any] | None = None,
                pricing: Mapping | None = None, progress: bool | str = "auto"):
    """One usage frame over coding agents' logs: a row per model call.

    ``paths`` are folders searched recursively (a Claude Code config folder, a Codex home, a folder
    of nbagent sessions, or any folder below them); none: every agent's standard folders here
    (``CLAUDE_CONFIG_DIR`` or ``~/.config/claude`` and ``~/.claude``; ``CODEX_HOME`` or ``~/.codex``;
    ``GEMINI_DATA_DIR`` or ``~/.gemini/tmp``).
    ``sessions``: folders of nbagent's own saved sessions to add. The frame is ``load_sessions``'s
    with ``source`` (``"nbagent"``, ``"claude-code"``, ``"codex"``, ``"gemini-cli"``), ``project`` (the project or
    working folder) and ``subagent`` (a subagent's call: a Claude Code sidechain, a Codex subagent's log); costs from genai-prices, as for nbagent's sessions. ``attrs["skipped"]`` maps each
    file with lines left out to their count by reason; ``attrs["refused"]`` each file not read to
    why (a FIFO, a link out of its folder, an unreadable file). A second call reads only the files
    that changed. ``progress``: a progress line while the files are read (``"auto"``: in a terminal or
    a notebook once the read takes over a second; ``True``: always; ``False``: never).
    """
    import pandas as pd

    folders = [Path(os.path.expanduser(os.fspath(p))) for p in paths] or standard_folders()
    extra = [] if sessions is None else [sessions] if isinstance(sessions, (str, os.PathLike)) else list(sessions)
    found = log_files(folders + [Path(os.fspath(s)).expanduser() for s in extra], (".jsonl", ".json"))
    readable = _readable(found, Progress(len(found.files), progress))
    ledgers = ledgers_of(readable, pricing)
    df = usage_frame(ledgers)
    df.insert(df.columns.get_loc("source") + 1, "project",
              pd.array(ledgers.per_row(ledgers.projects), dtype="string"))
    df.insert(df.columns.get_loc("project") + 1, "subagent", _subagent(ledgers))
    df.attrs["skipped"] = _skipped(readable)
    df.attrs["refused"] = dict(found.refused)
    return df


def _subagent(ledgers: Ledgers) -> Any:
    """Each row: a subagent's call (a Claude Code sidechain, a Codex subagent's log)."""
    import numpy as np

    parts = [np.asarray(flags if flags is not None else [False] * n, dtype=bool)
             for flags, n in zip(ledgers.subagents, ledgers.lengths)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _readable(found: Found, progress: Progress) -> list[Path]:
    """The files found that are agent logs or nbagent sessions and read; the others that fail are named."""
    out = []
    for path in found.files:
        try:
            if path.suffix == ".json":
                if _is_session(path):
                    out.append(path)
            elif read_log(path) is not None:
                out.append(path)
        except StorageError as exc:
            found.refused[str(path)] = str(exc)
        progress.step(path)
    progress.close()
    return out


def _is_session(path: Path) -> bool:
    try:
        fd, _ = open_session_fd(path)  # a regular file, opened without blocking (never a FIFO)
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return NBAGENT_MARK in os.read(fd, HEAD_BYTES)
    finally:
        os.close(fd)


def _skipped(paths: list[Path]) -> dict[str, dict[str, int]]:
    out = {}
    for path in paths:
        if path.suffix != ".json":
            log = read_log(path)
            if log is not None and log.skipped:
                out[str(path)] = dict(log.skipped)
    return out
