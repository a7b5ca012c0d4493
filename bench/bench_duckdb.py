"""A DuckDB group-by over exported sessions: one Parquet file for the folder vs one file per session.

    .venv/bin/python bench/bench_duckdb.py [--sessions 1000]

Writes ``--sessions`` realistic saved sessions (support.many_sessions), exports them with
``to_parquet(folder, "usage.parquet")`` (one file) and ``to_parquet(folder, out_dir)`` (one file per
session), then times the same group-by (turns, tokens and cost per model and status) in DuckDB over
each, best of 5, and prints the ratio (goal: the one file <= 0.1x the folder, and <= 100 ms).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from measure import best_ms, row  # noqa: E402

QUERY = ("select model, status, count(*) as turns, sum(total_tokens) as tokens, sum(cost_usd) as usd "
         "from '{}' group by model, status order by model, status")
GOAL_RATIO = 0.1
GOAL_MS = 100




def measure(count: int, tmp: Path) -> dict:
    import duckdb

    from nbagent import to_parquet

    from support.many_sessions import write_sessions

    folder = tmp / "sessions"
    write_sessions(folder, count)
    t = time.perf_counter()
    one = to_parquet(folder, tmp / "usage.parquet")
    one_write = time.perf_counter() - t
    t = time.perf_counter()
    many = to_parquet(folder, tmp / "per-session")
    many_write = time.perf_counter() - t
    con = duckdb.connect()
    over_one, over_many = QUERY.format(one), QUERY.format(f"{many}/*.parquet")
    def answer(sql: str) -> list:  # sums of floats in another order differ in the last digits
        return [(*r[:4], None if r[4] is None else round(r[4], 6)) for r in con.sql(sql).fetchall()]

    assert answer(over_one) == answer(over_many)  # the same answer either way
    one_ms = best_ms(lambda: con.sql(over_one).fetchall(), 5)
    many_ms = best_ms(lambda: con.sql(over_many).fetchall(), 5)
    return {"sessions": count, "rows": con.sql(f"select count(*) from '{one}'").fetchall()[0][0],
            "one_ms": one_ms, "many_ms": many_ms, "one_write_s": one_write, "many_write_s": many_write,
            "one_mb": one.stat().st_size / 1e6, "many_mb": sum(p.stat().st_size for p in many.glob("*")) / 1e6}


def rows(quick: bool, tmp: Path) -> list[dict]:
    """The measure as a bench/run_all.py row."""

    m = measure(200 if quick else 1_000, tmp / "duckdb")
    ratio = m["one_ms"] / m["many_ms"]
    return [row(f"DuckDB group-by over {m['sessions']:,} sessions ({m['rows']:,} turns): one Parquet file vs a "
                "file per session", ratio, f"<= {GOAL_RATIO}", ratio <= GOAL_RATIO and m["one_ms"] <= GOAL_MS,
                f"{m['one_ms']:.0f} ms vs {m['many_ms']:.0f} ms (absolute goal {GOAL_MS} ms); written in "
                f"{m['one_write_s']:.1f} s vs {m['many_write_s']:.1f} s, {m['one_mb']:.1f} MB vs {m['many_mb']:.1f} MB")]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1_000)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="nbagent-bench-duckdb-", dir=os.environ.get("TMPDIR")))
    try:
        m = measure(args.sessions, tmp)
        print(f"{m['sessions']:,} sessions, {m['rows']:,} turns")
        print(f"to_parquet: one file {m['one_write_s']:.1f} s ({m['one_mb']:.1f} MB); a file per session "
              f"{m['many_write_s']:.1f} s ({m['many_mb']:.1f} MB)")
        print(f"DuckDB group-by: one file {m['one_ms']:.1f} ms; the folder {m['many_ms']:.1f} ms; ratio "
              f"{m['one_ms'] / m['many_ms']:.3f} (goal <= {GOAL_RATIO}, and <= {GOAL_MS} ms)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
