"""The widget's saved transcript in a real kernel: a long chat driven from the widget's box (as a
browser does, over its comm) keeps every turn in the cell's outputs, and what a turn costs on the
wire does not grow with the conversation (bytes, not times). See tests/support/kernel_chat.py for
the front end's rules the outputs follow."""

from __future__ import annotations

import json

import pytest

from support.kernel_chat import KernelChat, answer_text

pytestmark = pytest.mark.notebook  # a real kernel

pytest.importorskip("ipykernel")
pytest.importorskip("anywidget")

TURNS, WORDS = 24, 1_500  # about 250 KB of answers: beyond the old 200 KB cap


def test_a_long_chat_keeps_every_turn_and_each_turn_costs_the_same():
    answers = [answer_text(i, WORDS) for i in range(TURNS)]
    with KernelChat(answers) as chat:
        costs = [chat.turn(f"question {i}") for i in range(TURNS)]
        saved = chat.outputs.markdown(chat.cell)
        assert sum(len(a) for a in answers) > 200_000
        missing = [i for i in range(TURNS) if f"begin{i:03d}" not in saved or f"end{i:03d}" not in saved]
        assert not missing  # the first turn too
        assert all(f"question {i}" in saved for i in range(TURNS))
        display = [c.display for c in costs]
        assert max(display) <= 1.05 * min(display)  # the last turn's transcript costs what the first's did
        assert display[0] <= 1.2 * len(answers[0].encode())  # each turn's text goes out once
        # clearing the history blanks the old outputs (from another cell, by display id)
        chat.execute("agent.conversation.clear_history()")
        saved = chat.outputs.markdown(chat.cell)
        assert "begin000" not in saved and "question" not in saved and "saved transcript" in saved


def test_in_a_long_chat_the_widget_comm_carries_each_answer_once():
    """Finished turns are not traits: the comm carries each answer's text once (as deltas), and a
    late turn costs what an early one does (the old trait levels re-sent turns as they merged)."""
    answers = [answer_text(i, 400) for i in range(33)]
    with KernelChat(answers) as chat:
        costs = [chat.turn(f"question {i}") for i in range(33)]
        wire = "".join(chat.comm_log)
    assert [i for i in range(33) if wire.count(f"end{i:03d}") != 1] == []
    comm = [c.comm for c in costs]
    assert comm[32] <= 2 * comm[2], comm
    assert sum(comm) <= 2 * sum(len(a.encode()) for a in answers)


def test_a_turn_asked_from_another_cell_is_saved_in_that_cell_once():
    """Headless runners (nbclient: nbconvert --execute, papermill) keep only the running cell's
    outputs, so a turn asked from code goes to the asking cell, marked with the widget's key (a
    live chat hides it); a turn from the widget's box still goes to the widget's cell."""
    answers = [answer_text(i, 30) for i in range(2)]
    with KernelChat(answers) as chat:
        asking = chat.execute('agent.conversation.ask("from code")')
        chat.turn("from the box")
        there, widget_cell = chat.outputs.markdown(asking), chat.outputs.markdown(chat.cell)
    assert "from code" in there and "end000" in there and "nbagent-of-" in there
    assert "from code" not in widget_cell and "end000" not in widget_cell  # saved once
    assert "from the box" in widget_cell and "end001" in widget_cell and "nbagent-of-" not in widget_cell


def test_a_turn_from_the_box_answered_at_once_is_running_then_two_flushes():
    """The view that sent the prompt shows it itself; the kernel says ``running`` at once, alone (no
    unchanged gauge); the turn's first flush carries the prompt's echo and the model's first text, its
    end the rest of the text, the turn's end and ``running`` false. (A long flush window here: the
    model's first text, not the window, opens the first flush, however slow the machine.)"""
    answers = [answer_text(i, 400) for i in range(3)]
    with KernelChat(answers) as chat:
        chat.execute("import nbagent.notebook.widget as _w; _w.FLUSH_INTERVAL = 2.0")
        for i in range(3):
            before = len(chat.comm_log)
            chat.turn(f"question {i}")
            messages = [json.loads(m)["data"] for m in chat.comm_log[before:]]
            assert [m["method"] for m in messages] == ["update", "custom", "custom"], messages
            assert messages[0]["state"] == {"running": True}
            start, end = (m["content"] for m in messages[1:])
            assert "state" not in start and start["items"][0][3] == f"question {i}" and f"begin{i:03d}" in start["items"][1][3]
            assert end["state"]["running"] is False and end["patches"][-1]["ended"] is True
            assert end["items"][-1][3].endswith(f"end{i:03d} ")
