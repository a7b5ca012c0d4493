"""What every bench script shares: a result row of bench/run_all.py's table, and a best-of timer."""

from __future__ import annotations

import time


def row(measure: str, ratio: float, goal: str, met: bool, detail: str) -> dict:
    """One row of the results table (docs/explanation/benchmarks.md, bench/results.md)."""
    return {"measure": measure, "ratio": ratio, "goal": goal, "met": met, "detail": detail}


def best_ms(fn, repeat: int, number: int = 1, timer=time.perf_counter) -> float:
    """The best of ``repeat`` timings of ``number`` calls of ``fn``, in ms per call (the garbage
    collector left on, as in use)."""
    best = float("inf")
    for _ in range(repeat):
        started = timer()
        for _ in range(number):
            fn()
        best = min(best, timer() - started)
    return best / number * 1000.0
