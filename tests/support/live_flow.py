"""The live notebook in a real browser (tests/test_live_notebook_browser.py runs it in JupyterLab 4
and Notebook 7): the kernel reads and edits the notebook open in the page through the chat widget
(nbagent/notebook/live_notebook.py + js/src/live.js), through the backend's protocol methods.

The notebook: cell 1 shows a chat widget, cell 2 raises ZeroDivisionError, cell 3 is the scratch
cell the test runs kernel code in. The user types an unsaved edit into cell 2; the kernel's read
has it and the traceback; an edit naming the source it read changes the live cell and marks it
"written by the agent, turn 1"; putting the old source back (what Undo does) restores it; a cell
the user edited after the read is refused and keeps the user's text; the provenance metadata is in
the saved file (``nbagent.provenance``) and is still there after the notebook is closed and
reopened. A kernel blocked in a cell cannot hear the page: a request from there is a clear error.
"""

from __future__ import annotations

import json

from playwright.sync_api import expect

from support.jupyter import run_cell

NOTEBOOK = "live.ipynb"
AGENT_CELL = ("import asyncio\n"
              "from nbagent import Agent\n"
              "from nbagent.notebook.live_notebook import LiveNotebook, current_live_backend\n"
              "from nbagent.notebook.provenance import CellAction, CellActionKind, code_hash, with_action\n"
              "agent = Agent(model='demo')\n"
              "agent")
ERROR_CELL = "x = 1 / 0"
CELLS = [AGENT_CELL, ERROR_CELL, "print('scratch')"]
SCRATCH = 2
FIXED = "x = 1 / 1  # fixed by the agent"
LONG = 120_000


def cell(page, nb, index):
    return page.locator(f"{nb} .jp-Notebook .jp-Cell").nth(index)


def kernel(page, nb, code: str) -> str:
    """Run ``code`` in the scratch cell (as the user would run a cell); its output text."""
    page.evaluate("""([i, code]) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i)
        .sharedModel.setSource(code)""", [SCRATCH, code])
    run_cell(page, SCRATCH)
    out = cell(page, nb, SCRATCH).locator(".jp-OutputArea-output")
    return "\n".join(out.all_inner_texts())


def kernel_await(page, nb, expression: str) -> str:
    """Start ``expression`` (a coroutine) as a task on the kernel's loop, the cell ending at once
    (the page's answers reach the kernel between cells), then run cells until it is done; what
    ``report`` printed (``_r``: its result, or the exception)."""
    kernel(page, nb, f"_t = asyncio.ensure_future({expression})")
    for _ in range(200):  # each check is a cell run: the kernel takes the page's answer in between
        text = kernel(page, nb, "print('done' if _t.done() else 'waiting')")
        if "done" in text:
            break
    return kernel(page, nb, "_r = _t.exception() or _t.result()\n"
                            "print(f'{type(_r).__name__}: {_r}' if isinstance(_r, Exception) else 'ok')")


def type_at_end(page, nb, index: int, text: str) -> None:
    """Type into a cell's editor as a user does (not saved)."""
    editor = cell(page, nb, index).locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.type(text)


def model_source(page, index: int) -> str:
    return page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i).sharedModel.getSource()",
                         index)


def live_flow(page, nb, root, label: str) -> None:
    expect.set_options(timeout=LONG)
    try:
        _flow(page, nb, root)
    finally:
        expect.set_options(timeout=5_000)


def _flow(page, nb, root) -> None:
    run_cell(page, 0)
    expect(page.locator(f"{nb} .nba-chat")).to_be_visible()
    assert "True" in kernel(page, nb, "live = current_live_backend()\nprint(live is not None)")  # the view said so
    run_cell(page, 1)
    expect(cell(page, nb, 1).locator(".jp-OutputArea-output")).to_contain_text("ZeroDivisionError")
    type_at_end(page, nb, 1, "  # unsaved")
    assert model_source(page, 1) == ERROR_CELL + "  # unsaved"

    # the read: every cell by id, the unsaved edit and the traceback, the chat's cell
    assert kernel_await(page, nb, "live.read()").strip().endswith("ok")
    text = kernel(page, nb, "s = _r; c = s.cells[1]\n"
                            "print(str(s.source), len(s.cells), s.chat_cell_id == s.cells[0].id)\n"
                            "print(repr(c.source)); print(c.outputs[0]['ename'], c.execution_count)")
    assert "live 3 True" in text and repr(ERROR_CELL + "  # unsaved") in text and "ZeroDivisionError 3" in text, text  # In [3]: cell 1, the scratch cell, then it

    # an edit naming the source it read lands on the live cell, with its provenance
    meta = ("with_action(c.metadata, CellAction(CellActionKind.EDITED, session_id='s1', turn=0, model='demo', "
            f"call_id='call_fix', approved_by='user', code_sha256=code_hash({FIXED!r})))")
    assert kernel_await(page, nb, f"live.set_source(c.id, {FIXED!r}, expected_source=c.source, metadata={meta})"
                        ).strip().endswith("ok")
    expect(cell(page, nb, 1).locator(".cm-content")).to_have_text(FIXED, use_inner_text=True)
    expect(cell(page, nb, 1)).to_have_attribute("data-nba-agent", "written by the agent, turn 1")

    # a cell the user edited after the read is refused, and keeps the user's text
    type_at_end(page, nb, 1, "  # mine")
    refused = kernel_await(page, nb, f"live.set_source(c.id, 'x = 2', expected_source={FIXED!r})")
    assert "changed since it was read" in refused, refused
    assert model_source(page, 1) == FIXED + "  # mine"

    # Undo: the source before the edit, put back by the same call (conv.undo does this)
    assert kernel_await(page, nb, f"live.set_source(c.id, c.source, expected_source={FIXED + '  # mine'!r})"
                        ).strip().endswith("ok")
    expect(cell(page, nb, 1).locator(".cm-content")).to_have_text(ERROR_CELL + "  # unsaved", use_inner_text=True)
    assert kernel_await(page, nb, f"live.set_source(c.id, {FIXED!r}, expected_source=c.source, metadata={meta})"
                        ).strip().endswith("ok")  # and the fix again, to be saved

    # saved, closed and reopened: the provenance is in the file and in the notebook's model
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    saved = json.loads((root / NOTEBOOK).read_text())
    assert saved["cells"][1]["metadata"]["nbagent"]["actions"][0]["call_id"] == "call_fix"
    text = kernel(page, nb, f"import nbagent\ndf = nbagent.provenance({str(root / NOTEBOOK)!r})\n"
                            "print(df[['position', 'action', 'turn', 'call_id', 'source_matches']].to_dict('records'))")
    assert "{'position': 2, 'action': 'edited', 'turn': 0, 'call_id': 'call_fix', 'source_matches': True}" in text

    # a cell awaiting the read: ipykernel 7 hears the page meanwhile (6 does not: then the error below)
    text = kernel(page, nb, "try:\n    await LiveNotebook(live.widget, timeout=1).read()\n    print('answered')\n"
                            "except Exception as e:\n    print(type(e).__name__, e)")
    assert "answered" in text or "did not answer within 1 s" in text, text
    # a cell blocked in a call (a blocking conv.ask()) cannot hear it: a clear error in time, not a hang
    text = kernel(page, nb, "import threading\nbox = {}\n"
                            "def ask():\n    try:\n        asyncio.run(LiveNotebook(live.widget, timeout=1).read())\n"
                            "    except Exception as e:\n        box['e'] = e\n"
                            "t = threading.Thread(target=ask); t.start(); t.join()\n"
                            "print(type(box.get('e')).__name__, box.get('e'))")
    assert "NoLiveView [config] the live notebook did not answer within 1 s" in text, text


def reopened_keeps_provenance(page, nb_selector_after_reopen, root) -> None:  # noqa: ARG001
    """After close and reopen: the model has the record; run the chat's cell and the label shows."""
    nb = nb_selector_after_reopen
    actions = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1)"
                            ".sharedModel.getMetadata().nbagent.actions")
    assert [a["call_id"] for a in actions] == ["call_fix"]
    run_cell(page, 0)
    expect(page.locator(f"{nb} .nba-chat")).to_be_visible(timeout=LONG)
    expect(cell(page, nb, 1)).to_have_attribute("data-nba-agent", "written by the agent, turn 1", timeout=LONG)
