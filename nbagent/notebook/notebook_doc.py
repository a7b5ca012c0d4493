"""The notebook the agent reads and edits, whichever place it comes from.

A ``NotebookBackend`` is one place a notebook's cells can be read from and written to: the live
notebook the chat widget is shown in (JupyterLab, Notebook 7: unsaved edits included), an ``.ipynb``
file (``notebook_tools(notebook=path)``, VS Code, or the kernel's own file), or the kernel's input
history (read only). The tools (``read_notebook``, ``edit_cell``, ``insert_cell``) speak only to this
protocol, so each place is one class and the tools never ask where they are.

Cells are named by their nbformat id, never by position: positions move when a user inserts a cell,
ids do not. Every write names the source it expects to replace, and a backend refuses (``ToolError``)
a cell whose source is no longer that, so an edit never lands on text the model did not read.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol
from collections.abc import Callable

from ..core.errors import NbagentError


class NotebookSource(str, enum.Enum):
    """Where a notebook's cells were read from (named in ``read_notebook``'s answer)."""

    LIVE = "live"  # the notebook open in the front end, through the widget
    FILE = "file"  # an .ipynb on disk
    HISTORY = "history"  # the kernel's input history (In[...]); read only

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class NotebookCell:
    """One cell as the backend holds it now."""

    id: str  # the nbformat cell id (stable across moves; notebooks older than 4.5 are given ids)
    index: int  # 0-based position in the notebook (the user sees index + 1)
    cell_type: str = "code"  # "code" | "markdown" | "raw"
    source: str = ""
    execution_count: int | None = None
    outputs: tuple[dict[str, Any], ...] = ()  # nbformat output dicts, as the notebook stores them
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NotebookSnapshot:
    """A notebook's cells at one moment, and what the front end was pointing at."""

    source: NotebookSource
    cells: tuple[NotebookCell, ...] = ()
    path: str | None = None  # the .ipynb path when known
    active_cell_id: str | None = None  # the cell the user has selected (live notebooks)
    chat_cell_id: str | None = None  # the cell showing the chat widget (live notebooks)

    def cell(self, cell_id: str) -> NotebookCell | None:
        """The cell with this id, or None."""
        return next((c for c in self.cells if c.id == cell_id), None)


class NotebookBackend(Protocol):
    """One place a notebook lives; every method may raise ``NbagentError`` (``tool`` for a stale or
    missing cell, ``io`` for a file that cannot be written, ``config`` where writing is impossible)."""

    source: NotebookSource

    async def read(self) -> NotebookSnapshot:
        """The cells now."""
        ...

    async def set_source(self, cell_id: str, source: str, *, expected_source: str,
                         metadata: dict[str, Any] | None = None) -> NotebookCell:
        """Replace a cell's source (and, when given, its whole metadata) if its source is still
        ``expected_source``; the cell as written."""
        ...

    async def insert(self, source: str, *, after: str | None = None, cell_type: str = "code",
                     metadata: dict[str, Any] | None = None) -> NotebookCell:
        """A new cell after the cell ``after`` (None: after the chat's cell, else at the end)."""
        ...

    async def delete(self, cell_id: str, *, expected_source: str) -> None:
        """Remove a cell (the undo of an insert) if its source is still ``expected_source``."""
        ...


class ReadOnlyBackend:
    """The writes of a ``NotebookBackend`` that only reads, each refused with the error ``refusal``
    makes: the kernel's input history, a file whose open live view cannot be reached."""

    def __init__(self, refusal: Callable[[], NbagentError]) -> None:
        self._refusal = refusal

    async def set_source(self, cell_id: str, source: str, *, expected_source: str,
                         metadata: dict[str, Any] | None = None) -> NotebookCell:
        raise self._refusal()

    async def insert(self, source: str, *, after: str | None = None, cell_type: str = "code",
                     metadata: dict[str, Any] | None = None) -> NotebookCell:
        raise self._refusal()

    async def delete(self, cell_id: str, *, expected_source: str) -> None:
        raise self._refusal()
