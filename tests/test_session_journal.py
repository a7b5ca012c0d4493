"""The autosave journal: a turn is a line appended beside the session file, and every reader of
session files sees the same conversation a whole save would have written, a crash's torn line
dropped with a warning and nothing else lost."""

from __future__ import annotations

import json
import shutil
import warnings

import pytest
from support.scripted import ScriptedProvider, text_call, tool_call

import nbagent
from nbagent import Agent, Conversation, tool
from nbagent.core.session_file import read_session_head, read_steps, save_conversation
from nbagent.core.session_journal import journal_path
from nbagent.core.conversation_state import plumbing_of


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def script(turns: int) -> list:
    """Even turns call the tool, then answer; odd turns answer at once."""
    out: list = []
    for i in range(turns):
        if i % 2 == 0:
            out.append(tool_call((f"call_{i}", "lookup", {"key": f"k{i}"})))
        out.append(text_call(f"answer {i} with several words", thinking="hmm" if i % 3 == 0 else ""))
    return out


def document(state, tmp_path) -> dict:
    """What a whole save writes for ``state``, without its time of writing."""
    path = save_conversation(state, tmp_path / "compare" / "doc.json")
    doc = json.loads(path.read_text())
    doc.pop("saved_at")
    return doc


def chatted(tmp_path, turns: int, **options):
    """An agent saving into tmp_path/s after ``turns`` turns, and the document after each turn."""
    agent = Agent(model=ScriptedProvider(script(turns)), tools=[lookup], save_to=tmp_path / "s", **options)
    after: list[dict] = []
    for i in range(turns):
        agent.ask(f"question {i}")
        after.append(document(plumbing_of(agent.conversation).to_state(), tmp_path))
    return agent, after


def test_a_journaled_session_reloads_identically_in_every_reader(tmp_path):
    agent, after = chatted(tmp_path, 9, max_history_size=12)  # a short history: trimming happens too
    path = agent.session_path
    assert agent.autosave_status.saving and agent._autosave.journal.appends >= 7  # lines, not rewrites
    assert journal_path(path).exists() and len(json.loads(path.read_text())["turns"]) < 9  # the file alone is behind
    loaded = Conversation.load(path)
    assert document(plumbing_of(loaded).to_state(), tmp_path) == after[-1]
    assert [t.prompt for t in read_session_head(path).turns] == [f"question {i}" for i in range(9)]
    assert len(read_steps(path)[1]) == len(agent.conversation.history)
    assert nbagent.load_sessions(path)["turn"].tolist() == list(range(9))
    assert nbagent.list_sessions(tmp_path / "s")["turns"].tolist() == [9]
    from nbagent.notebook.session_browser import session_turns

    assert [t["record"]["prompt"] for t in session_turns(path)[0]][-1] == "question 8"  # the session browser
    # resumed: the same conversation, and its first save folds the journal into the file
    again = Agent.load(path, tools=[lookup], model=ScriptedProvider(script(1)))
    assert document(plumbing_of(again.conversation).to_state(), tmp_path) == after[-1]
    del agent
    again.ask("one more")
    assert not journal_path(path).exists() and len(json.loads(path.read_text())["turns"]) == 10


def test_a_wire_message_replaced_by_hand_far_back_reaches_the_saved_file(tmp_path):
    from nbagent.core.messages import Message, TextPart

    agent, _ = chatted(tmp_path, 12)
    messages = agent.conversation.connection.session.messages
    assert len(messages) > 20  # the message edited is far before the few an entry checks
    messages[2] = Message("user", [TextPart("replaced by hand")])
    agent.provider.script += script(1)
    agent.ask("after the edit")
    loaded = Agent.load(agent.session_path, tools=[lookup], model=ScriptedProvider(script(1)))
    assert loaded.conversation.connection.session.messages[2].text == "replaced by hand"  # was: the old one
    assert loaded.conversation.connection.session.messages == messages


def test_letting_the_file_go_folds_the_journal_in(tmp_path):
    agent, after = chatted(tmp_path, 4)
    path = agent.session_path
    assert journal_path(path).exists()
    agent.session_path = None  # released (a new chat, another file, the end of the process)
    assert not journal_path(path).exists()
    doc = json.loads(path.read_text())
    doc.pop("saved_at")
    assert doc["turns"] == after[-1]["turns"] and doc["steps"] == after[-1]["steps"]


def test_a_torn_last_line_is_dropped_with_a_warning_and_nothing_else_is_lost(tmp_path):
    agent, after = chatted(tmp_path, 6)
    path = agent.session_path
    journal = journal_path(path)
    whole = journal.read_bytes()
    agent._autosave.journal.forget()  # a crashed writer: nothing folds the journal in
    # a crash while appending the last turn: half its line reached the disk
    last_start = whole.rstrip(b"\n").rfind(b"\n") + 1
    journal.write_bytes(whole[: last_start + (len(whole) - last_start) // 2])
    with pytest.warns(RuntimeWarning, match="cut short"):
        loaded = Conversation.load(path)
    assert document(plumbing_of(loaded).to_state(), tmp_path) == after[-2]  # every complete turn, the torn one dropped
    with pytest.warns(RuntimeWarning, match="cut short"):
        assert len(read_session_head(path).turns) == 5
    # garbage after complete lines: the same, and a damaged line in the middle ends the entries there
    journal.write_bytes(whole + b'{"conversation_id": "x", "tu')
    with pytest.warns(RuntimeWarning, match="cut short"):
        assert document(plumbing_of(Conversation.load(path)).to_state(), tmp_path) == after[-1]
    lines = whole.split(b"\n")
    lines[3] = b"{not json"
    journal.write_bytes(b"\n".join(lines))
    with pytest.warns(RuntimeWarning, match="line 4 is damaged"):
        assert len(read_session_head(path).turns) == len(json.loads(path.read_text())["turns"]) + 2


def test_a_journal_of_an_earlier_file_state_is_ignored(tmp_path):
    """A rewrite that crashed after renaming the new file but before removing the journal."""
    agent, after = chatted(tmp_path, 4)
    path = agent.session_path
    stale = tmp_path / "stale.journal"
    shutil.copy(journal_path(path), stale)
    agent.save(path)  # a whole save: the journal is folded in and removed
    assert not journal_path(path).exists()
    shutil.copy(stale, journal_path(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert document(plumbing_of(Conversation.load(path)).to_state(), tmp_path) == after[-1]


def test_a_file_written_by_someone_else_meanwhile_is_rewritten_not_journaled(tmp_path):
    agent, after = chatted(tmp_path, 3)
    path = agent.session_path
    Conversation.load(path).save(path)  # another save of the same file (no lock: Conversation.save)
    rewrites = agent._autosave.journal.rewrites
    agent.conversation.connection.provider = ScriptedProvider([text_call("fine")])
    agent.ask("after")
    assert agent._autosave.journal.rewrites == rewrites + 1  # the next save wrote the whole file again
    assert [t.prompt for t in read_session_head(path).turns][-1] == "after"


def test_a_journal_entry_that_does_not_fit_is_an_error_in_no_reader(tmp_path):
    agent, _ = chatted(tmp_path, 3)
    path = agent.session_path
    agent._autosave.journal.forget()
    lines = journal_path(path).read_bytes().split(b"\n")
    entry = json.loads(lines[1])
    entry["steps_at"] = 10_000  # a gap: the steps before it are missing
    journal_path(path).write_bytes(b"\n".join([lines[0], json.dumps(entry).encode(), b""]))
    with pytest.warns(RuntimeWarning, match="does not fit"):
        conv = Conversation.load(path)
    assert conv.turn_count == len(json.loads(path.read_text())["turns"])  # the file's own turns


def test_trash_and_restore_move_the_journal_with_the_file(tmp_path):
    from nbagent.session_folder import restore_session, trash_session

    agent, after = chatted(tmp_path, 3)
    path = agent.session_path
    agent._autosave.journal.forget()  # (a crashed writer: the journal stays beside the file)
    trashed = trash_session(path)
    assert not journal_path(path).exists() and journal_path(trashed).exists()
    back = restore_session(trashed)
    assert document(plumbing_of(Conversation.load(back)).to_state(), tmp_path) == after[-1]
