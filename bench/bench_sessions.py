"""Saved sessions at scale: save + load of one long session, load_sessions over a folder, to_parquet.

    .venv/bin/python bench/bench_sessions.py [--sessions 1000] [--turns 3334]

Each measure prints its time, the baseline measured in the same run and their ratio:

- save + load of a 10,000-step session (``Conversation.save`` + ``read_session``) vs the same
  document through ``json`` alone (goal: <= 3x, and 300 ms absolute);
- ``load_sessions(folder)`` over 1,000 realistic sessions (20-50 turns, tool calls, usage) vs
  ``json.loads`` of every file (the floor of any reader that parses the files; goal <= 0.5x:
  it parses only the turn ledger) and vs ``Conversation.load(f).usage_df()`` per file;
- ``to_parquet(folder, out_dir)`` (one file per session) vs ``load_sessions`` of the same folder
  (goal <= 5x: pyarrow's writer costs about 0.7 ms a file, creating it about as much; not synced one by one);
- ``list_sessions(folder)`` (one row per session) vs ``load_sessions`` of the same folder (goal <= 1x:
  it reads the same file heads);
- at 10,000 sessions (``scale``, ``--scale N`` alone): ``list_sessions`` warm (<= 0.5 s, from the
  folder's index), ``load_sessions`` vs ``json.loads`` (<= 0.2), the month-partitioned Parquet
  export vs ``load_sessions`` (<= 1), a DuckDB group-by over it (<= 100 ms) and the session browser
  opening the folder (< 1 s).
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

from measure import best_ms, row  # noqa: E402

SAVE_LOAD_GOAL_MS = 300




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


SCALE = 10_000
LIST_GOAL_S = 0.5
LOAD_GOAL = 0.2
EXPORT_GOAL = 1.0
DUCKDB_GOAL_MS = 100
BROWSER_GOAL_S = 1.0


def rounds_best_ms(fns: dict, rounds: int) -> dict[str, float]:
    """The best of ``rounds`` timings of each function, run one after the other in every round, so a
    load that comes and goes on a shared machine weighs on each measure and its baseline alike."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = min(best[name], best_ms(fn, 1))
    return best


def scale(count: int, tmp: Path) -> dict:
    """A folder of ``count`` sessions: list_sessions cold and warm (its index), load_sessions vs
    json.loads, the month-partitioned Parquet export vs load_sessions, a DuckDB group-by over that
    export, and the session browser opening the folder."""
    import duckdb
    import pyarrow.parquet as pq

    from nbagent import list_sessions, load_sessions, to_parquet
    from nbagent.analysis.session_index import INDEX_NAME

    from support.many_sessions import write_sessions

    folder = tmp / f"scale-{count}"
    t = time.perf_counter()
    paths = write_sessions(folder, count, turns=(5, 15))
    written_s = time.perf_counter() - t
    (folder / INDEX_NAME).unlink(missing_ok=True)
    t = time.perf_counter()
    list_sessions(folder)
    cold_s = time.perf_counter() - t
    warm_s = best_ms(lambda: list_sessions(folder), 3) / 1000
    warm_cpu = time.process_time()
    list_sessions(folder)
    warm_cpu = time.process_time() - warm_cpu
    out = tmp / f"dataset-{count}"

    def export() -> None:
        shutil.rmtree(out, ignore_errors=True)
        to_parquet(folder, out, partition="month")
    best = rounds_best_ms({"load": lambda: load_sessions(folder), "floor": lambda: [json.loads(p.read_bytes()) for p in paths],
                           "export": export}, 3)
    load_ms, floor_ms, export_ms = best["load"], best["floor"], best["export"]
    con = duckdb.connect()
    sql = ("select model, status, count(*) as turns, sum(total_tokens) as tokens, sum(cost_usd) as usd from "
           f"read_parquet('{out}/*/*.parquet', hive_partitioning=true) group by model, status order by model, status")
    con.sql(sql).fetchall()
    query_ms = best_ms(lambda: con.sql(sql).fetchall(), 5)
    schema = pq.read_schema(next(out.glob("*/*.parquet")))
    dictionaries = sum(str(f.type).startswith("dictionary") for f in schema)
    units = {f.type.unit for f in schema if str(f.type).startswith("timestamp")}
    browser_s = None
    try:
        from nbagent import session_browser

        session_browser(folder)
        browser_s = best_ms(lambda: session_browser(folder), 3) / 1000
    except ImportError:  # no anywidget
        pass
    return {"sessions": count, "write_s": written_s, "cold_s": cold_s, "warm_s": warm_s, "warm_cpu_s": warm_cpu,
            "load_ms": load_ms, "floor_ms": floor_ms, "export_ms": export_ms, "query_ms": query_ms,
            "files": len(list(out.glob("*/*.parquet"))), "dictionaries": dictionaries, "units": sorted(units),
            "browser_s": browser_s, "mb": sum(p.stat().st_size for p in paths) / 1e6,
            "rows": con.sql(f"select count(*) from read_parquet('{out}/*/*.parquet')").fetchall()[0][0]}


def scale_rows(quick: bool, tmp: Path) -> list[dict]:
    """The 10,000-session measures as bench/run_all.py rows."""

    m = scale(1_000 if quick else SCALE, tmp)
    n = f"{m['sessions']:,} sessions"
    out = [row(f"list_sessions of {n}, warm (the folder's index) vs {LIST_GOAL_S} s", m["warm_s"] / LIST_GOAL_S,
               "<= 1", m["warm_s"] <= LIST_GOAL_S,
               f"{m['warm_s']:.2f} s ({m['warm_cpu_s']:.2f} s CPU); cold (building the index) {m['cold_s']:.1f} s; "
               f"load_sessions {m['load_ms'] / 1000:.1f} s")]
    ratio = m["load_ms"] / m["floor_ms"]
    out.append(row(f"load_sessions of {n} ({m['rows']:,} turns, {m['mb']:.0f} MB) vs json.loads of every file", ratio,
                   f"<= {LOAD_GOAL}", ratio <= LOAD_GOAL, f"{m['load_ms']:.0f} ms vs {m['floor_ms']:.0f} ms"))
    ratio = m["export_ms"] / m["load_ms"]
    out.append(row(f"to_parquet of {n} as one month-partitioned dataset vs load_sessions of them", ratio,
                   f"<= {EXPORT_GOAL}", ratio <= EXPORT_GOAL,
                   f"{m['export_ms']:.0f} ms vs {m['load_ms']:.0f} ms; {m['files']} files (a file per month), not "
                   f"{m['sessions']:,}"))
    ok = m["query_ms"] <= DUCKDB_GOAL_MS and m["dictionaries"] > 0 and m["units"] == ["us"]
    out.append(row(f"DuckDB group-by over that dataset ({m['rows']:,} turns) vs {DUCKDB_GOAL_MS} ms",
                   m["query_ms"] / DUCKDB_GOAL_MS, "<= 1, categories dictionary-encoded, one time unit", ok,
                   f"{m['query_ms']:.1f} ms; {m['dictionaries']} dictionary columns; timestamp units {m['units']}"))
    if m["browser_s"] is not None:
        out.append(row(f"session browser opening a folder of {n} (warm index) vs {BROWSER_GOAL_S} s",
                       m["browser_s"] / BROWSER_GOAL_S, "<= 1", m["browser_s"] <= BROWSER_GOAL_S,
                       f"{m['browser_s']:.2f} s"))
    return out


def rows(quick: bool, tmp: Path) -> list[dict]:
    """The measures as bench/run_all.py rows."""

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
                   "about 0.7 ms a file, creating it about as much; the folder synced once, not each file)"))
    ratio = m["list_ms"] / m["ms"]
    out.append(row(f"list_sessions of {m['sessions']:,} sessions vs load_sessions of them", ratio, "<= 1",
                   ratio <= 1, f"{m['list_ms']:.0f} ms vs {m['ms']:.0f} ms"))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1_000)
    ap.add_argument("--turns", type=int, default=3_334)
    ap.add_argument("--scale", type=int, default=0, help="only the folder-at-scale measures, with this many sessions")
    args = ap.parse_args(argv)
    if args.scale:
        tmp = Path(tempfile.mkdtemp(prefix="nbagent-bench-scale-", dir=os.environ.get("TMPDIR")))
        try:
            print(json.dumps(scale(args.scale, tmp), indent=1))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
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
