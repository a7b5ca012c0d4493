"""The kernel-side calls a session browser or a chat's History makes (``nbagent.session_folder``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbagent import Agent, NbagentError, list_sessions
from nbagent.session_folder import (
    TRASH,
    export_session,
    restore_session,
    resume_session,
    session_transcript,
    session_usage,
    trash_session,
)


def two_chats(folder: Path) -> tuple[Path, Path]:
    a = Agent(model="demo", delay=0, save_to=folder, user="ann")
    a.ask("First <script>alert(1)</script> chat")
    b = Agent(model="demo", delay=0, save_to=folder, user="ben")
    b.ask("Second chat")
    b.ask("More")
    return a.session_path, b.session_path


def test_read_export_resume(tmp_path):
    first, second = two_chats(tmp_path)
    md = session_transcript(first)
    assert "First" in md and "<script>" not in md  # escaped, like the widget's transcript
    assert session_transcript(first, "html").startswith("<!DOCTYPE html>")
    assert session_usage(second)["prompt"].tolist() == ["Second chat", "More"]
    out = export_session(second)
    assert out == second.with_suffix(".md") and "More" in out.read_text()
    page = export_session(second, tmp_path / "out" / "x.html")
    assert page.read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(NbagentError) as err:
        export_session(second, fmt="pdf")
    assert err.value.kind == "config"
    agent = resume_session(second)
    assert agent.user == "ben" and agent.conversation.turn_count == 2
    agent.ask("Third")
    assert list_sessions(tmp_path).set_index("user").loc["ben", "turns"] == 3


def test_trash_and_restore(tmp_path):
    first, second = two_chats(tmp_path)
    trashed = trash_session(first)
    assert trashed.parent == tmp_path / TRASH and not first.exists()
    assert list_sessions(tmp_path)["user"].tolist() == ["ben"]  # the trash is not listed
    assert restore_session(trashed) == first and first.exists()
    again = trash_session(first)
    first.write_text(again.read_text())  # a file of that name came back meanwhile
    third = trash_session(first)
    assert third != again and third.parent == again.parent  # never overwritten
    with pytest.raises(NbagentError):
        restore_session(second)  # not in a trash folder
    with pytest.raises(NbagentError):
        trash_session(tmp_path / "missing.json")


def test_history_switches_an_agent_to_another_saved_conversation(tmp_path):
    first, _ = two_chats(tmp_path)
    agent = Agent(model="demo", delay=0, save_to=tmp_path)
    agent.ask("A new one")
    conv = agent.open_session(first)
    assert agent.conversation is conv and conv.turn_count == 1 and agent.session_path == first
    agent.ask("Back to the first")
    assert list_sessions(tmp_path).set_index("title").loc["First <script>alert(1)</script> chat", "turns"] == 2
    assert len(list(tmp_path.glob("*.json"))) == 3  # the new one kept its own file
