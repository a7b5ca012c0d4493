"""Saved sessions at scale: save + load of one long session, load_sessions over a folder, to_parquet.

    .venv/bin/python bench/bench_sessions.py [--sessions 1000] [--turns 3334]

Each measure prints its time, the baseline measured in the same run and their ratio:

- save + load of a 10,000-step session (``Conversation.save`` + ``read_session``) vs the same
  document through ``json`` alone (goal: <= 3x, and 300 ms absolute);
- ``load_sessions(folder)`` over 1,000 realistic sessions (20-50 turns, tool calls, usage) vs
  ``json.loads`` of every file (the floor of any reader that parses the files; goal <= 0.5x:
  it parses only the turn ledger) and vs ``Conversation.load(f).usage_df()`` per file;
- ``to_parquet(folder, out_dir)`` (one file per session) vs ``load_sessions`` of the same folder
  (goal <= 5x: pyarrow's writer costs about 2 ms a file);
- ``list_sessions(folder)`` (one row per session) vs ``load_sessions`` of the same folder (goal <= 1x:
  it reads the same file heads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

SAVE_LOAD_GOAL_MS = 300


def best_ms(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1000


def save_load(turns: int, tmp: Path) -> dict:
    """Save + load of a session of ``turns`` three-step turns vs json alone on the same document."""
    from nbagent import Conversation, MockConnection
    from nbagent.core.session_file import read_session

    from test_load import _turn

    conv = Conversation(MockConnection([_turn(i) for i in range(turns)]), max_history_size=0)

    async def run() -> None:
        for i in range(turns):
            await conv.chat_to_completion(f"question {i}")
    asyncio.run(run())
    path = tmp / "long.json"

    def both() -> None:
        conv.save(path)
        read_session(path)

    def raw() -> None:  # the floor: the same document through json alone
        doc = json.loads(path.read_text())
        path.with_suffix(".raw").write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
        json.loads(path.with_suffix(".raw").read_text())

    both()
    ms, floor = best_ms(both, 5), best_ms(raw, 5)
    return {"steps": len(conv.history), "ms": ms, "floor_ms": floor, "bytes": path.stat().st_size}


def many(count: int, tmp: Path) -> dict:
    """load_sessions and to_parquet over ``count`` saved sessions vs json alone and per-file loading."""
    import pandas as pd

    from nbagent import Conversation, list_sessions, load_sessions, to_parquet

    from support.many_sessions import write_sessions

    folder = tmp / "sessions"
    t = time.perf_counter()
    paths = write_sessions(folder, count)
    written_s = time.perf_counter() - t
    load_sessions(folder)  # warm the page cache and the imports
    ms = best_ms(lambda: load_sessions(folder), 3)
    floor = best_ms(lambda: [json.loads(p.read_bytes()) for p in paths], 3)
    sample = paths[: max(1, count // 10)]  # per-file loading is slow: time a tenth, scale up
    per_file = best_ms(lambda: pd.concat([Conversation.load(p).usage_df() for p in sample]), 1) * count / len(sample)
    out = tmp / "parquet"
    parquet_ms = best_ms(lambda: (shutil.rmtree(out, ignore_errors=True), to_parquet(folder, out)), 1)
    rows = len(load_sessions(folder))
    list_ms = best_ms(lambda: list_sessions(folder), 3)
    return {"sessions": count, "rows": rows, "ms": ms, "floor_ms": floor, "per_file_ms": per_file,
            "parquet_ms": parquet_ms, "write_s": written_s, "list_ms": list_ms,
            "mb": sum(p.stat().st_size for p in paths) / 1e6}


def rows(quick: bool, tmp: Path) -> list[dict]:
    """The measures as bench/run_all.py rows."""
    from run_all import row

    one = save_load(1_000 if quick else 3_334, tmp)  # three steps a turn: 10,000 steps
    ratio = one["ms"] / one["floor_ms"]
    goal = (f" (absolute goal {SAVE_LOAD_GOAL_MS} ms: {'met' if one['ms'] <= SAVE_LOAD_GOAL_MS else 'not met'})"
            if one["steps"] >= 10_000 else "")
    out = [row(f"save + load of a {one['steps']:,}-step session vs json alone", ratio, "<= 3", ratio <= 3,
               f"{one['ms']:.0f} ms vs {one['floor_ms']:.0f} ms, {one['bytes'] / 1e6:.1f} MB{goal}")]
    m = many(200 if quick else 1_000, tmp)
    ratio = m["ms"] / m["floor_ms"]
    out.append(row(f"load_sessions over {m['sessions']:,} saved sessions ({m['rows']:,} turns, {m['mb']:.0f} MB) "
                   "vs json.loads of every file", ratio, "<= 0.5", ratio <= 0.5,
                   f"{m['ms']:.0f} ms vs {m['floor_ms']:.0f} ms; Conversation.load + usage_df per file: "
                   f"{m['per_file_ms']:.0f} ms ({m['per_file_ms'] / m['ms']:.0f}x slower)"))
    ratio = m["parquet_ms"] / m["ms"]
    out.append(row(f"to_parquet of {m['sessions']:,} sessions (one file each) vs load_sessions of them", ratio,
                   "<= 5", ratio <= 5, f"{m['parquet_ms']:.0f} ms vs {m['ms']:.0f} ms (pyarrow's writer costs "
                   "about 2 ms a file)"))
    ratio = m["list_ms"] / m["ms"]
    out.append(row(f"list_sessions of {m['sessions']:,} sessions vs load_sessions of them", ratio, "<= 1",
                   ratio <= 1, f"{m['list_ms']:.0f} ms vs {m['ms']:.0f} ms"))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1_000)
    ap.add_argument("--turns", type=int, default=3_334)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="nbagent-bench-sessions-", dir=os.environ.get("TMPDIR")))
    try:
        one = save_load(args.turns, tmp)
        print(f"save + load, {one['steps']:,} steps ({one['bytes'] / 1e6:.1f} MB): {one['ms']:.0f} ms; "
              f"json alone {one['floor_ms']:.0f} ms; ratio {one['ms'] / one['floor_ms']:.2f} "
              f"(goal <= 3, absolute {SAVE_LOAD_GOAL_MS} ms)")
        m = many(args.sessions, tmp)
        print(f"{m['sessions']:,} sessions, {m['rows']:,} turns, {m['mb']:.0f} MB (written in {m['write_s']:.1f} s)")
        print(f"load_sessions: {m['ms']:.0f} ms; json.loads of every file {m['floor_ms']:.0f} ms "
              f"(ratio {m['ms'] / m['floor_ms']:.2f}, goal <= 0.5); Conversation.load + usage_df per file "
              f"{m['per_file_ms']:.0f} ms (ratio {m['ms'] / m['per_file_ms']:.3f})")
        print(f"to_parquet: {m['parquet_ms']:.0f} ms (ratio to load_sessions {m['parquet_ms'] / m['ms']:.2f}, goal <= 5)")
        print(f"list_sessions: {m['list_ms']:.0f} ms (ratio to load_sessions {m['list_ms'] / m['ms']:.2f}, goal <= 1)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
