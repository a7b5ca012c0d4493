"""A folder of saved conversations, as a session browser or a chat's *History* needs it.

Plain functions over the files ``Agent(save_to=folder)`` writes, for a front end to call from the
kernel: list them (``list_sessions``), read one (its transcript and usage, read-only), resume it
(a live ``Agent``), export it (markdown or HTML), and move it to the folder's trash (and back).
Nothing here deletes a file: the trash is a ``.trash`` folder beside the sessions, which
``list_sessions(folder)`` does not list (the browser's *Undo* moves a file back). Exports are
atomic and never follow a link planted at their name.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .analysis.session_list import list_sessions
from .conversation import Conversation
from .core.atomic_file import atomic_write_text
from .core.errors import ConfigError, StorageError
from .core.session_journal import journal_path

if TYPE_CHECKING:
    import pandas as pd

    from .agent import Agent
    from .notebook.session_browser import SessionBrowser

TRASH = ".trash"
FORMATS = ("md", "html")

__all__ = [
    "TRASH",
    "export_session",
    "list_sessions",
    "restore_session",
    "resume_session",
    "session_browser",
    "session_transcript",
    "session_usage",
    "trash_session",
]


def session_transcript(path: str | os.PathLike, fmt: str = "md") -> str:
    """The saved conversation as an escaped transcript (``"md"`` or ``"html"``), read-only."""
    conv = Conversation.load(Path(path))
    return conv.to_html() if _format(fmt) == "html" else conv.to_markdown()


def session_usage(path: str | os.PathLike) -> pd.DataFrame:
    """The saved conversation's ``usage_df()`` (one row per turn)."""
    return Conversation.load(Path(path)).usage_df()


def resume_session(path: str | os.PathLike, tools: Any = (), **overrides: Any) -> Agent:
    """A live agent on the saved conversation, with its saved settings (``Agent.load``)."""
    from .agent import Agent

    return Agent.load(path, tools=tools, **overrides)


def session_browser(folder: str | os.PathLike, tools: Any = (), **overrides: Any) -> SessionBrowser:
    """A notebook widget over the folder's sessions: search, read, *Resume* (a live chat, resumed
    with ``tools`` and ``overrides`` as in ``Agent.load``), *Export* and *Delete* (to the trash)."""
    from .notebook.session_browser import SessionActions, SessionBrowser

    actions = SessionActions(resume=lambda path: resume_session(path, tools=tools, **overrides),
                             export=lambda path, fmt: export_session(path, fmt=fmt), trash=trash_session,
                             restore=restore_session)
    return SessionBrowser(folder, actions)


def export_session(path: str | os.PathLike, dest: str | os.PathLike | None = None, fmt: str | None = None) -> Path:
    """Write the transcript beside the session (or to ``dest``); the format from ``fmt`` or
    ``dest``'s suffix (markdown by default). Returns the written path.

    Written atomically (a temporary file renamed over the target: a full disk keeps the previous
    export); a symbolic link at the target is refused (``StorageError``), never written through.
    """
    src = Path(path)
    if fmt is None:
        fmt = Path(dest).suffix.lstrip(".").lower() if dest is not None and Path(dest).suffix else "md"
    fmt = _format(fmt)
    out = Path(dest) if dest is not None else src.with_suffix("." + fmt)
    text = session_transcript(src, fmt)
    if out.is_symlink():
        raise StorageError(f"{out} is a symbolic link: nbagent does not write through or over links "
                           "(remove it, or export to another file)")
    return atomic_write_text(out, text)


def trash_session(path: str | os.PathLike) -> Path:
    """Move a session file into its folder's ``.trash`` (a name already there gets a number).
    Returns where it went."""
    src = Path(path)
    if not src.is_file():
        raise StorageError(f"no such session file: {src}")
    return _move(src, src.parent / TRASH)


def restore_session(path: str | os.PathLike) -> Path:
    """Move a file from a ``.trash`` folder back into the folder above it. Returns where it went."""
    src = Path(path)
    if src.parent.name != TRASH or not src.is_file():
        raise StorageError(f"{src} is not a file in a {TRASH} folder")
    return _move(src, src.parent.parent)


def _move(src: Path, folder: Path) -> Path:
    dest = folder / src.name
    n = 1
    while dest.exists():
        dest = folder / f"{src.stem}-{n}{src.suffix}"
        n += 1
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.move(os.fspath(src), os.fspath(dest))
        journal = journal_path(src)  # the turns autosave appended since the file was last written
        if journal.exists():
            shutil.move(os.fspath(journal), os.fspath(journal_path(dest)))
    except OSError as exc:
        raise StorageError(f"cannot move {src} to {folder}: {exc.strerror or exc}") from None
    return dest


def _format(fmt: str) -> str:
    fmt = {"markdown": "md", "htm": "html"}.get(str(fmt).lower(), str(fmt).lower())
    if fmt not in FORMATS:
        raise ConfigError(f"export format must be 'md' or 'html', not {fmt!r}")
    return fmt
