"""Per-turn cost in a long session: 5,000 turns against a model that answers at once.

    .venv/bin/python bench/bench_turns.py [--turns 5000] [--budget] [--profile]

Each turn is one ``Conversation.chat_to_completion`` against a provider that streams a short
answer with no delay, so the time is nbagent's own bookkeeping (the agent loop, the compaction
count, the prefix fingerprints, the turn log). The history only grows (a context window large
enough that compaction never runs), so any per-turn walk of the whole history shows as a mean
turn time that rises from one thousand turns to the next. Prints ms/turn per thousand and the
ratio of the last thousand to the first (goal: <= 1.3). Times are this process's CPU time, and a
thousand's figure is the median of its ten hundreds: on a busy machine other processes move them
much less than wall time and single means.

``--budget`` also sets a budget and prices (the budget check before each turn and each further
model call). The wire request body itself must carry the whole history: ``request_body_ms``
measures building and serialising one OpenAI chat request body at a given history length, for
comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

GOAL_RATIO = 1.3  # turns 4-5k vs 0-1k, CPU time (issue #32)
LONG_GOAL_RATIO = 2.0  # a 20,000-turn run: its last fifth vs its first
AUTOSAVE_GOAL_RATIO = 2.0  # the same with autosave on (a journal line and one fsync a turn)
AUTOSAVE_GOAL_MS = 2.0  # CPU per turn with autosave on, late in the session (plus one fsync)
BLOCK = 1_000


def instant_provider():
    """A provider that streams a two-word answer and its usage at once (no network, no delay)."""
    from nbagent.core.messages import Message, TextPart
    from nbagent.core.steps import FinishReason, UsageMetadata
    from nbagent.providers.base import Event, Finish, ModelRequest, Provider, TextDelta, Usage

    class InstantProvider(Provider):
        name = "instant"
        model = "instant-1"
        context_window = 1_000_000_000  # compaction never runs: the history only grows

        async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
            yield TextDelta("All ")
            yield TextDelta("done.")
            yield Usage(UsageMetadata(120, 4, 124))
            yield Finish(FinishReason.STOP, "stop", Message("assistant", [TextPart("All done.")]))

    return InstantProvider()


def turn_ms(turns: int, *, budget: bool = False, block: int = BLOCK, save_to: Path | None = None) -> list[float]:
    """Mean ms per turn of each block of ``block`` turns, over ``turns`` turns of one conversation:
    the median of its ten sub-blocks' means (a busy machine's spikes do not decide a block).
    ``save_to``: with autosave into that folder (``Agent(save_to=...)``)."""
    from nbagent import Agent

    options: dict = dict(budget_usd=1e9, pricing={"instant-1": {"input": 1.0, "output": 2.0}}) if budget else {}
    if save_to is not None:
        options["save_to"] = save_to
    conv = Agent(model=instant_provider(), **options).conversation
    sub = max(block // 10, 1)
    means: list[float] = []
    parts: list[float] = []

    async def run() -> None:
        started = time.process_time()
        for i in range(turns):
            await conv.chat_to_completion(f"question {i}: what is next?")
            if (i + 1) % sub == 0:
                now = time.process_time()
                parts.append((now - started) * 1000 / sub)
                started = now
            if (i + 1) % block == 0:
                means.append(statistics.median(parts))
                parts.clear()

    asyncio.run(run())
    return means


def autosave_turns(turns: int, folder: Path, *, block: int = BLOCK) -> dict:
    """``turn_ms`` with autosave on, the fsyncs counted and the wall time per turn (fsyncs included)."""
    import os

    real, calls = os.fsync, [0]

    def counted(fd: int) -> None:
        calls[0] += 1
        real(fd)

    os.fsync = counted
    try:
        started = time.perf_counter()
        means = turn_ms(turns, block=block, save_to=folder)
        wall_ms = (time.perf_counter() - started) * 1000 / turns
    finally:
        os.fsync = real
    return {"means": means, "fsyncs_per_turn": calls[0] / turns, "wall_ms": wall_ms}


def request_body_ms(messages: int, repeat: int = 20) -> float:
    """Best ms to build and serialise one OpenAI chat request body over ``messages`` messages."""
    from nbagent.core.messages import Message, TextPart
    from nbagent.providers import create
    from nbagent.providers.base import ModelRequest

    provider = create("openai", "gpt-4.1-mini", api_key="sk-bench")
    history = [Message("user" if i % 2 == 0 else "assistant",
                       [TextPart(f"question {i // 2}: what is next?" if i % 2 == 0 else "All done.")])
               for i in range(messages)]
    request = ModelRequest(model="gpt-4.1-mini", messages=history)
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        _, _, body = provider.build_http_request(request)
        json.dumps(body)
        best = min(best, time.process_time() - t)
    return best * 1000


def summary(means: list[float], block: int = BLOCK) -> str:
    """``ms/turn by 1,000 turns (1,000: 0.21, 2,000: 0.27, ...)``: each block's mean, by the turn it ends at."""
    blocks = ", ".join(f"{block * (i + 1):,}: {m:.2f}" for i, m in enumerate(means))
    return f"ms/turn by {block:,} turns ({blocks})"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=5_000)
    ap.add_argument("--budget", action="store_true", help="with a budget and prices")
    ap.add_argument("--autosave", action="store_true", help="with Agent(save_to=a temporary folder)")
    ap.add_argument("--profile", action="store_true", help="cProfile the run, top functions by own time")
    args = ap.parse_args(argv)
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(turn_ms, args.turns, budget=args.budget)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    if args.autosave:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            result = autosave_turns(args.turns, Path(folder))
        print(summary(result["means"]))
        print(f"last thousand / first: {result['means'][-1] / result['means'][0]:.2f}; "
              f"{result['fsyncs_per_turn']:.2f} fsyncs and {result['wall_ms']:.2f} ms wall per turn")
        return
    means = turn_ms(args.turns, budget=args.budget)
    ratio = means[-1] / means[0]
    print(summary(means))
    print(f"last thousand / first: {ratio:.2f} (goal <= {GOAL_RATIO}: {'met' if ratio <= GOAL_RATIO else 'not met'})")
    n = 2 * args.turns
    print(f"one OpenAI request body at {n // 5:,} and {n:,} messages: {request_body_ms(n // 5):.2f} ms and "
          f"{request_body_ms(n):.2f} ms")


if __name__ == "__main__":
    main()
