"""Hostile input from the third adversarial run (issue 22): planted links, clashing names,
full disks, damaged and oversized session files, literal paths that look like globs.

Every test here failed on the code before its fix; docs/reliability.md lists each case.
"""

from __future__ import annotations

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
