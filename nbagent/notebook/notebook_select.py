"""Which notebook the notebook tools read and edit, chosen again at every call.

``NotebookChoice(notebook, namespace)``:

- ``notebook`` a path (``str`` / ``PathLike``): that ``.ipynb`` (``FileBackend``), always;
- ``notebook`` a ``NotebookBackend``: that one, always;
- ``None``: the live notebook the chat widget is shown in, when there is one now
  (``live_notebook.current_live_backend()``; JupyterLab, Notebook 7); else the kernel's own ``.ipynb``
  (``kernel_notebook_path``: VS Code, Jupyter Server); else the kernel's input history (read only).

The live notebook is asked for at each call because the widget is usually shown after the tools
are made; it is skipped while a cell runs (a turn awaited in a cell, ``%%chat``): the front end cannot
answer the kernel until the cell ends, so the file (or the history) is read, and never written (the
notebook is open in that front end: a write would land behind its editor; ``LiveUnreachable``). A live notebook that
does not answer (``config`` error: no view open, the kernel busy in
a cell) falls back to the file or the history for that read, and the answer says so.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from .notebook_doc import NotebookBackend, NotebookSnapshot
from .notebook_file import FileBackend
from .notebook_history import HistoryBackend, cell_running, kernel_notebook_path


def live_backend() -> NotebookBackend | None:
    """The live notebook now (``live_notebook.current_live_backend()``), or None when that module
    is not there or finds no widget able to reach its notebook."""
    try:
        module = importlib.import_module("nbagent.notebook.live_notebook")
    except ImportError:
        return None
    current = getattr(module, "current_live_backend", None)
    backend = current() if callable(current) else None
    return backend


def _unreachable(offline: NotebookBackend) -> NotebookBackend:
    """``offline`` read only, its writes refused (``live_notebook.LiveUnreachable``)."""
    module = importlib.import_module("nbagent.notebook.live_notebook")
    return module.LiveUnreachable(offline)


def label_of(backend: Any) -> str:
    """How ``read_notebook`` names where the cells came from."""
    label = getattr(backend, "label", None)
    if isinstance(label, str) and label:
        return label
    source = getattr(backend, "source", "")
    return "live: the notebook open in the front end (unsaved edits included)" if str(source) == "live" else str(source)


@dataclass(frozen=True)
class NotebookRead:
    """One read: the backend that answered, what it held, and notes for the model."""

    backend: NotebookBackend
    snapshot: NotebookSnapshot
    notes: tuple[str, ...] = ()


class NotebookChoice:
    """Where the notebook tools find the notebook (see the module docstring)."""

    def __init__(self, notebook: str | os.PathLike | NotebookBackend | None = None,
                 namespace: dict | None = None) -> None:
        self.namespace = namespace
        self.fixed: NotebookBackend | None = None
        if isinstance(notebook, (str, os.PathLike)):
            path = Path(notebook).expanduser()
            if path.suffix != ".ipynb":
                raise ConfigError(f"notebook_tools(notebook=...): {str(notebook)!r} is not an .ipynb file")
            self.fixed = FileBackend(path)
        elif notebook is not None:
            if not all(hasattr(notebook, name) for name in ("read", "set_source", "insert", "delete")):
                raise ConfigError("notebook_tools(notebook=...) takes a path to an .ipynb or a "
                                  f"NotebookBackend, not {type(notebook).__name__}")
            self.fixed = notebook
        self._files: dict[Path, FileBackend] = {}
        self._history = HistoryBackend()

    def __repr__(self) -> str:
        return f"NotebookChoice({self.fixed!r})" if self.fixed is not None else "NotebookChoice(live, kernel file, history)"

    def backend(self) -> NotebookBackend:
        """The backend a call uses now (no reading)."""
        if self.fixed is not None:
            return self.fixed
        live = live_backend()
        if live is not None and cell_running():  # a busy kernel cannot hear the front end: the file is read
            return _unreachable(self._offline())  # and never written behind the open editor
        return live or self._offline()

    def _offline(self) -> NotebookBackend:
        path = kernel_notebook_path(self.namespace)
        if path is None:
            return self._history
        if path not in self._files:
            self._files[path] = FileBackend(path)
        return self._files[path]

    async def read(self) -> NotebookRead:
        """Read the notebook from the backend chosen now (a silent live notebook: the next one)."""
        backend = self.backend()
        try:
            return NotebookRead(backend, await backend.read(), _notes(backend))
        except ConfigError as exc:
            if self.fixed is not None or backend is self._offline():
                raise
            fallback = self._offline()
            note = f"The live notebook did not answer ({exc}); read from {label_of(fallback)} instead."
            return NotebookRead(fallback, await fallback.read(), (note, *_notes(fallback)))


def _notes(backend: Any) -> tuple[str, ...]:
    if isinstance(backend, FileBackend):
        notes = ["Unsaved edits in a front end are not in the file."]
        if backend.normalized:
            notes.append("This notebook (nbformat older than 4.5) had no cell ids: ids were given by "
                         "position (cell-1, cell-2, …) and are saved with the first edit.")
        return tuple(notes)
    if isinstance(backend, HistoryBackend):
        return ("These are the kernel's inputs, not a notebook: cells cannot be edited or inserted here.",)
    return ()
