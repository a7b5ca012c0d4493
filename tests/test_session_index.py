"""list_sessions keeps its rows in an index file in the folder: unchanged files come from it,
changed, added and removed ones are seen, and a missing or damaged index is rebuilt."""

from __future__ import annotations

import json
import os

import pytest
from support.many_sessions import synthetic_state

import nbagent
from nbagent.analysis.session_index import INDEX_NAME
from nbagent.core.session_file import save_conversation

pytest.importorskip("pandas")


def folder_of(tmp_path, n: int = 4):
    folder = tmp_path / "s"
    paths = [save_conversation(synthetic_state(i, 3 + i), folder / f"session-{i}.json") for i in range(n)]
    return folder, paths


def counting_reads(monkeypatch) -> list[str]:
    """The files whose heads list_sessions reads (the ones the index could not answer for)."""
    from nbagent.analysis import session_list

    seen: list[str] = []
    real = session_list.read_session_head

    def read(path):
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(session_list, "read_session_head", read)
    return seen


def listed(folder) -> dict[str, int]:
    df = nbagent.list_sessions(folder)
    return dict(zip(df["path"].map(os.path.basename), df["turns"]))


def test_a_warm_listing_reads_only_what_changed(tmp_path, monkeypatch):
    folder, paths = folder_of(tmp_path)
    cold = nbagent.list_sessions(folder)
    assert (folder / INDEX_NAME).exists() and len(cold) == 4
    reads = counting_reads(monkeypatch)
    warm = nbagent.list_sessions(folder)
    assert reads == [] and warm.equals(cold) and list(warm.dtypes) == list(cold.dtypes)
    # changed: one more turn in session-1; added: session-9; removed: session-2
    save_conversation(synthetic_state(1, 10), paths[1])
    save_conversation(synthetic_state(9, 2), folder / "session-9.json")
    paths[2].unlink()
    assert listed(folder) == {"session-0.json": 3, "session-1.json": 10, "session-3.json": 6, "session-9.json": 2}
    assert sorted(reads) == ["session-1.json", "session-9.json"]
    entries = json.loads((folder / INDEX_NAME).read_text())["entries"]
    assert sorted(entries) == ["session-0.json", "session-1.json", "session-3.json", "session-9.json"]
    reads.clear()
    nbagent.list_sessions(str(folder / "*.json"))  # a glob of the same folder uses the same index
    assert reads == []


def test_a_journaled_turn_changes_the_row(tmp_path, monkeypatch):
    agent = nbagent.Agent(model="demo", delay=0, save_to=tmp_path / "s")
    agent.ask("one")
    assert listed(tmp_path / "s") == {agent.session_path.name: 1}
    agent.ask("two")  # the file is unchanged, its journal grew
    assert listed(tmp_path / "s") == {agent.session_path.name: 2}


@pytest.mark.parametrize("damage", [b"", b"{not json", b"short entries", b"other prices", b'{"format": "other"}'])
def test_a_missing_or_damaged_index_is_rebuilt_not_trusted(tmp_path, monkeypatch, damage):
    folder, paths = folder_of(tmp_path, 2)
    want = nbagent.list_sessions(folder)
    doc = json.loads((folder / INDEX_NAME).read_text())
    if damage == b"short entries":  # the right format and prices, entries cut short
        damage = json.dumps(dict(doc, entries={k: v[:3] for k, v in doc["entries"].items()})).encode()
    elif damage == b"other prices":
        damage = json.dumps(dict(doc, prices="genai-prices 0.0.1")).encode()
    if damage:
        (folder / INDEX_NAME).write_bytes(damage)
    else:
        (folder / INDEX_NAME).unlink()
    reads = counting_reads(monkeypatch)
    assert nbagent.list_sessions(folder).equals(want)
    assert sorted(reads) == ["session-0.json", "session-1.json"]
    reads.clear()
    assert nbagent.list_sessions(folder).equals(want) and reads == []  # rebuilt


def test_a_forged_entry_with_the_right_stat_is_only_a_cache_of_that_file(tmp_path):
    """The index is never trusted for a file whose size or time changed: an edit shows at once."""
    folder, paths = folder_of(tmp_path, 1)
    nbagent.list_sessions(folder)
    st = paths[0].stat()
    save_conversation(synthetic_state(0, 7), paths[0])
    os.utime(paths[0], ns=(st.st_atime_ns, st.st_mtime_ns))  # the same time, another size
    assert listed(folder) == {"session-0.json": 7}


def test_a_read_only_folder_is_listed_without_an_index(tmp_path, monkeypatch):
    folder, _ = folder_of(tmp_path, 2)
    from nbagent.analysis import session_index
    from nbagent.core.errors import NbagentError

    def refuse(path, obj):
        raise NbagentError(f"cannot write {path}: Read-only file system", kind="io")

    monkeypatch.setattr(session_index, "atomic_write_json", refuse)
    assert listed(folder) == {"session-0.json": 3, "session-1.json": 4}
    assert not (folder / INDEX_NAME).exists()
