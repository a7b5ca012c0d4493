"""Notebook files and cell records a user, a broken tool or an attacker can leave behind (#48.5, #48.6,
#48.10): malformed or spoofed provenance in a cell's metadata, a notebook reached through a symlink,
files that are JSON but no notebook. Real ``.ipynb`` files, a real agent loop (a scripted model).
What a user would notice: code runs once, an edit lands in the real notebook, a broken file is a
typed error, and one bad record never hides the others."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

nbformat = pytest.importorskip("nbformat")

import nbagent  # noqa: E402
from nbagent import Agent, notebook_tools  # noqa: E402
from nbagent.core.errors import NbagentError, StorageError  # noqa: E402
from nbagent.core.steps import StepStatus  # noqa: E402
from nbagent.notebook.notebook_file import FileBackend  # noqa: E402
from nbagent.notebook.provenance import (  # noqa: E402
    MAX_DIFF_CHARS,
    MAX_DIFF_LINES,
    CellAction,
    CellActionKind,
    code_hash,
    recorded_actions,
    source_diff,
    with_action,
)
from support.scripted import ScriptedProvider, text_call, tool_call  # noqa: E402
from support.tool_runs import tool_steps  # noqa: E402

v4 = nbformat.v4
BAD_RECORDS = ["spoofed", ["a", "list"], 7]


def notebook(path, *cells):
    nb = v4.new_notebook()
    nb.cells = list(cells)
    nbformat.write(nb, str(path))
    return path


def agent_on(path, *calls, namespace=None):
    tools = notebook_tools({} if namespace is None else namespace, notebook=path, approve_code=False)
    return Agent(model=ScriptedProvider([list(c) for c in calls]), tools=tools)


def cell_of(path, cell_id):
    return next(c for c in nbformat.read(str(path), as_version=4).cells if c.id == cell_id)


# --- #48.5: malformed provenance metadata --------------------------------------------------------


@pytest.mark.parametrize("record", BAD_RECORDS, ids=["str", "list", "int"])
def test_run_cell_on_a_cell_with_a_malformed_record_runs_the_code_once_and_says_it_ran(tmp_path, record):
    path = notebook(tmp_path / "nb.ipynb", v4.new_code_cell("runs.append(1)\nlen(runs)", id="c1",
                                                           metadata={"nbagent": record, "tags": ["keep"]}))
    namespace = {"runs": []}
    agent = agent_on(path, tool_call(("x1", "run_cell", {"cell_id": "c1"})), text_call("done"), namespace=namespace)
    agent.conversation.ask("run c1")
    (run,) = tool_steps(agent.conversation, "run_cell")
    assert namespace["runs"] == [1]
    assert run.status == StepStatus.DONE and run.content.startswith("[value]\n```\n1\n```"), run.content
    assert "could not be recorded" not in run.content
    cell = cell_of(path, "c1")
    assert [a.action for a in recorded_actions(cell.metadata)] == [CellActionKind.RAN]  # the bad record replaced
    assert cell.metadata["tags"] == ["keep"]  # the rest of the metadata kept


@pytest.mark.parametrize("record", BAD_RECORDS[:2], ids=["str", "list"])
def test_edit_cell_on_a_cell_with_a_malformed_record_edits_it_and_records_the_edit(tmp_path, record):
    path = notebook(tmp_path / "nb.ipynb", v4.new_code_cell("x = 1", id="c1", metadata={"nbagent": record}))
    agent = agent_on(path, tool_call(("r1", "read_notebook", {})),
                     tool_call(("e1", "edit_cell", {"cell_id": "c1", "source": "x = 2"})), text_call("done"))
    agent.conversation.ask("edit c1")
    (edit,) = tool_steps(agent.conversation, "edit_cell")
    assert edit.status == StepStatus.DONE, edit.content
    cell = cell_of(path, "c1")
    assert cell.source == "x = 2"
    (action,) = recorded_actions(cell.metadata)
    assert action.action == CellActionKind.EDITED and action.call_id == "e1"


def test_a_record_that_cannot_be_read_is_skipped_and_bad_fields_get_their_unknown_value():
    good = CellAction(CellActionKind.RAN, session_id="s1", turn=3, model="demo", call_id="c", at=1_700_000_000.0)
    metadata = {"nbagent": {"actions": [
        "a string", ["a", "list"], None, {"action": "deleted"}, {"action": ["ran"]},  # no action record: skipped
        {"action": "edited", "turn": "seven", "at": "yesterday", "model": {"x": 1}, "call_id": 5},
        {"action": "inserted", "turn": True, "at": 1e300},
        {"action": "ran", "turn": 10**30, "at": float("nan"), "author": ["x"]},
        {"action": "ran", "turn": -5, "at": -1e300, "author": "evil\u202ename"},
        good.to_json()]}}
    bad_fields = recorded_actions(metadata)
    assert [a.action.value for a in bad_fields] == ["edited", "inserted", "ran", "ran", "ran"]
    *replaced, kept = bad_fields
    for action in replaced:
        assert action.turn == -1 and math.isnan(action.at)
    # no author: nbagent's own (""); one that is no name: "unknown", never "nbagent"; unprintables: spaces
    assert [a.author for a in replaced] == ["", "", "unknown", "evil name"]
    assert (replaced[0].model, replaced[0].call_id) == ("", "")
    assert kept == good
    # written back, the record is valid JSON (no NaN) and keeps only what could be read
    rewritten = with_action(metadata, good)
    text = json.dumps(rewritten, allow_nan=False)
    assert len(recorded_actions(json.loads(text))) == 6


@pytest.mark.parametrize("bad", [
    "spoofed", ["a", "list"],
    [{"action": "edited", "turn": "seven"}], [{"action": "edited", "at": 1e300}],
    [{"action": "edited", "at": "yesterday"}], [{"action": "edited", "turn": 10**30}],
    [{"action": "edited", "at": -1e300}], [{"action": "ran", "author": 5}]],
    ids=["record-str", "record-list", "turn-seven", "at-1e300", "at-yesterday", "turn-huge", "at-negative",
         "author-int"])
def test_provenance_survives_a_malformed_or_spoofed_record_and_lists_the_others(tmp_path, bad):
    good = CellAction(CellActionKind.INSERTED, session_id="s1", turn=2, model="demo", call_id="call_7",
                      approved_by="user", code_sha256=code_hash("x = 1"), at=1_700_000_000.0)
    record = {"actions": bad} if isinstance(bad, list) and isinstance(bad[0], dict) else bad
    path = notebook(tmp_path / "nb.ipynb", v4.new_code_cell("y", id="bad", metadata={"nbagent": record}),
                    v4.new_code_cell("x = 1", id="good", metadata=with_action({}, good)))
    df = nbagent.provenance(path)
    assert list(df["cell_id"])[-1] == "good" and df["call_id"].iloc[-1] == "call_7"
    assert str(df["at"].iloc[-1]) == "2023-11-14 22:13:20+00:00"
    if len(df) == 2:  # the bad cell's record was readable in part: its bad fields are unknown
        assert df["turn"].isna().iloc[0] or df["turn"].iloc[0] == -1
        assert df["at"].isna().iloc[0] and df["author"].iloc[0] == ("unknown" if "author" in str(bad) else "nbagent")


def test_provenance_names_the_author_of_each_action(tmp_path):
    ours = CellAction(CellActionKind.INSERTED, call_id="a", at=1_700_000_000.0)
    theirs = CellAction(CellActionKind.EDITED, call_id="b", at=1_700_000_100.0, author="claude-code 2.0.1")
    legacy = {"action": "ran", "call_id": "c", "turn": 1}  # written before authors were recorded
    path = notebook(tmp_path / "nb.ipynb",
                    v4.new_code_cell("x = 1", id="c1", metadata=with_action(with_action({}, ours), theirs)),
                    v4.new_code_cell("y = 1", id="c2", metadata={"nbagent": {"actions": [legacy]}}))
    df = nbagent.provenance(path)
    assert list(df["author"]) == ["nbagent", "claude-code 2.0.1", "nbagent"]
    assert theirs.to_json()["author"] == "claude-code 2.0.1" and "author" not in ours.to_json()
    assert recorded_actions(cell_of(path, "c1").metadata)[1].author == "claude-code 2.0.1"


# --- #43.3: an action's recorded diff ----------------------------------------------------------


@pytest.mark.parametrize("bad", [5, ["-a", "+b"], {"html": "<b>"}, None], ids=["int", "list", "dict", "null"])
def test_a_recorded_diff_that_is_no_string_is_dropped_and_the_action_kept(tmp_path, bad):
    entry = {"action": "edited", "call_id": "e1", "turn": 0, "diff": bad}
    path = notebook(tmp_path / "nb.ipynb", v4.new_code_cell("x = 1", id="c1", metadata={"nbagent": {"actions": [entry]}}))
    (action,) = recorded_actions(cell_of(path, "c1").metadata)
    assert action.call_id == "e1" and action.diff == "" and "diff" not in action.to_json()
    df = nbagent.provenance(path)
    assert list(df["diff"]) == [""] and list(df["call_id"]) == ["e1"]


def test_a_recorded_diff_is_capped_with_a_line_saying_how_much_was_cut(tmp_path):
    before = "\n".join(f"x{i} = {i}" for i in range(500))
    after = "\n".join(f"x{i} = {i + 1}" for i in range(500))
    diff = source_diff(before, after)
    lines = diff.split("\n")
    assert len(lines) <= MAX_DIFF_LINES and len(diff) <= MAX_DIFF_CHARS
    assert lines[:4] == ["--- before", "+++ after", "@@ -1,500 +1,500 @@", "-x0 = 0"]
    assert lines[-1].startswith("… diff cut: ") and "more lines" in lines[-1]
    wide = source_diff("", "y = '" + "a" * 20_000 + "'")  # one line longer than the cap: its start
    assert len(wide) <= MAX_DIFF_CHARS and wide.split("\n")[-1].startswith("… diff cut: ")
    # a hand-written record longer than the cap is cut on reading, as the tool would have cut it
    entry = {"action": "edited", "diff": "+" + "b\n+" * 50_000}
    path = notebook(tmp_path / "nb.ipynb", v4.new_code_cell("x = 1", id="c1", metadata={"nbagent": {"actions": [entry]}}))
    (action,) = recorded_actions(cell_of(path, "c1").metadata)
    assert len(action.diff) <= MAX_DIFF_CHARS and len(action.diff.split("\n")) <= MAX_DIFF_LINES
    assert nbagent.provenance(path)["diff"].iloc[0] == action.diff
    small = source_diff("a = 1\nb = 2\n", "a = 1\nb = 3\n")  # within the cap: whole, with context
    assert small == "--- before\n+++ after\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3"


# --- #48.10: files that are JSON but no notebook ------------------------------------------------

NOT_NOTEBOOKS = {
    "a JSON list": "[1, 2]",
    "a JSON string": '"hello"',
    "a cell that is a string": json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": ["print(1)"]}),
    "cells that are an object": json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": {"a": 1}}),
    "a cell without a type": json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                        "cells": [{"source": "x", "metadata": {}}]}),
    "nested 100,000 deep": '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [], "x": '
                           + "[" * 100_000 + "]" * 100_000 + "}",
    "metadata nested 900 deep": '{"nbformat": 4, "nbformat_minor": 5, "metadata": {"x": ' + "[" * 900 + "]" * 900
                                + '}, "cells": []}',
    "a version 3 notebook without worksheets": json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                                                           "worksheets": "x"}),
}


@pytest.mark.parametrize("text", NOT_NOTEBOOKS.values(), ids=NOT_NOTEBOOKS.keys())
def test_a_file_that_is_no_notebook_is_a_storage_error_for_the_tools(tmp_path, text):
    path = tmp_path / "broken.ipynb"
    path.write_text(text)
    with pytest.raises(StorageError, match="broken.ipynb") as error:
        asyncio.run(FileBackend(path).read())
    assert error.value.kind == "io"
    agent = agent_on(path, tool_call(("r1", "read_notebook", {})), text_call("?"))
    agent.conversation.ask("read it")
    (read,) = tool_steps(agent.conversation, "read_notebook")
    assert read.status == StepStatus.ERROR and "StorageError" in read.content
    assert path.read_text() == text  # nothing was written over it


def test_provenance_of_a_notebook_nested_too_deeply_is_a_storage_error(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text(NOT_NOTEBOOKS["nested 100,000 deep"])
    with pytest.raises(NbagentError) as error:
        nbagent.provenance(path)
    assert isinstance(error.value, StorageError) and error.value.kind == "io"


def test_provenance_skips_a_cell_that_is_a_string_and_keeps_positions(tmp_path):
    action = CellAction(CellActionKind.RAN, call_id="c", at=0.0)
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        "junk", {"cell_type": "code", "id": "c2", "source": "1", "metadata": with_action({}, action), "outputs": [],
                 "execution_count": None}]}))
    df = nbagent.provenance(path)
    assert list(df["cell_id"]) == ["c2"] and list(df["position"]) == [2]


# --- #48.6: a notebook reached through a symlink -------------------------------------------------


def test_an_edit_of_a_symlinked_notebook_is_written_to_the_real_notebook(tmp_path):
    (tmp_path / "course").mkdir()
    real = notebook(tmp_path / "course" / "lesson.ipynb", v4.new_code_cell("x = 1", id="c1"))
    link = tmp_path / "mine.ipynb"
    link.symlink_to(real)
    agent = agent_on(link, tool_call(("r1", "read_notebook", {})),
                     tool_call(("e1", "edit_cell", {"cell_id": "c1", "source": "x = 2"})), text_call("done"))
    agent.conversation.ask("edit c1")
    (read,) = tool_steps(agent.conversation, "read_notebook")
    assert f"{link} (a link to {real})" in read.content  # the tool says where edits go
    (edit,) = tool_steps(agent.conversation, "edit_cell")
    assert edit.status == StepStatus.DONE, edit.content
    assert link.is_symlink() and link.resolve() == real  # the link stays a link
    assert cell_of(real, "c1").source == "x = 2"  # and the real notebook has the edit
    assert not [p.name for p in real.parent.iterdir() if p.name != "lesson.ipynb"]  # no temporary file left
    assert not [p.name for p in tmp_path.iterdir() if p.name not in ("mine.ipynb", "course")]
