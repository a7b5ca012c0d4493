"""Every benchmark in one command; writes bench/results.md and the table of docs/explanation/benchmarks.md.

    .venv/bin/python bench/run_all.py            # a few minutes on 2 cores
    .venv/bin/python bench/run_all.py --quick    # smaller sizes, for a smoke run
    .venv/bin/python bench/run_all.py --browser  # also the widget in long chats in Chromium (bench_browser.py)

Each measure is a ratio against a baseline run in the same process (these machines are noisy:
absolute times move with load, ratios much less), with its goal and whether this run met it.
Always exits 0: speed lives here, not in the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

import bench_frames  # noqa: E402
import bench_otel_live  # noqa: E402
import bench_pipeline  # noqa: E402
import bench_sse  # noqa: E402
from measure import row  # noqa: E402

TABLE_START, TABLE_END = "<!-- bench:start -->", "<!-- bench:end -->"  # in docs/explanation/benchmarks.md




def otel_live(quick: bool) -> list[dict]:
    """A turn's CPU with ``trace_live`` on against the same turns without (bench_otel_live.py)."""
    return bench_otel_live.main(["--turns", "100" if quick else "400"])


def frames(quick: bool) -> list[dict]:
    import pandas as pd

    from nbagent.analysis.frames import history_frame, usage_frame

    steps = bench_frames.make_steps(2_000 if quick else 10_000)
    records = bench_frames.make_records(20_000 if quick else 100_000)
    history_frame(steps), usage_frame(records)
    out = []
    for name, fn, items, goal in (("history_df", history_frame, steps, bench_frames.HISTORY_GOAL_MS),
                                  ("usage_df", usage_frame, records, bench_frames.USAGE_GOAL_MS)):
        ms = bench_frames.best_ms(lambda fn=fn, items=items: fn(items), 5)
        naive = bench_frames.best_ms(lambda items=items: pd.DataFrame([dataclasses.asdict(x) for x in items]), 2)
        out.append(row(f"{name} of {len(items):,} rows vs a naive DataFrame of dicts", ms / naive, "<= 0.1",
                       ms / naive <= 0.1, f"{ms:.0f} ms vs {naive:.0f} ms (absolute goal {goal} ms: "
                       f"{'met' if ms <= goal else 'not met'})"))
    return out


def frames_at_scale(quick: bool) -> list[dict]:
    """usage_df and history_df of 1M rows (bench_frames.py): CPU against reading each attribute they show
    once, the cheaper of attribute by attribute and one pass (the floor of any frame built from the objects),
    and memory against Python-object strings."""
    n = 200_000 if quick else 1_000_000
    out = []
    for name, make in (("usage_df", bench_frames.make_records), ("history_df", bench_frames.make_steps)):
        m = bench_frames.at_scale(name, make(n))
        cpu, floor = m["cpu_s"], m["floor_s"]
        goal = bench_frames.SCALE_GOAL_S * n / 1_000_000
        out.append(row(f"{name} of {n:,} rows, CPU vs reading each attribute it shows once", cpu / floor,
                       f"<= {goal:.1f} s", cpu <= goal,
                       f"{cpu:.2f} s vs {floor:.2f} s (CPU, GC on, a warm heap: the second call, the first's "
                       f"frame freed; the first call {m['cold_s']:.2f} s, {m['cold_system_s']:.2f} s of it system "
                       f"time paging fresh memory in; floor by attribute {m['floor_by_attribute_s']:.2f} s, in one "
                       f"pass {m['floor_one_pass_s']:.2f} s)"))
        out.append(row(f"{name} of {n:,} rows, memory vs the same frame with Python-object strings",
                       m["bytes"] / m["object_bytes"], "< 1", m["bytes"] < m["object_bytes"],
                       f"{m['bytes'] / 1e6:.0f} MB vs {m['object_bytes'] / 1e6:.0f} MB "
                       "(Arrow-backed string columns; memory_usage(deep=True))"))
    return out


def first_display(quick: bool) -> list[dict]:
    """Agent() shown in a fresh kernel vs a minimal anywidget in another (bench_first_display.py)."""
    import bench_first_display

    return bench_first_display.rows(quick)


def sessions(quick: bool, tmp: Path) -> list[dict]:
    """Save + load of a 10,000-step session, load_sessions over 1,000 files, to_parquet (bench_sessions.py)."""
    import bench_sessions

    return bench_sessions.rows(quick, tmp)


def sessions_at_scale(quick: bool, tmp: Path) -> list[dict]:
    """A folder of 10,000 sessions: listed, loaded, exported as one dataset, queried, browsed (bench_sessions.py)."""
    import bench_sessions

    return bench_sessions.scale_rows(quick, tmp)


def duckdb_query(quick: bool, tmp: Path) -> list[dict]:
    """A DuckDB group-by over 1,000 exported sessions: one Parquet file vs a file each (bench_duckdb.py)."""
    import bench_duckdb

    return bench_duckdb.rows(quick, tmp)


def widget(quick: bool) -> list[dict]:
    import bench_widget

    result = asyncio.run(bench_widget.one_answer(5_000 if quick else 10_000, 0.002, 10))
    bundle = (ROOT / "nbagent" / "notebook" / "static" / "widget.js").stat().st_size
    return [row("widget bytes sent per streamed answer vs its text", result["ratio"], "<= 2.5",
                result["ratio"] <= 2.5, f"{result['sent_bytes']:,} B for {result['text_bytes']:,} B of text, "
                f"{result['messages']} messages"),
            # widget.js: the chat, and the start of every widget (188 KB before highlight.js went to the lazy
            # grammars.js and the session browser and class view to folders.js, sent only to their widgets)
            row("widget bundle vs 170 KB", bundle / 170_000, "<= 1.0", bundle <= 170_000,
                f"{bundle / 1000:.0f} KB (widget.js: the chat; highlight.js and the folder widgets load on demand)")]


def transcript(quick: bool) -> list[dict]:
    """The saved transcript's bytes over a long chat in a real kernel (bench_transcript.py)."""
    import bench_transcript

    return bench_transcript.rows(quick)


def memory(quick: bool) -> list[dict]:
    from nbagent import Agent
    from nbagent.core.steps import FinishReason
    from nbagent.providers.base import Finish, TextDelta

    from support.scripted import ScriptedProvider

    n = 200_000 if quick else 1_000_000
    piece = "word "
    provider = ScriptedProvider([[TextDelta(piece) for _ in range(n)] + [Finish(FinishReason.STOP, "stop")]])
    conv = Agent(model=provider, max_history_size=50).conversation

    async def consume() -> None:
        async for _ in conv.chat("go"):
            pass

    tracemalloc.start()
    asyncio.run(consume())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    text = n * len(piece)
    ratio = peak / text
    return [row(f"peak memory streaming {n:,} deltas (trimming on) vs the answer's size", ratio, "<= 8",
                ratio <= 8, f"peak {peak / 1e6:.0f} MB for a {text / 1e6:.0f} MB answer (the script itself "
                f"holds {n:,} delta objects)")]


def turns(quick: bool, tmp: Path) -> list[dict]:
    """Mean turn time late in a long session vs early in it (bench_turns.py)."""
    import bench_turns

    n = 2_500 if quick else 5_000
    body = bench_turns.request_body_ms(2 * n)
    out = []
    long = 10_000 if quick else 20_000  # past the 10,000-step cap: trimming runs every turn
    means = bench_turns.turn_ms(long, block=long // 5)
    ratio = means[-1] / means[0]
    out.append(row(f"mean turn in the last fifth of {long:,} turns vs the first fifth (history trimmed at "
                   "10,000 steps)", ratio, f"<= {bench_turns.LONG_GOAL_RATIO}",
                   ratio <= bench_turns.LONG_GOAL_RATIO, f"{bench_turns.summary(means, long // 5)} (CPU time)"))
    for budget in (False, True):
        means = bench_turns.turn_ms(n, block=n // 5, budget=budget)
        ratio = means[-1] / means[0]
        out.append(row(f"mean turn in the last fifth of {n:,} turns vs the first fifth (a model that answers at "
                       f"once{', with a budget and prices' if budget else ''})", ratio, f"<= {bench_turns.GOAL_RATIO}",
                       ratio <= bench_turns.GOAL_RATIO, f"{bench_turns.summary(means, n // 5)} (CPU time)"
                       + ("" if budget else f"; building one OpenAI request body of {2 * n:,} messages takes "
                          f"{body:.1f} ms (the wire carries the whole history: not in these figures)")))
    out.append(autosave_turns(n, tmp))
    return out


def local_start(quick: bool) -> list[dict]:
    """The local model's first token with the server start included, prompt sent as the chat shows
    (bench_local_start.py; no row when the local model is not installed)."""
    import bench_local_start

    return bench_local_start.rows(runs=1 if quick else 3)


def autosave_turns(n: int, tmp: Path) -> dict:
    """Mean turn late vs early with ``Agent(save_to=...)``: a journal line and one fsync per turn."""
    import bench_turns

    folder = tmp / "autosave"
    folder.mkdir(parents=True, exist_ok=True)
    result = bench_turns.autosave_turns(n, folder, block=n // 5)
    means = result["means"]
    ratio = means[-1] / means[0]
    met = ratio <= bench_turns.AUTOSAVE_GOAL_RATIO and means[-1] <= bench_turns.AUTOSAVE_GOAL_MS \
        and result["fsyncs_per_turn"] <= 1.0
    return row(f"mean turn in the last fifth of {n:,} turns vs the first fifth, autosave on (Agent(save_to=...))",
               ratio, f"<= {bench_turns.AUTOSAVE_GOAL_RATIO}, and <= {bench_turns.AUTOSAVE_GOAL_MS} ms + one fsync a turn",
               met, f"{bench_turns.summary(means, n // 5)} (CPU time); {result['fsyncs_per_turn']:.2f} fsyncs and "
               f"{result['wall_ms']:.1f} ms wall per turn")


def served(quick: bool) -> list[dict]:
    """One read_notebook called over MCP through nbagent.serve() vs the same call direct (bench_serve.py)."""
    import bench_serve

    return bench_serve.rows(quick)


def first_token(quick: bool) -> list[dict]:
    """Enter -> the model's first text in the DOM, in JupyterLab (bench_first_token.py)."""
    import bench_first_token

    return bench_first_token.rows(quick)


def browser(quick: bool) -> list[dict]:
    """The widget in a 200-turn chat and one with 50 tool cards, in headless Chromium (bench_browser.py)."""
    import bench_browser

    return bench_browser.rows()


def table(rows: list[dict]) -> str:
    lines = ["| measure | ratio | goal | met | detail |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['measure']} | {r['ratio']:.2f} | {r['goal']} | {'yes' if r['met'] else 'no'} | "
                     f"{r['detail']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--browser", action="store_true",
                    help="also measure the widget in long chats in headless Chromium (needs playwright, jupyterlab)")
    args = ap.parse_args(argv)
    started = time.time()
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"nbagent-bench-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    rows += bench_pipeline.main(["--deltas", "20000" if args.quick else "100000"])
    small, large = bench_sse.decode_seconds(2_000_000), bench_sse.decode_seconds(8_000_000)
    rows.append(row("SSE decoding of one 8 MB event vs one 2 MB event (linear: 4)", large / small, "<= 6",
                    large / small <= 6, f"{small * 1000:.0f} ms and {large * 1000:.0f} ms"))
    for part in (frames, frames_at_scale, first_display, lambda q: sessions(q, tmp), lambda q: sessions_at_scale(q, tmp),
                 lambda q: duckdb_query(q, tmp), widget, transcript, memory, lambda q: turns(q, tmp), local_start,
                 otel_live, served,
                 *([browser, first_token] if args.browser else [])):
        try:
            rows += part(args.quick)
        except Exception as exc:  # one broken measure must not hide the others
            rows.append(row(f"{getattr(part, '__name__', 'a measure')} failed", float("nan"), "-", False, repr(exc)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
               f"load average {load:.2f}")
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = table(rows)
    results = (f"# Benchmark results\n\n{when} · {machine} · {'quick' if args.quick else 'full'} run in "
               f"{time.time() - started:.0f} s (`python bench/run_all.py`)\n\n{body}\n")
    (HERE / "results.md").write_text(results, encoding="utf-8")
    page = ROOT / "docs" / "explanation" / "benchmarks.md"
    text = page.read_text(encoding="utf-8")
    if TABLE_START in text and TABLE_END in text and not args.quick:
        head, rest = text.split(TABLE_START, 1)
        _, tail = rest.split(TABLE_END, 1)
        page.write_text(f"{head}{TABLE_START}\n{when} · {machine}\n\n{body}\n{TABLE_END}{tail}", encoding="utf-8")
    print(results)


if __name__ == "__main__":
    main()
