"""One writer per session file (issue #31, item 7): the same saved session open twice loses no turn.

Real parts: two Python processes (two kernels) resuming one file with ``Agent.load`` and
autosaving 20 demo-model turns each; the lock is a real ``flock`` on the file's sidecar.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from nbagent import Agent, NbagentError
from nbagent.core.errors import StorageError
from nbagent.core.session_file import read_session_head
from nbagent.core.session_lock import SessionLock, lock_path

ROOT = Path(__file__).resolve().parents[1]
TURNS = 20

WRITER = """
import sys, time
from pathlib import Path
from nbagent import Agent
path, name, ready, go = sys.argv[1:5]
agent = Agent.load(path)
Path(ready).touch()
while not Path(go).exists():  # both have the file open before either writes
    time.sleep(0.01)
for i in range(int(sys.argv[5])):
    agent.ask(f"{name} turn {i}")
print(agent.session_path)
"""


def saved_session(folder: Path) -> Path:
    agent = Agent(model="demo", delay=0, save_to=folder)
    agent.ask("the first question")
    path = agent.session_path
    agent.session_path = None  # this test process lets go of the file
    return path


def prompts_kept(folder: Path) -> list[str]:
    """Every turn's prompt in every session file of the folder (branches included)."""
    return [t.prompt for f in sorted(folder.glob("*.json")) for t in read_session_head(f).turns]


def wait_for(paths: list[Path], procs: list[subprocess.Popen]) -> None:
    while not all(p.exists() for p in paths):
        for proc in procs:
            if proc.poll() is not None:
                raise AssertionError(f"a writer ended early: {proc.communicate()}")
        time.sleep(0.01)


def test_two_processes_resuming_one_session_keep_every_turn(tmp_path):
    path = saved_session(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    go = tmp_path / "go"
    names = ("k1", "k2")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, str(tmp_path / f"{name}.ready"),
                               str(go), str(TURNS)], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in names]
    wait_for([tmp_path / f"{n}.ready" for n in names], procs)
    go.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    kept = prompts_kept(tmp_path)
    wanted = [f"{n} turn {i}" for n in names for i in range(TURNS)]
    assert sorted(set(kept) & set(wanted)) == sorted(wanted), f"{len(set(kept) & set(wanted))} of 40 turns kept"
    written = sorted(Path(out.strip()) for out, _ in outs)
    assert written == sorted([path, path.with_name(path.stem + ".branch-2.json")])
    said = [err for _, err in outs if "branch-2.json" in err]
    assert len(said) == 1 and "a branch of the session" in said[0]  # the second writer said so, once
    assert said[0].count("branch of the session") == 1
    for f in written:  # each file is its writer's whole conversation: the first question, then its 20
        assert [t.prompt for t in read_session_head(f).turns][0] == "the first question"
        assert len(read_session_head(f).turns) == 1 + TURNS
    assert not list(tmp_path.glob(".*.lock"))  # released when the writers ended


def test_the_second_opener_chooses_read_only_or_an_error(tmp_path):
    path = saved_session(tmp_path)
    held = SessionLock.acquire(path)  # as another kernel holds it
    assert held is not None and lock_path(path).exists()
    try:
        with pytest.raises(NbagentError) as err:
            Agent.load(path, if_open="raise")
        assert isinstance(err.value, StorageError) and "is open in" in str(err.value)
        reader = Agent.load(path, if_open="read_only")
        reader.ask("only here")
        status = reader.autosave_status
        assert status.read_only and not status.saving and "Read-only" in status.line()
        assert [t.prompt for t in read_session_head(path).turns] == ["the first question"]
        assert not list(tmp_path.glob("*.branch-*.json"))
        with pytest.raises(NbagentError) as err:
            Agent.load(path, if_open="maybe")
        assert err.value.kind == "config" and "'branch'" in str(err.value)
    finally:
        held.release()
    owner = Agent.load(path)  # free again: no branch, no warning
    assert owner.session_path == path and owner.autosave_status.line() == ""


def test_in_one_process_the_newest_load_takes_the_file_and_the_older_agent_branches(tmp_path):
    path = saved_session(tmp_path)
    first = Agent.load(path)
    again = Agent.load(path)  # the cell run again: the new agent saves to the file
    again.ask("from the new agent")
    assert again.session_path == path
    with pytest.warns(RuntimeWarning, match="branch-2.json, a branch of the session"):
        first.ask("from the old agent")
    assert first.session_path == path.with_name(path.stem + ".branch-2.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first.ask("once more from the old agent")  # said once
    assert sorted(prompts_kept(tmp_path)) == sorted(["the first question"] * 2 + [
        "from the new agent", "from the old agent", "once more from the old agent"])


def test_a_killed_writer_leaves_no_stale_lock(tmp_path):
    import signal

    path = saved_session(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom nbagent import Agent\n"
                               "agent = Agent.load(sys.argv[1])\nprint('held', flush=True)\ntime.sleep(600)", str(path)],
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert SessionLock.acquire(path) is None  # held by the other process
        assert '"pid": %d' % holder.pid in lock_path(path).read_text()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    assert lock_path(path).exists()  # the killed process could not remove its lock file...
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agent = Agent.load(path)  # ...but its lock ended with it: no branch, no warning
    assert agent.session_path == path
    agent.ask("after the crash")
    assert [t.prompt for t in read_session_head(path).turns] == ["the first question", "after the crash"]
