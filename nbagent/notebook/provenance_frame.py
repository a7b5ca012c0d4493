"""``nbagent.provenance(path)``: every agent action recorded in a notebook, one row each.

Reads the ``.ipynb`` as JSON (no nbformat needed; notebooks older than nbformat 4.5 have no cell
ids: their cells are named ``cell-<position>``). A row per ``CellAction`` in a cell's metadata
(``provenance.py``); a cell that ``%chat_code`` wrote and whose metadata records nothing (no chat
widget was open to write it) still gives one ``inserted`` row from its ``%%chat_run`` line.
``author`` is who acted: ``"nbagent"`` (also for records written before authors were recorded) or
an outside MCP client's name (``nbagent.serve``). ``source_matches`` says whether the cell's source now is still the code the action recorded
(False: the user edited it since); ``diff`` is the recorded diff of an edit or insert ("" if none).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import ConfigError, StorageError
from .provenance import AUTHOR, CellAction, CellActionKind, code_hash, recorded_actions

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ("cell_id", "position", "cell_type", "action", "session_id", "turn", "model", "call_id", "approved_by",
           "code_sha256", "at", "author", "source_matches", "diff")
_CHAT_RUN = re.compile(r"^%%chat_run\b(?P<args>[^\n]*)")


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source or "")


def _chat_run_action(source: str) -> CellAction | None:
    """The ``inserted`` action a ``%%chat_run`` line states (a ``%chat_code`` cell), or None."""
    match = _CHAT_RUN.match(source)
    if match is None:
        return None
    args = dict(part.split("=", 1) for part in match["args"].split() if "=" in part)
    turn = int(args["turn"]) - 1 if re.fullmatch(r"[0-9]{1,9}", args.get("turn", "")) else -1  # the line counts from 1
    return CellAction(CellActionKind.INSERTED, turn=turn, call_id=args.get("call", "").split(",")[-1],
                      approved_by="%chat_code", at=float("nan"))


def _read(path: str | Path) -> dict[str, Any]:
    file = Path(path).expanduser()
    if file.suffix.lower() != ".ipynb":
        raise ConfigError(f"provenance(): {str(file)!r} is not a notebook (.ipynb)", kind="config")
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StorageError(f"provenance(): no notebook at {str(file)!r}", kind="io") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StorageError(f"provenance(): {str(file)!r} cannot be read as a notebook: {exc}", kind="io") from None
    except RecursionError:
        raise StorageError(f"provenance(): {str(file)!r} is not a notebook: its JSON is nested too deeply",
                           kind="io") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("cells"), list):
        raise StorageError(f"provenance(): {str(file)!r} has no cells (not a notebook?)", kind="io")
    return doc


def provenance_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One dict per recorded action of a notebook's JSON, in cell order, oldest action first."""
    rows = []
    for index, cell in enumerate(doc["cells"]):
        if not isinstance(cell, dict):
            continue  # a string or a list where a cell belongs: nothing recorded there
        source = _source(cell)
        actions = recorded_actions(cell.get("metadata"))
        if not actions and (stated := _chat_run_action(source)) is not None:
            actions = [CellAction(stated.action, turn=stated.turn, call_id=stated.call_id,
                                  approved_by=stated.approved_by, code_sha256=code_hash(source), at=stated.at)]
        cell_id = cell.get("id") if isinstance(cell.get("id"), str) else f"cell-{index + 1}"
        for action in actions:
            rows.append({"cell_id": cell_id, "position": index + 1, "cell_type": str(cell.get("cell_type", "code")),
                         **action.to_json(), "author": action.author or AUTHOR, "diff": action.diff,
                         "source_matches": bool(action.code_sha256) and code_hash(source) == action.code_sha256})
    return rows


def provenance(path: str | Path) -> pd.DataFrame:
    """The agent's actions recorded in the notebook at ``path``: one row per action, with
    ``cell_id``, ``position`` (1-based, as the user counts cells), ``cell_type``, ``action``
    (``inserted`` | ``edited`` | ``ran``), ``session_id``, ``turn``, ``model``, ``call_id``,
    ``approved_by``, ``code_sha256``, ``at`` (a UTC time), ``author`` (``"nbagent"`` for nbagent's own
    agent, else the outside MCP client's name), ``source_matches`` and ``diff`` (an edit's or insert's
    unified diff, capped; "" when none was recorded). Records are read as untrusted:
    one that cannot be read is left out, a bad field is unknown (``turn`` -1, ``at`` NaT)."""
    import pandas as pd

    frame = pd.DataFrame(provenance_rows(_read(path)), columns=list(COLUMNS))
    frame["at"] = pd.to_datetime(frame["at"].astype("float64"), unit="s", utc=True)
    frame["turn"] = frame["turn"].astype("Int64")
    frame["position"] = frame["position"].astype("Int64")
    frame["source_matches"] = frame["source_matches"].astype("bool")
    frame["action"] = pd.Categorical(frame["action"], categories=[k.value for k in CellActionKind])
    return frame
