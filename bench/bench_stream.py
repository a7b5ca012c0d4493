"""How the cost of streaming one answer grows with its length, through the whole core.

A scripted provider emits N text deltas as fast as it can; the answer goes through
ModelConnection -> Conversation (history upserts, usage, chunk filtering). Linear
streaming means time per delta stays flat as N grows: the script prints the time per
delta for N and 4N and their ratio (about 1.0 when linear; no asserts, exit 0).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.scripted import ScriptedProvider  # noqa: E402

from nbagent import Agent  # noqa: E402
from nbagent.providers.base import Finish, TextDelta  # noqa: E402
from nbagent.core.steps import FinishReason  # noqa: E402


def per_delta(n: int, piece: str = "word ") -> float:
    provider = ScriptedProvider([[TextDelta(piece) for _ in range(n)] + [Finish(FinishReason.STOP, "stop")]])
    conv = Agent(model=provider).conversation

    async def run() -> float:
        t = time.perf_counter()
        chunks = 0
        async for _ in conv.chat("go"):
            chunks += 1
        assert chunks == n
        return time.perf_counter() - t

    return asyncio.run(run()) / n


def main() -> None:
    for n in (5_000, 20_000):
        small = min(per_delta(n) for _ in range(3))
        big = min(per_delta(4 * n) for _ in range(3))
        print(f"{n:>6} deltas: {small * 1e6:6.1f} µs/delta   {4 * n:>6} deltas: {big * 1e6:6.1f} µs/delta"
              f"   ratio {big / small:.2f} (1.0 = linear)")


if __name__ == "__main__":
    main()
