"""Bytes and messages the ChatWidget sends per streamed answer, and the browser's last-token latency.

Kernel-less part: a 10,000-delta answer is pushed through ChatWidget(Conversation(...)) at a few
token rates; every comm message the widget sends (custom "deltas" messages and trait updates) is
recorded as the JSON the kernel would put on the wire. Goal: linear in the text, <= 2.5x its size
(each delta once + one re-sync of the finished step), <= 30 messages/s.
Replayed part: the same conversation events into a widget with no loop, flushed every N events: no
timer decides what goes together, so the bytes of two versions compare exactly.
Multi-turn part: what a turn costs as the conversation grows (finished turns live in `history`,
which is re-sent when a turn ends).
Browser part (when chromium + playwright + jupyterlab are there; --no-browser skips it): runs the
20,000-token browser test and reports its timings, including the last-token latency (kernel
generates the last delta -> its word is in the page's DOM).

Run: .venv/bin/python bench/bench_widget.py [--no-browser]     (always exits 0)
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support.streams import StreamConnection, words  # noqa: E402
from nbagent import Conversation  # noqa: E402
from nbagent.core.conversation_state import plumbing_of  # noqa: E402
from nbagent.notebook.widget import ChatWidget  # noqa: E402


def record(w: ChatWidget) -> list:
    log: list = []

    def send(msg, buffers=None):
        log.append((time.monotonic(), msg["method"], len(json.dumps(msg).encode())))

    w._send = send
    return log


async def one_answer(n: int, pace: float, batch: int) -> dict:
    pieces = words(n)
    text_bytes = len("".join(pieces).encode())
    conv = Conversation(StreamConnection(pieces, pace=pace, batch=batch))
    w = ChatWidget(conv)
    log = record(w)
    t0 = time.monotonic()
    await conv.chat_to_completion("go")
    gen = time.monotonic() - t0
    await asyncio.sleep(0.2)
    total = sum(b for _, _, b in log)
    stamps = [t for t, _, _ in log]
    per_s = max((sum(1 for s in stamps if t <= s < t + 1.0) for t in stamps), default=0)
    return {"deltas": n, "gen_s": round(gen, 2), "text_bytes": text_bytes, "sent_bytes": total,
            "ratio": round(total / text_bytes, 3), "messages": len(log),
            "custom": sum(1 for _, m, _ in log if m == "custom"), "updates": sum(1 for _, m, _ in log if m == "update"),
            "max_msgs_per_s": per_s}


async def many_turns(turns: int, n: int) -> list[int]:
    pieces = words(n)
    conv = Conversation(StreamConnection(pieces))
    w = ChatWidget(conv)
    log = record(w)
    per_turn = []
    for _ in range(turns):
        start = len(log)
        await conv.chat_to_completion("again")
        await asyncio.sleep(0.06)
        per_turn.append(sum(b for _, _, b in log[start:]))
    return per_turn


def replayed(flush_every: int) -> tuple[int, int]:
    """(messages, bytes) of five 2,000-delta turns with thinking, their conversation events replayed
    into a widget with no event loop and a flush every ``flush_every`` events: no timer decides what
    goes into a flush, so two versions of the widget compare byte for byte."""
    import copy

    async def events() -> list:
        out: list = []
        conv = Conversation(StreamConnection(words(2000), thinking=["a ", "b"], batch=5))
        plumbing_of(conv).add_listener(lambda e, p: out.append((e, copy.deepcopy(p))))
        for i in range(5):
            await conv.chat_to_completion(f"q{i}")
        return out

    w = ChatWidget(Conversation(None))
    log = record(w)
    flush, w._flush = w._flush, lambda: None  # flushed here only
    for i, (event, payload) in enumerate(asyncio.run(events()), 1):
        w._on_event(event, payload)
        if i % flush_every == 0:
            flush()
    flush()
    return len(log), sum(b for _, _, b in log)


def browser() -> dict | None:
    import importlib.util

    if importlib.util.find_spec("playwright") is None:
        return {"skipped": "playwright not installed"}
    if not Path(os.environ.get("CHROMIUM", "/usr/bin/chromium")).exists():
        return {"skipped": "chromium not found"}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        out = Path(tmp) / "timings.json"
        env = dict(os.environ, NBAGENT_BROWSER_TIMINGS=str(out), TMPDIR=tmp)
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               str(ROOT / "tests" / "test_widget_browser.py"), "-k", "twenty",
                               f"--basetemp={tmp}/pt"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
        if not out.exists():
            return {"failed": proc.stdout[-2000:]}
        return json.loads(out.read_text())


def main() -> None:
    print("one 10,000-delta answer (words of 7 bytes), kernel-less:")
    for label, pace, batch in [("as fast as possible", 0.0, 50), ("~5,000 tokens/s", 0.002, 10), ("~1,000 tokens/s", 0.01, 10)]:
        r = asyncio.run(one_answer(10_000, pace, batch))
        print(f"  {label:20s} {r['gen_s']:6.2f} s  text {r['text_bytes']:7,d} B  sent {r['sent_bytes']:7,d} B  "
              f"ratio {r['ratio']:.2f}x  messages {r['messages']:4d} ({r['custom']} deltas + {r['updates']} updates)  "
              f"max {r['max_msgs_per_s']}/s")
    print("linearity (same pace, ~5,000 tokens/s):")
    for n in (2_500, 5_000, 10_000, 20_000):
        r = asyncio.run(one_answer(n, 0.002, 10))
        print(f"  {n:6,d} deltas: sent {r['sent_bytes']:8,d} B = {r['ratio']:.2f}x text, {r['messages']} messages")
    for every in (1, 10):
        messages, sent = replayed(every)
        print(f"five 2,000-delta turns replayed, a flush every {every:2d} events: {messages:,d} messages, {sent:,d} B")
    per_turn = asyncio.run(many_turns(128, 300))
    text = len("".join(words(300)).encode())
    print(f"128 turns of a 300-delta ({text:,d} B) answer: sent per turn median {sorted(per_turn)[64]:,d} B, "
          f"max {max(per_turn):,d} B (a carry into a high level), total {sum(per_turn) / (128 * text):.1f}x the text "
          f"(finished turns sit in binary-counter levels: each is re-sent ~log2(turns) times)")
    if "--no-browser" not in sys.argv:
        print("browser (20,000-token stream in JupyterLab + chromium):")
        try:
            print("  " + json.dumps(browser()))
        except Exception as exc:  # never fail the bench
            print(f"  failed: {exc!r}")


if __name__ == "__main__":
    main()
