"""``@cell`` and ``@cell:N`` in the chat box: the cells they name, attached to the prompt.

The front end resolves the references against the live notebook (``js/src/live.js``: ``@cell`` is
the cell the user last worked in, ``@cell:5`` the fifth cell as the user counts) and sends them with
the prompt: ``{"type": "send", "prompt", "cells": [{"ref", "id", "number", "cell_type", "source",
"execution_count", "outputs"}]}`` (``outputs`` already short text) or ``{"ref", "error"}`` for a
reference it could not resolve. ``attach_cells`` appends them to the prompt the way ``@name``
attaches a variable (``variables.attach_variables``), each capped. The source and the outputs are
fenced as data (``core.text.data_block``); the outputs lose their terminal codes and key-shaped
text (``variables.output_for_model``, as in ``read_notebook``), the source stays as written.
"""

from __future__ import annotations

from typing import Any

from ..core.text import data_block
from .variables import cap, output_for_model

CELL_SOURCE_MAX = 6_000  # characters of one attached cell's source
CELL_OUTPUT_MAX = 2_000  # ... and of its outputs
CELLS_HEADER = "Attached notebook cells"


def _block(cell: dict[str, Any]) -> str:
    ref = str(cell.get("ref", "@cell"))
    if cell.get("error"):
        return f"--- {ref} ---\n(not attached: {cell['error']})"
    count = cell.get("execution_count")
    head = (f"--- {ref}: cell {cell.get('number', '?')} (id {cell.get('id', '?')}, {cell.get('cell_type', 'code')}"
            f"{f', In [{count}]' if isinstance(count, int) else ''}) ---")
    cell_type = str(cell.get("cell_type", "code"))
    info = "python" if cell_type == "code" else "markdown" if cell_type == "markdown" else ""
    parts = [head, data_block(cap(str(cell.get("source", "")), CELL_SOURCE_MAX, "of the source"), info)]
    outputs = output_for_model(str(cell.get("outputs") or ""))
    if outputs.strip():
        parts += ["[outputs]", data_block(cap(outputs, CELL_OUTPUT_MAX, "of the outputs"))]
    return "\n".join(parts)


def attach_cells(prompt: str, cells: Any) -> tuple[str, list[str]]:
    """``prompt`` followed by each referenced cell (source and outputs), and the references."""
    found = [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []
    if not found:
        return prompt, []
    refs = [str(c.get("ref", "@cell")) for c in found]
    blocks = [f"\n\n[{CELLS_HEADER}: {', '.join(refs)}]"] + [_block(c) for c in found]
    return prompt.rstrip() + "\n".join(blocks), refs
