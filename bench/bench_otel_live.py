"""What ``nbagent.trace_live`` costs a turn: CPU per turn with live spans against the same turns without.

    .venv/bin/python bench/bench_otel_live.py [--turns 400]

Turns against bench_turns' instant provider (a two-word answer at once, so the time is nbagent's
own bookkeeping, the least a turn can cost and the largest share tracing can take). Each round runs
``--turns`` turns in a fresh conversation without tracing, then in one traced into the SDK's
InMemorySpanExporter through ``trace_live``'s BatchSpanProcessor; nine rounds, the median ratio.
``turn thread`` is the CPU of the thread that runs the turns (what a turn waits for: handing its
record and steps to ``trace_live``'s worker); ``process`` adds that worker (planning the spans) and
the processor's export thread.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests")]

from bench_turns import instant_provider  # noqa: E402
from measure import row  # noqa: E402

GOAL_RATIO = 1.3  # turn-thread CPU per turn, traced / not traced, with the cheapest possible turn
ROUNDS = 9  # a busy machine moves one round's ratio by +-0.2: the median of nine, not five


def cpu_per_turn(turns: int, traced: bool) -> tuple[float, float]:
    """(turn-thread ms, process ms) per turn over ``turns`` turns of a fresh conversation."""
    import nbagent
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    agent = nbagent.Agent(model=instant_provider())
    live = nbagent.trace_live(agent, exporter=InMemorySpanExporter()) if traced else None

    async def run() -> tuple[float, float]:
        await agent.conversation.chat_to_completion("warm up")
        if live is not None:
            live.flush()  # the first planning's one-time costs (its imports) stay out of the figures
        thread, process = time.thread_time(), time.process_time()
        for i in range(turns):
            await agent.conversation.chat_to_completion(f"question {i}: what is next?")
        if live is not None:
            live.flush()  # the export thread's share counts in the process figure
        return (time.thread_time() - thread) * 1000 / turns, (time.process_time() - process) * 1000 / turns

    try:
        return asyncio.run(run())
    finally:
        if live is not None:
            live.stop()


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=400)
    args = ap.parse_args(argv)
    thread_ratios, process_ratios, plain, traced = [], [], [], []
    for _ in range(ROUNDS):
        base, with_spans = cpu_per_turn(args.turns, False), cpu_per_turn(args.turns, True)
        thread_ratios.append(with_spans[0] / base[0])
        process_ratios.append(with_spans[1] / base[1])
        plain.append(base[0])
        traced.append(with_spans[0])
    ratio = statistics.median(thread_ratios)
    detail = (f"turn thread {statistics.median(traced):.2f} vs {statistics.median(plain):.2f} ms CPU per turn; "
              f"with the export thread {statistics.median(process_ratios):.2f}x ({args.turns} turns, median of "
              f"{ROUNDS})")
    out = [row("a turn with trace_live vs without (instant model, CPU of the turn's thread)", ratio,
               f"<= {GOAL_RATIO}", ratio <= GOAL_RATIO, detail)]
    print(f"{out[0]['measure']}: {ratio:.2f} (goal <= {GOAL_RATIO}); {detail}")
    return out


if __name__ == "__main__":
    main()
