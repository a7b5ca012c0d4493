"""Where coding agents keep their logs on this machine, and the log files under a folder.

Claude Code: each folder of ``CLAUDE_CONFIG_DIR`` (comma-separated; a config folder or its
``projects/``), else ``$XDG_CONFIG_HOME/claude`` (``~/.config/claude``) and ``~/.claude``; the
``projects/`` of each. Codex: ``$CODEX_HOME`` (else ``~/.codex``), its ``sessions/`` and
``archived_sessions/``. Gemini CLI: each folder of ``GEMINI_DATA_DIR`` (comma-separated), else
``~/.gemini/tmp``. The same places ccusage 20 reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

LOG_SUFFIX = ".jsonl"


def standard_folders() -> list[Path]:
    """The agents' log folders that exist here."""
    return [p for p in (*claude_folders(), *codex_folders(), *gemini_folders()) if p.is_dir()]


def claude_folders() -> list[Path]:
    listed = os.environ.get("CLAUDE_CONFIG_DIR")
    if listed is not None and listed.strip():
        roots = [Path(os.path.expanduser(p.strip())) for p in listed.split(",") if p.strip()]
    else:
        xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        roots = [Path(xdg) / "claude", Path.home() / ".claude"]
    return _unique([r if r.name == "projects" else r / "projects" for r in roots])


def codex_folders() -> list[Path]:
    home = Path(os.path.expanduser(os.environ.get("CODEX_HOME") or "~/.codex"))
    return [home / "sessions", home / "archived_sessions"]


def gemini_folders() -> list[Path]:
    listed = os.environ.get("GEMINI_DATA_DIR")
    if listed is not None:
        return _unique([Path(os.path.expanduser(p.strip())) for p in listed.split(",") if p.strip()])
    return [Path.home() / ".gemini" / "tmp"]


@dataclass
class Found:
    """The log files under some folders, and the entries named and left out, with why."""

    files: list[Path] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def log_files(folders: list[Path], suffixes: tuple[str, ...] = (LOG_SUFFIX,)) -> Found:
    """Every file ending in ``suffixes`` under ``folders`` (recursively, by path), each once. A
    link is followed only to a file inside the folder searched; a link to a folder is not
    followed; an entry that cannot be listed is named."""
    found = Found()
    seen: set[str] = set()
    for folder in folders:
        root = os.path.realpath(folder)
        for parent, dirs, names in os.walk(folder, onerror=lambda e: _refuse(found, e)):
            for name in dirs:
                if os.path.islink(os.path.join(parent, name)):
                    found.refused[os.path.join(parent, name)] = "a link to a folder (not followed)"
            for name in sorted(names):
                if not name.endswith(suffixes):
                    continue
                path = os.path.join(parent, name)
                real = os.path.realpath(path)
                if os.path.islink(path) and os.path.commonpath([root, real]) != root:
                    found.refused[path] = "a link out of the folder"
                elif real not in seen:
                    seen.add(real)
                    found.files.append(Path(path))
    found.files.sort()
    return found


def _refuse(found: Found, error: OSError) -> None:
    found.refused[str(error.filename)] = f"cannot list: {error.strerror or error}"


def _unique(paths: list[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))
