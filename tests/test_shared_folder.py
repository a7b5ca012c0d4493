"""A course's shared ``save_to`` folder under attack by one of the students who can write it: hostile
files planted beside other students' sessions (a FIFO, a link to ``/dev/zero``, a link out of the
folder) hang no one's turn and no teacher's summary, and reach no model's prompt. Real files, real
Agents with the demo model; a reader that could hang or eat memory on old code runs in a child
process with a time limit and a memory cap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from datetime import datetime
from pathlib import Path

import pytest
from support.scripted import ScriptedProvider, text_call

from nbagent import Agent, Conversation, class_summary, list_sessions
from nbagent.core.errors import BudgetExceeded
from nbagent.core.errors import ConfigError
from nbagent.core.session_file import read_session_head
from nbagent.core.session_journal import journal_path
from nbagent.core.session_lock import SessionLock, lock_holder, lock_path

MONDAY_10 = datetime(2026, 12, 7, 10, 0)

COURSE_IN_A_CHILD = r"""
import json, resource, sys, warnings
from datetime import datetime
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # /dev/zero read whole: a MemoryError, not a dead machine
warnings.simplefilter("ignore")
import os
os.chdir(sys.argv[1])
from nbagent import Agent, Conversation, class_summary
monday = datetime(2026, 12, 7, 10, 0)
os.environ["JUPYTERHUB_USER"] = "ann"
ann = Agent(model="demo", delay=0)
ann.course.limits.clock = lambda: monday
out = {"spent": ann.course.limits.status().spent_usd}
df = class_summary(sys.argv[2], now=monday.timestamp())
out["users"] = sorted(df["user"])
out["bob_turns"] = int(df.set_index("user").loc["bob", "turns"])
out["loaded"] = [Conversation.load(p).turn_count for p in sys.argv[3:]]
print(json.dumps(out))
"""


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A course folder with a budget and a shared sessions folder; the working folder is a student's."""
    monkeypatch.delenv("NBAGENT_CONFIG", raising=False)
    monkeypatch.delenv("NBAGENT_MODEL", raising=False)
    monkeypatch.setenv("JUPYTERHUB_USER", "")  # "" says no one; restored after the test (``saved`` sets it)
    root = tmp_path / "course"
    (root / "week1").mkdir(parents=True)
    (root / "nbagent.toml").write_text('[policy]\nbudget_usd = 1.0\nsave_to = "sessions"\n', encoding="utf-8")
    monkeypatch.chdir(root / "week1")
    return root


def saved(user: str, prompt_tokens: int = 1_000_000, turns: int = 1) -> Path:
    """A session of ``user`` under the course, saved with ``turns`` turns, the first priced ($0.40 a
    million input tokens of openai:gpt-4.1-mini) and started on MONDAY_10."""
    os.environ["JUPYTERHUB_USER"] = user  # under a policy the person is not an argument (the fixture restores it)
    agent = Agent(model="demo", delay=0)
    agent.course.limits.clock = lambda: MONDAY_10
    for i in range(turns):
        agent.ask(f"question {i}")
    record = agent.conversation.turns[0]
    record.model, record.provider, record.started_at = "gpt-4.1-mini", "openai", MONDAY_10.timestamp()
    record.usage.prompt_token_count = prompt_tokens
    return agent.save()


def plant(path: Path, case: str) -> None:
    if case == "fifo":
        os.mkfifo(path)  # a blocking open waits for a writer forever
    elif case == "dev-zero":
        path.symlink_to("/dev/zero")  # endless zeros: a read to the end never ends
    elif case == "directory":
        path.mkdir()


# --- item 1: one student hangs the class -----------------------------------------------------


@pytest.mark.timeout(120)
def test_hostile_journals_beside_another_students_sessions_hang_no_turn_and_no_class_summary(course):
    saved("ann")  # $0.40
    bobs = {case: saved("bob") for case in ("fifo", "dev-zero", "directory")}
    for case, path in bobs.items():
        journal_path(path).unlink(missing_ok=True)
        plant(journal_path(path), case)
    child = subprocess.run([sys.executable, "-c", COURSE_IN_A_CHILD, str(course / "week1"), str(course / "sessions"),
                            *map(str, bobs.values())], capture_output=True, text=True, timeout=90,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.returncode == 0, child.stderr[-2000:]
    out = json.loads(child.stdout.strip().splitlines()[-1])
    assert out["spent"] == pytest.approx(0.4, abs=0.001)  # ann's turn is checked, and goes on
    assert out["users"] == ["ann", "bob"] and out["bob_turns"] == 3  # the files count; the planted journals do not
    assert out["loaded"] == [1, 1, 1]


@pytest.mark.timeout(20)
def test_a_planted_journal_is_ignored_with_a_warning_naming_why(course, monkeypatch):
    path = saved("bob")
    journal_path(path).unlink(missing_ok=True)
    plant(journal_path(path), "fifo")
    with pytest.warns(RuntimeWarning, match="journal beside .* is ignored.*not a regular file"):
        assert len(read_session_head(path).turns) == 1
    journal_path(path).unlink()
    outside = course / "elsewhere.journal"
    outside.write_text("{}\n", encoding="utf-8")
    journal_path(path).symlink_to(outside)
    with pytest.warns(RuntimeWarning, match="symbolic link"):
        assert Conversation.load(path).turn_count == 1
    journal_path(path).unlink()
    with open(journal_path(path), "wb") as f:
        f.truncate(64 << 20)  # sparse: 64 MB of zeros that take no disk
    monkeypatch.setattr("nbagent.core.chat_session.MAX_FILE_BYTES", 1 << 20)  # the session files' bound, lowered
    with pytest.warns(RuntimeWarning, match="over the 1,048,576 bytes"):
        assert len(read_session_head(path).turns) == 1


@pytest.mark.timeout(20)
def test_a_journal_link_planted_before_the_next_turn_is_never_written_through(course):
    victim = course / "victim.txt"
    victim.write_text("mine\n", encoding="utf-8")
    agent = Agent(model=ScriptedProvider([text_call("one"), text_call("two"), text_call("three")]),
                  save_to=course / "sessions")
    agent.ask("first")  # the file is written whole; the next turn appends to its journal
    journal_path(agent.session_path).symlink_to(victim)
    with pytest.warns(RuntimeWarning):
        agent.ask("second")
    assert victim.read_text(encoding="utf-8") == "mine\n"
    journal_path(agent.session_path).unlink()
    os.mkfifo(journal_path(agent.session_path))  # a FIFO with no reader: an open to write would wait forever
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent.ask("third")
    assert [t.prompt for t in Conversation.load(agent.session_path).turns] == ["first", "second", "third"]


@pytest.mark.timeout(20)
def test_a_planted_lock_file_hangs_nothing_and_is_never_written_through(tmp_path):
    session = tmp_path / "s.json"
    os.mkfifo(lock_path(session))
    assert lock_holder(session).pid == 0  # read without waiting for a writer
    lock_path(session).unlink()
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n", encoding="utf-8")
    lock_path(session).symlink_to(victim)
    with pytest.raises(OSError):
        SessionLock.acquire(session)  # Unlockable: the caller goes on unlocked and says so
    assert victim.read_text(encoding="utf-8") == "mine\n"


@pytest.mark.timeout(20)
def test_a_planted_session_index_hangs_no_listing(course):
    saved("ann")
    index = course / "sessions" / ".nbagent-sessions.index"
    index.unlink(missing_ok=True)
    os.mkfifo(index)
    assert list_sessions(course / "sessions")["user"].tolist() == ["ann"]


@pytest.mark.timeout(20)
def test_a_policy_file_replaced_by_a_fifo_keeps_the_last_policy_and_hangs_no_turn(course):
    agent = Agent(model="demo", delay=0)
    policy = course / "nbagent.toml"
    policy.unlink()
    os.mkfifo(policy)
    assert agent.ask("still here").text and agent.course.policy.budget_usd == 1.0


# --- items 3 and 4: whose budget a session spends --------------------------------------------


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="a file of another login needs root")
def test_a_session_forged_by_another_login_spends_nothing_of_the_students_budget(course):
    saved("bob", prompt_tokens=100_000)  # bob's own: $0.04
    forged = saved("bob", prompt_tokens=2_500_000_000)  # another login writes "user": "bob", $1,000
    for path in (forged, journal_path(forged)):
        if path.exists():
            os.chown(path, 4242, 4242)
    (course / "sessions" / "again.json").symlink_to(forged.parent / sorted(p.name for p in forged.parent.glob("*.json")
                                                                          if p != forged)[0])
    os.lchown(course / "sessions" / "again.json", 4242, 4242)  # bob's own file again, through another login's link
    bob = Agent(model="demo", delay=0)
    bob.course.limits.clock = lambda: MONDAY_10
    assert bob.course.limits.status().spent_usd == pytest.approx(0.04, abs=0.001)
    assert bob.ask("my turn").text  # was: "over the course budget: spent $1,000.00 of $1.00"
    df = class_summary(course / "sessions", now=MONDAY_10.timestamp())
    row = df.set_index("user").loc["bob"]
    assert row["sessions"] == 2 and row["cost_usd"] < 1  # bob's two, not the forged one
    assert "uid 4242" in df.attrs["skipped"][str(forged)]  # named, not silently counted


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="files have owners on POSIX")
def test_a_budget_counts_only_the_sessions_its_own_login_wrote(course):
    from nbagent.analysis.class_summary import ClassFolder

    saved("bob")  # $0.40, written by this login
    folder = ClassFolder(course / "sessions")
    folder.scan()
    assert folder.spent_since("bob", 0, owner=os.geteuid()) == pytest.approx(0.4, abs=0.001)
    assert folder.spent_since("bob", 0, owner=os.geteuid() + 1) == 0  # another login's budget: none of it


def test_another_user_name_gives_no_fresh_budget_under_a_policy(course, monkeypatch):
    saved("ana", prompt_tokens=2_500_000)  # $1.00 of $1.00: ana's week is spent
    with pytest.warns(RuntimeWarning, match="you chat as 'ana', not 'ana2'"):
        again = Agent(model="demo", delay=0, user="ana2")
    again.course.limits.clock = lambda: MONDAY_10
    assert again.user == "ana"
    with pytest.raises(BudgetExceeded, match=r"spent \$1\.00 of \$1\.00"):
        again.ask("a fresh budget?")
    monkeypatch.delenv("JUPYTERHUB_USER")
    (course / "nbagent.toml").write_text('[policy]\nbudget_usd = 1.0\nsave_to = "sessions"\nuser = "ana"\n')
    with pytest.warns(RuntimeWarning, match="you chat as 'ana'"):
        assert Agent(model="demo", user="ana2").user == "ana"  # the policy's user, where JupyterHub says none


# --- item 8: rules files stay inside their folder ---------------------------------------------


def test_an_agents_md_linked_out_of_its_folder_never_reaches_the_prompt(course, tmp_path):
    secret = tmp_path / "dotenv"
    secret.write_text("OPENAI_API_KEY=sk-test-key-from-a-dotenv-000000\n", encoding="utf-8")
    (course / "AGENTS.md").symlink_to(secret)
    with pytest.raises(ConfigError, match="leads outside") as err:
        Agent(model="demo")
    assert "sk-test-key" not in str(err.value)
    (course / "AGENTS.md").unlink()
    (course / "AGENTS.md").symlink_to(course / "week1" / "rules.md")  # a link inside the folder is fine
    (course / "week1" / "rules.md").write_text("Answer in French.\n", encoding="utf-8")
    assert Agent(model="demo").system.startswith("Answer in French.")


@pytest.mark.timeout(20)
def test_a_policy_rules_file_that_leads_out_or_is_a_fifo_is_refused(course, tmp_path):
    (tmp_path / "outside.md").write_text("the answer key\n", encoding="utf-8")
    policy = course / "nbagent.toml"
    policy.write_text('[policy]\nrules = "../outside.md"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="leads outside"):
        Agent(model="demo")
    os.mkfifo(course / "rules.md")
    policy.write_text('[policy]\nrules = "rules.md"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="not a regular file"):
        Agent(model="demo")


# --- item 10: a journal going backwards ------------------------------------------------------


def test_a_journal_entry_going_back_warns_and_never_rolls_the_session_back(tmp_path):
    agent = Agent(model=ScriptedProvider([text_call(f"answer {i}") for i in range(5)]), save_to=tmp_path / "s")
    for i in range(5):
        agent.ask(f"question {i}")
    path = agent.session_path
    agent._autosave.journal.forget()
    journal = journal_path(path)
    lines = journal.read_bytes().rstrip(b"\n").split(b"\n")
    assert len(lines) >= 4  # the header and an entry per turn after the first save
    journal.write_bytes(b"\n".join([*lines, lines[1]]) + b"\n")  # an old entry again, at the end
    with pytest.warns(RuntimeWarning, match="goes back before the last turn saved"):
        turns = read_session_head(path).turns
    assert [t.prompt for t in turns] == [f"question {i}" for i in range(5)]
    with pytest.warns(RuntimeWarning, match="goes back"):
        assert Conversation.load(path).turn_count == 5
