"""The stream pipeline against its floor: a 100,000-delta answer over loopback HTTP, per wire format.

- floor: httpx reads the body, splits it into lines and ``json.loads`` every ``data:`` line;
- nbagent: provider -> ModelConnection -> Conversation, every chunk consumed, history kept
  (``async for chunk in conv.chat(...)``).

Both run in the same process against the same local server (tests/support/fault_server.py);
the script prints each wire's ratio (goal <= 1.3) and always exits 0. ``--deltas N`` changes the size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import httpx  # noqa: E402

from support.fault_server import FaultServer, sse  # noqa: E402
from support.wires import WIRES  # noqa: E402

from nbagent import Agent  # noqa: E402

GOAL = 1.3
KEY = "sk-bench-0123456789abcdef"


async def floor(url: str, body: bytes) -> float:
    t = time.perf_counter()
    n = 0
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", url, json={}) as response:
            buf = b""
            async for chunk in response.aiter_bytes():
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
                        json.loads(line[5:])
                        n += 1
    assert n > 0
    return time.perf_counter() - t


async def pipeline(provider) -> float:
    conv = Agent(model=provider).conversation
    t = time.perf_counter()
    chars = 0
    async for chunk in conv.chat("go"):
        chars += len(getattr(chunk, "text", ""))
    assert chars > 0 and conv.history
    return time.perf_counter() - t


def measure(wire, deltas: int, repeat: int = 5) -> tuple[float, float]:
    body = wire.text_body([f"w{i} " for i in range(deltas)])
    best_floor = best_pipe = float("inf")
    with FaultServer() as server:
        for _ in range(repeat):
            server.push(sse(body), sse(body))
            best_floor = min(best_floor, asyncio.run(floor(server.url + "/raw", body)))
            provider = wire.make_provider(server.url, api_key=KEY)
            best_pipe = min(best_pipe, asyncio.run(pipeline(provider)))
    return best_floor, best_pipe


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser()
    ap.add_argument("--deltas", type=int, default=100_000)
    args = ap.parse_args(argv)
    rows = []
    for wire in WIRES:
        fl, pipe = measure(wire, args.deltas)
        ratio = pipe / fl
        rows.append({"measure": f"stream pipeline, {wire.name}, {args.deltas:,} deltas", "ratio": ratio,
                     "goal": f"<= {GOAL}", "met": ratio <= GOAL,
                     "detail": f"floor {fl:.2f} s, nbagent {pipe:.2f} s ({pipe / args.deltas * 1e6:.1f} µs/delta)"})
        print(f"{wire.name:>16}: floor {fl:.2f} s  nbagent {pipe:.2f} s  ratio {ratio:.2f} (goal <= {GOAL})")
    return rows


if __name__ == "__main__":
    main()
