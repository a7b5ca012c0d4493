"""The live notebook backend's kernel side (live_notebook.py) against a stand-in front end that
answers over the widget's messages as js/src/live.js does; @cell attachments (cell_refs.py);
nbagent.provenance(path) over real .ipynb files (nbformat). The browser tests drive the real
front end (test_live_notebook_browser.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import nbagent  # noqa: E402
from nbagent import Agent  # noqa: E402
from nbagent.core.errors import NbagentError  # noqa: E402
from nbagent.notebook import live_notebook  # noqa: E402
from nbagent.notebook.cell_refs import attach_cells  # noqa: E402
from nbagent.notebook.live_notebook import LiveNotebook, NoLiveView, current_live_backend  # noqa: E402
from nbagent.notebook.protocol import CHAT, Handlers  # noqa: E402
from nbagent.notebook.provenance import CellAction, CellActionKind, code_hash, with_action  # noqa: E402
from nbagent.notebook.widget import ChatWidget  # noqa: E402
from support.widget_messages import deliver_raw  # noqa: E402
from support.scripted import ScriptedProvider, text_call, tool_call  # noqa: E402


class FrontEnd:
    """A page holding a notebook model: answers the kernel's requests like js/src/live.js."""

    def __init__(self, widget, cells):
        self.widget, self.cells, self.seen = widget, cells, []

    def __call__(self, msg):
        self.seen.append(msg)
        if msg.get("type") != "notebook" or not msg.get("id"):
            return
        try:
            answer = {"ok": True, "result": self.apply(msg)}
        except KeyError as exc:
            answer = {"ok": False, "error": str(exc), "kind": "tool"}
        asyncio.get_running_loop().call_soon(deliver_raw, self.widget, {"type": "notebook", "id": msg["id"], **answer})

    def apply(self, msg):
        if msg["op"] == "read":
            return {"cells": [dict(c, index=i) for i, c in enumerate(self.cells)], "active_cell_id": "b",
                    "chat_cell_id": "a", "path": "work.ipynb"}
        cell = next((c for c in self.cells if c["id"] == msg.get("cell_id")), None)
        if msg["op"] == "set_source":
            if cell is None or cell["source"] != msg["expected_source"]:
                raise KeyError("changed since it was read")
            cell["source"] = msg["source"]
            return dict(cell, index=self.cells.index(cell))
        raise KeyError(msg["op"])


class Widget:
    """What LiveNotebook needs of a ChatWidget: ``send`` and a conversation."""

    def __init__(self, conversation=None):
        self.conversation = conversation
        self.send = lambda msg: None
        self.handlers = Handlers(CHAT, lambda msg: self.send(msg))  # as ChatWidget's: `send` looked up late
        live_notebook.serve(self, self.handlers)


async def test_a_read_returns_the_cells_the_page_holds_unsaved_edits_and_errors_included():
    widget = Widget()
    cells = [{"id": "a", "cell_type": "code", "source": "agent", "execution_count": 1, "outputs": [], "metadata": {}},
             {"id": "b", "cell_type": "code", "source": "1 / 0  # edited, not saved", "execution_count": 2,
              "outputs": [{"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
                           "traceback": ["ZeroDivisionError: division by zero"]}], "metadata": {}}]
    widget.send = FrontEnd(widget, cells)
    snap = await LiveNotebook(widget).read()
    assert str(snap.source) == "live" and snap.path == "work.ipynb"
    assert [(c.id, c.index, c.source) for c in snap.cells] == [("a", 0, "agent"), ("b", 1, "1 / 0  # edited, not saved")]
    assert snap.cells[1].outputs[0]["ename"] == "ZeroDivisionError" and snap.active_cell_id == "b"
    assert snap.chat_cell_id == "a"


async def test_an_edit_names_the_source_it_replaces_and_a_changed_cell_is_refused():
    widget = Widget()
    cells = [{"id": "b", "cell_type": "code", "source": "1 / 0", "outputs": [], "metadata": {}}]
    widget.send = FrontEnd(widget, cells)
    live = LiveNotebook(widget)
    cell = await live.set_source("b", "1 / 1", expected_source="1 / 0")
    assert cell.source == "1 / 1" and cells[0]["source"] == "1 / 1"
    with pytest.raises(NbagentError, match="changed since it was read") as refused:
        await live.set_source("b", "2", expected_source="1 / 0")  # the model read an older source
    assert refused.value.kind == "tool" and cells[0]["source"] == "1 / 1"  # nothing overwritten


async def test_no_view_answering_is_a_clear_config_error_in_time():
    live = LiveNotebook(Widget(), timeout=0.2)
    with pytest.raises(NoLiveView, match="did not answer within 0.2 s") as err:
        await live.read()
    assert err.value.kind == "config" and not live._pending


async def test_only_a_widget_whose_view_reached_its_notebook_is_the_live_backend():
    agent = Agent(model=ScriptedProvider([text_call("ok")]))
    widget = ChatWidget(agent)
    before = current_live_backend()
    assert before is None or before.widget is not widget
    deliver_raw(widget, {"type": "notebook", "host": True})  # what a view in JupyterLab sends
    assert current_live_backend().widget is widget
    widget.close()
    assert current_live_backend() is None or current_live_backend().widget is not widget  # closed: not any more


async def test_insert_as_cell_below_gets_provenance_for_the_calls_turn():
    provider = ScriptedProvider([tool_call(("call_1", "echo", {"x": 1})), text_call("done")])

    def echo(x: int) -> int:
        """Echo."""
        return x

    agent = Agent(model=provider, tools=[echo])
    await agent.conversation.chat_to_completion("go")
    widget = ChatWidget(agent)
    sent = []
    widget.send = sent.append
    deliver_raw(widget, {"type": "provenance", "id": "r1", "call_id": "call_1", "source": "x = 1"})
    (answer,) = sent
    (action,) = answer["metadata"]["nbagent"]["actions"]
    assert answer["id"] == "r1" and action["action"] == "inserted" and action["turn"] == 0
    assert action["call_id"] == "call_1" and action["approved_by"] == "user" and action["code_sha256"] == code_hash("x = 1")
    assert action["session_id"] == agent.conversation.conversation_id and action["model"] == "scripted-1"


async def test_undo_from_a_card_answers_with_what_the_conversation_said():
    agent = Agent(model=ScriptedProvider([text_call("ok")]))
    widget = ChatWidget(agent)
    sent = []
    widget.send = sent.append
    deliver_raw(widget, {"type": "undo", "id": "u1", "call_id": "nope"})
    while not sent:
        await asyncio.sleep(0.01)
    assert sent[0]["id"] == "u1" and sent[0]["ok"] is False and sent[0]["text"]  # never silent


def test_cells_the_box_sent_are_attached_to_the_prompt():
    prompt, refs = attach_cells("why does @cell:2 fail?", [
        {"ref": "@cell:2", "id": "b", "number": 2, "cell_type": "code", "source": "1 / 0", "execution_count": 3,
         "outputs": "ZeroDivisionError: division by zero"},
        {"ref": "@cell:9", "error": "there is no cell 9 (the notebook has 3)"}])
    assert refs == ["@cell:2", "@cell:9"]
    assert prompt == ("why does @cell:2 fail?\n\n[Attached notebook cells: @cell:2, @cell:9]\n"
                      "--- @cell:2: cell 2 (id b, code, In [3]) ---\n```python\n1 / 0\n```\n[outputs]\n"
                      "```\nZeroDivisionError: division by zero\n```\n--- @cell:9 ---\n(not attached: there is no cell 9 "
                      "(the notebook has 3))")
    assert attach_cells("no refs", None) == ("no refs", [])


async def test_a_send_with_cells_puts_them_in_the_prompt():
    provider = ScriptedProvider([text_call("ok")])
    agent = Agent(model=provider)
    widget = ChatWidget(agent)
    deliver_raw(widget, {"type": "send", "prompt": "fix @cell", "cells": [
        {"ref": "@cell", "id": "b", "number": 2, "cell_type": "code", "source": "1 / 0", "outputs": ""}]})
    while widget.prompts.task is None or not widget.prompts.task.done():
        await asyncio.sleep(0.01)
    assert agent.conversation.turns[-1].prompt.startswith("fix @cell\n\n[Attached notebook cells: @cell]\n--- @cell: cell 2")


# --- nbagent.provenance(path) ----------------------------------------------------------------------


def test_provenance_lists_every_recorded_action_of_a_saved_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    inserted = CellAction(CellActionKind.INSERTED, session_id="s1", turn=2, model="demo", call_id="call_7",
                          approved_by="user", code_sha256=code_hash("x = 1"), at=1_700_000_000.0)
    edited = CellAction(CellActionKind.EDITED, session_id="s1", turn=3, model="demo", call_id="call_9",
                        approved_by="user", code_sha256=code_hash("y = 2"), at=1_700_000_100.0)
    nb.cells = [nbformat.v4.new_code_cell("print('mine')"),
                nbformat.v4.new_code_cell("x = 1", metadata=with_action({}, inserted)),
                nbformat.v4.new_code_cell("y = 3  # the user's change", metadata=with_action(with_action({}, inserted), edited)),
                nbformat.v4.new_code_cell("%%chat_run call=call_demo_5 turn=1 sha=abc\n# run by the agent (turn 1, call_demo_5)\nz = 1")]
    path = tmp_path / "work.ipynb"
    nbformat.write(nb, str(path))
    df = nbagent.provenance(path)
    assert list(df["position"]) == [2, 3, 3, 4] and list(df["action"]) == ["inserted", "inserted", "edited", "inserted"]
    assert list(df["cell_id"])[:3] == [nb.cells[1].id, nb.cells[2].id, nb.cells[2].id]
    assert list(df["turn"]) == [2, 2, 3, 0] and list(df["call_id"]) == ["call_7", "call_7", "call_9", "call_demo_5"]
    assert list(df["source_matches"]) == [True, False, False, True]  # the user edited cell 3 since
    assert df["session_id"].iloc[0] == "s1" and df["model"].iloc[0] == "demo" and df["approved_by"].iloc[3] == "%chat_code"
    assert str(df["at"].iloc[0]) == "2023-11-14 22:13:20+00:00" and df["at"].isna().iloc[3]


def test_provenance_of_old_notebooks_and_bad_paths(tmp_path):
    old = tmp_path / "old.ipynb"  # nbformat 4.4: no cell ids
    action = CellAction(CellActionKind.RAN, turn=0, code_sha256=code_hash("1"), at=0.0)
    old.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 4, "metadata": {}, "cells": [
        {"cell_type": "code", "source": ["1"], "metadata": with_action({}, action), "outputs": [], "execution_count": None}]}))
    assert list(nbagent.provenance(old)["cell_id"]) == ["cell-1"]
    assert nbagent.provenance(tmp_path / "old.ipynb")["action"].iloc[0] == "ran"
    with pytest.raises(NbagentError, match="no notebook at") as missing:
        nbagent.provenance(tmp_path / "none.ipynb")
    assert missing.value.kind == "io"
    (tmp_path / "bad.ipynb").write_text("{not json")
    with pytest.raises(NbagentError, match="cannot be read as a notebook"):
        nbagent.provenance(tmp_path / "bad.ipynb")
    with pytest.raises(NbagentError, match="is not a notebook") as wrong:
        nbagent.provenance(tmp_path / "notes.txt")
    assert wrong.value.kind == "config"
    empty = tmp_path / "empty.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), str(empty))
    assert nbagent.provenance(empty).empty and "call_id" in nbagent.provenance(empty).columns


def test_the_live_notebook_messages_are_declared_in_the_protocol():
    assert {"notebook", "provenance", "undo"} <= set(CHAT.requests) and {"notebook", "provenance", "undo"} <= set(CHAT.events)


async def test_a_run_the_page_never_answers_says_the_cell_may_still_run_there_and_is_not_run_again():
    live = LiveNotebook(Widget(), timeout=0.1)
    with pytest.raises(NbagentError, match="may still be running there") as err:
        await live.run("b", expected_source="x", timeout=0.1)
    assert err.value.kind == "tool" and "not run again in the kernel" in str(err.value) and not live._pending
