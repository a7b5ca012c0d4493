"""Hostile input from the third adversarial run (issue 22): planted links, clashing names,
full disks, damaged and oversized session files, literal paths that look like globs.

Every test here failed on the code before its fix; docs/explanation/reliability.md lists each case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pd = pytest.importorskip("pandas")
pq = pytest.importorskip("pyarrow.parquet")
duckdb = pytest.importorskip("duckdb")

import nbagent  # noqa: E402
from nbagent import NbagentError  # noqa: E402
from nbagent.core.session_file import save_conversation  # noqa: E402

from support.many_sessions import synthetic_state  # noqa: E402
from support.small_disk import fill, small_disk  # noqa: E402


def rows(folder) -> int:
    return int(duckdb.sql(f"select count(*) as n from '{folder}/*.parquet'").fetchall()[0][0])


# --- to_parquet writes only inside its folder, every session once, atomically -----------------


def test_to_parquet_replaces_planted_links_and_never_writes_through_them(tmp_path):
    path = save_conversation(synthetic_state(0, 3), tmp_path / "s" / "a.json")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = nbagent.to_parquet(path, tmp_path / "out")
    written = sorted(out.iterdir())
    for f in written:  # an attacker replaces each output by a link to a file outside the folder
        f.unlink()
        f.symlink_to(victim)
    single = tmp_path / "all.parquet"
    single.symlink_to(victim)
    nbagent.to_parquet(path, out)
    nbagent.to_parquet(path, single)
    assert victim.read_text() == "precious"
    assert all(f.is_file() and not f.is_symlink() for f in [*out.iterdir(), single])
    assert rows(out) == 3 and pq.read_table(single).num_rows == 3


def test_output_names_are_unique_per_source_path_and_stable(tmp_path):
    paths = [save_conversation(synthetic_state(seed, 2), tmp_path / name)
             for seed, name in enumerate(["a.json", "other/a.json", "a-2.json"])]
    out = nbagent.to_parquet(paths, tmp_path / "out")
    assert rows(out) == 6  # 3 sessions x 2 turns: none lost
    names = sorted(f.name for f in out.iterdir())
    nbagent.to_parquet(list(reversed(paths)), out)  # again, in another order
    nbagent.to_parquet(paths[1], out)
    assert sorted(f.name for f in out.iterdir()) == names and rows(out) == 6


def test_a_failed_single_file_export_keeps_the_previous_file(tmp_path):
    big = [save_conversation(synthetic_state(seed, 40), tmp_path / f"s{seed}.json") for seed in range(6)]
    with small_disk(tmp_path / "disk", size_kb=256) as disk:
        target = disk / "usage.parquet"
        nbagent.to_parquet(big[0], target)
        before = target.read_bytes()
        fill(disk)
        with pytest.raises(NbagentError) as err:
            nbagent.to_parquet(big, target)
        assert err.value.kind == "io" and "usage.parquet" in str(err.value)
        assert target.read_bytes() == before
        assert [p.name for p in disk.iterdir() if p.name != "filler"] == ["usage.parquet"]  # no temp left


# --- damaged session files: one typed error naming the file -----------------------------------


def damaged(folder, name, edit):
    """A real saved session, its JSON document changed by ``edit(doc)`` (or its text, if it returns a str)."""
    path = save_conversation(synthetic_state(0, 3), folder / name)
    doc = json.loads(path.read_text())
    changed = edit(doc)
    path.write_text(changed if isinstance(changed, str) else json.dumps(doc))
    return path


def set_in(doc, keys, value):
    *outer, last = keys
    for k in outer:
        doc = doc[k]
    doc[last] = value


HOSTILE = {
    "a 5,000-digit number": lambda d: json.dumps(d).replace('"saved_at":', '"saved_at":' + "9" * 5000 + ',"x":', 1),
    "turn 2**70": lambda d: set_in(d, ["turns", 0, "turn"], 2**70),
    "a token count of 2**63": lambda d: set_in(d, ["turns", 1, "usage", "prompt_token_count"], 2**63),
    "a token count of 2**64": lambda d: set_in(d, ["turns", 1, "usage", "candidates_token_count"], 2**64),
    "a negative context": lambda d: set_in(d, ["turns", 2, "context_tokens"], -5),
}


@pytest.mark.parametrize("case", HOSTILE)
@pytest.mark.parametrize("reader", ["load_sessions", "Conversation.load", "to_parquet"])
def test_damaged_numbers_are_io_errors_naming_the_file(tmp_path, case, reader):
    path = damaged(tmp_path, "hostile.json", HOSTILE[case])
    read = {"load_sessions": lambda: nbagent.load_sessions(path),
            "Conversation.load": lambda: nbagent.Conversation.load(path).usage_df(),
            "to_parquet": lambda: nbagent.to_parquet(path, tmp_path / "out.parquet")}[reader]
    with pytest.raises(NbagentError) as err:
        read()
    assert err.value.kind == "io" and "hostile.json" in str(err.value)


def test_a_symlink_loop_in_a_folder_is_an_io_error_naming_it(tmp_path):
    folder = tmp_path / "sessions"
    save_conversation(synthetic_state(0, 2), folder / "good.json")
    (folder / "loop.json").symlink_to(folder / "loop.json")
    (folder / "a.json").symlink_to(folder / "b.json")
    (folder / "b.json").symlink_to(folder / "a.json")
    for source in (folder, [folder / "good.json", folder / "loop.json"]):
        with pytest.raises(NbagentError) as err:
            nbagent.load_sessions(source)
        assert err.value.kind == "io" and ("loop.json" in str(err.value) or "a.json" in str(err.value))
    assert len(nbagent.load_sessions(folder / "good.json")) == 2


def test_a_count_past_int64_in_a_live_frame_is_na_never_negative():
    from nbagent.analysis.columns import USAGE

    column = next(c for c in USAGE if c.name == "input_tokens")
    values = column.to_pandas([5.0, float(2**63), float(2**64), float("nan")])
    assert values[0] == 5 and values[1:].isna().all()


# --- paths and sizes ----------------------------------------------------------------------------


def test_a_literal_path_that_looks_like_a_glob_is_read_as_named(tmp_path):
    literal = save_conversation(synthetic_state(0, 3), tmp_path / "run[1].json")
    save_conversation(synthetic_state(1, 2), tmp_path / "run1.json")  # what "run[1].json" matches as a glob
    frame = nbagent.load_sessions(literal)
    assert len(frame) == 3 and frame["path"].tolist() == [str(literal)] * 3
    assert len(nbagent.load_sessions(str(literal))) == 3
    assert len(nbagent.load_sessions(tmp_path / "run[0-9].json")) == 2  # a name that does not exist is a glob


def test_a_file_over_the_size_limit_is_refused_before_parsing(tmp_path, monkeypatch):
    from nbagent.core import chat_session

    path = save_conversation(synthetic_state(0, 40), tmp_path / "big.json")
    sparse = tmp_path / "huge.json"  # 1 GB that takes no disk: refused from its size alone
    with open(sparse, "wb") as f:
        f.write(path.read_bytes()[:-1])
        f.truncate(2**30)
        f.seek(-1, 2)
        f.write(b"}")
    for read in (nbagent.load_sessions, nbagent.Conversation.load):
        with pytest.raises(NbagentError) as err:
            read(sparse)
        assert err.value.kind == "io" and "huge.json" in str(err.value) and "MAX_FILE_BYTES" in str(err.value)
    monkeypatch.setattr(chat_session, "MAX_FILE_BYTES", path.stat().st_size - 1)
    with pytest.raises(NbagentError, match="limit"):
        nbagent.Conversation.load(path)
    monkeypatch.setattr(chat_session, "MAX_FILE_BYTES", path.stat().st_size)  # raised: read again
    assert nbagent.Conversation.load(path).turn_count == 40 and len(nbagent.load_sessions(path)) == 40


# --- a hostile session folder (the probes of the adversarial run, kept as tests) ----------------

READ_IN_A_CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a runaway read fails here, not the machine
import nbagent
read = {"load_sessions": nbagent.load_sessions, "Conversation.load": nbagent.Conversation.load}[sys.argv[1]]
try:
    read(sys.argv[2])
    print(json.dumps({"outcome": "read"}))
except nbagent.NbagentError as exc:
    print(json.dumps({"outcome": "NbagentError", "kind": exc.kind, "message": str(exc)}))
except BaseException as exc:
    print(json.dumps({"outcome": type(exc).__name__, "message": str(exc)[:300]}))
"""


def plant(folder, case: str):
    """One hostile entry named like a session file in ``folder``; its path."""
    path = folder / f"{case}.json"
    if case == "fifo":
        os.mkfifo(path)  # opening it to read would wait for a writer forever
    elif case == "dev-zero":
        path.symlink_to("/dev/zero")  # endless zeros, size 0
    elif case == "directory":
        path.mkdir()
    elif case == "empty":
        path.write_bytes(b"")
    elif case == "binary":
        path.write_bytes(bytes(range(256)) * 64 + b"}")
    elif case == "dangling-link":
        path.symlink_to(folder / "nowhere.json")
    return path


@pytest.mark.parametrize("case", ["fifo", "dev-zero", "directory", "empty", "binary", "dangling-link"])
@pytest.mark.parametrize("reader", ["load_sessions", "Conversation.load"])
def test_a_hostile_folder_entry_is_an_io_error_naming_it_never_a_hang(tmp_path, case, reader):
    folder = tmp_path / "sessions"
    save_conversation(synthetic_state(0, 2), folder / "good.json")
    target = folder if reader == "load_sessions" else plant(folder, case)
    if reader == "load_sessions":
        plant(folder, case)
    child = subprocess.run([sys.executable, "-c", READ_IN_A_CHILD, reader, str(target)], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    result = json.loads(child.stdout.strip().splitlines()[-1])
    assert result["outcome"] == "NbagentError" and result["kind"] == "io", result
    assert f"{case}.json" in result["message"]
