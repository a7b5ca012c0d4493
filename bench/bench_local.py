"""Benchmark: nbagent's tokens/s through the whole stack vs llama.cpp's own.

    python bench/bench_local.py [--runs 5] [--tokens 128] [--threads N] [--json]

Starts the local model (llama.cpp server + SmolLM2-135M), then runs ``--runs``
answers of ``--tokens`` tokens through ``Conversation.chat()`` (provider ->
ModelConnection -> Conversation -> chunks, as a notebook sees them). For each
answer it compares, in the same run:

- server t/s: ``timings.predicted_per_second`` from llama.cpp's final usage
  chunk (the server's own decode speed: predicted_n - 1 tokens after the
  first, over predicted_ms);
- nbagent t/s (like for like): (Text chunks' tokens - 1) / (last Text chunk -
  first Text chunk), both as the caller receives them;
- nbagent t/s (ledger): output tokens / (turn finished - first token), the
  turn ledger's ``output_tokens_per_s`` (it also counts the closing usage
  chunk, ``[DONE]`` and the turn bookkeeping);
- raw HTTP t/s: a bare httpx SSE client on the same server, for reference;
- client CPU ms per token (nbagent's whole stack vs the bare client): the
  overhead that competes with the server for the same cores.

Goal: nbagent t/s >= 95% of the server's. Always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = "Write a long story about a dragon who learns to bake bread."


async def raw_http_run(base_url: str, max_tokens: int) -> dict:
    """The same request with a bare httpx client: the ceiling for any client."""
    import httpx

    body = {
        "model": "smollm2",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": PROMPT},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    first = last = None
    n = 0
    timings: dict = {}
    cpu0 = time.process_time()
    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
        async with client.stream("POST", f"{base_url}/chat/completions", json=body) as r:
            async for line in r.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("timings"):
                    timings = chunk["timings"]
                for choice in chunk.get("choices") or []:
                    if (choice.get("delta") or {}).get("content"):
                        now = time.perf_counter()
                        first = first or now
                        last = now
                        n += 1
    span = (last - first) if first and last else 0.0
    return {
        "tokens": n,
        "cpu_ms_per_token": (time.process_time() - cpu0) * 1000 / max(n, 1),
        "client_tps": (n - 1) / span if span > 0 else 0.0,
        "server_tps": float(timings.get("predicted_per_second") or 0.0),
    }


async def nbagent_run(conv, max_tokens: int) -> dict:
    from nbagent.core.steps import StepSource, Text

    first = last = None
    chunks = 0
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    async for chunk in conv.chat(PROMPT):
        if isinstance(chunk, Text):
            now = time.perf_counter()
            first = first or now
            last = now
            chunks += 1
    t_end = time.perf_counter()
    cpu = time.process_time() - cpu0
    record = conv.turns[-1]
    step = [s for s in conv.history if s.source == StepSource.MODEL][-1]
    timings = (step.raw_usage or {}).get("timings") or {}
    out_tokens = record.usage.candidates_token_count + record.usage.thoughts_token_count
    span = (last - first) if first and last else 0.0
    return {
        "tokens": out_tokens,
        "chunks": chunks,
        "cpu_ms_per_token": cpu * 1000 / max(out_tokens, 1),
        "ttft_s": (first - t0) if first else None,
        "ledger_ttft_s": record.time_to_first_token,
        "client_tps": (chunks - 1) / span if span > 0 else 0.0,
        "caller_tps": out_tokens / (t_end - first) if first and t_end > first else 0.0,
        "ledger_tps": record.output_tokens_per_s or 0.0,
        "server_tps": float(timings.get("predicted_per_second") or 0.0),
        "server_prompt_ms": timings.get("prompt_ms"),
        "finish": record.finish_reason,
    }


def make_conversation(max_tokens: int, threads: int | None):
    from nbagent.conversation import Conversation
    from nbagent.loop.model_connection import ModelConnection
    from nbagent.core.session_settings import AgentSettings
    from nbagent.providers.local import LocalProvider

    try:  # the facade, as users build it
        from nbagent.agent import Agent

        if threads is None:
            agent = Agent(model="local", temperature=0, max_tokens=max_tokens)
            return agent.conversation
    except ImportError:
        pass
    provider = LocalProvider(threads=threads)
    return Conversation(ModelConnection(provider, AgentSettings(temperature=0, max_tokens=max_tokens)))


async def main(args) -> dict:
    from nbagent.providers.local import local_runtime_available, missing_local_runtime, INSTALL_COMMAND

    if not local_runtime_available():
        print(f"local runtime missing ({', '.join(missing_local_runtime())}): {INSTALL_COMMAND}")
        return {}
    conv = make_conversation(args.tokens, args.threads)
    provider = conv.connection.provider
    t0 = time.perf_counter()
    await provider.start()
    startup = time.perf_counter() - t0
    print(f"server: pid {provider.server_pid}, {provider.threads} threads, ready in {startup:.2f}s "
          f"(child's own start-up {provider.startup_seconds:.2f}s)")

    await nbagent_run(conv, args.tokens)  # warm-up (not counted)
    conv.clear_history()
    conv.connection.session.messages.clear()

    rows = []
    raw_rows = []
    for i in range(args.runs):
        conv.connection.session.messages.clear()  # same prompt each time, no growing history
        row = await nbagent_run(conv, args.tokens)
        rows.append(row)
        raw = await raw_http_run(provider.base_url, args.tokens)
        raw_rows.append(raw)
        print(
            f"run {i + 1}: {row['tokens']} tokens ({row['finish']}), ttft {row['ttft_s'] * 1000:.0f} ms | "
            f"server {row['server_tps']:.1f} t/s | nbagent {row['client_tps']:.1f} t/s "
            f"({row['client_tps'] / row['server_tps'] * 100:.1f}%), ledger {row['ledger_tps']:.1f} t/s "
            f"({row['ledger_tps'] / row['server_tps'] * 100:.1f}%) | raw httpx {raw['client_tps']:.1f} t/s "
            f"vs server {raw['server_tps']:.1f} ({raw['client_tps'] / raw['server_tps'] * 100:.1f}%)"
        )
    await conv.disconnect()

    def med(key, rs=rows):
        return statistics.median(r[key] for r in rs)

    summary = {
        "runs": args.runs,
        "max_tokens": args.tokens,
        "threads": provider.threads,
        "startup_s": round(startup, 3),
        "ttft_ms_median": round(med("ttft_s") * 1000, 1),
        "server_tps_median": round(med("server_tps"), 2),
        "nbagent_tps_median": round(med("client_tps"), 2),
        "nbagent_ledger_tps_median": round(med("ledger_tps"), 2),
        "raw_httpx_tps_median": round(med("client_tps", raw_rows), 2),
        "raw_httpx_server_tps_median": round(med("server_tps", raw_rows), 2),
        "nbagent_cpu_ms_per_token": round(med("cpu_ms_per_token"), 3),
        "raw_httpx_cpu_ms_per_token": round(med("cpu_ms_per_token", raw_rows), 3),
        "ratio": round(statistics.median(r["client_tps"] / r["server_tps"] for r in rows), 4),
        "ratio_ledger": round(statistics.median(r["ledger_tps"] / r["server_tps"] for r in rows), 4),
        "ratio_raw_httpx": round(
            statistics.median(r["client_tps"] / r["server_tps"] for r in raw_rows), 4
        ),
    }
    print()
    print(f"server (llama.cpp timings)   {summary['server_tps_median']:7.1f} t/s")
    print(f"nbagent, first->last chunk   {summary['nbagent_tps_median']:7.1f} t/s   "
          f"ratio {summary['ratio'] * 100:.1f}%  (goal >= 95%: "
          f"{'met' if summary['ratio'] >= 0.95 else 'NOT met'})")
    print(f"nbagent, turn ledger         {summary['nbagent_ledger_tps_median']:7.1f} t/s   "
          f"ratio {summary['ratio_ledger'] * 100:.1f}%")
    print(f"bare httpx client            {summary['raw_httpx_tps_median']:7.1f} t/s   "
          f"ratio {summary['ratio_raw_httpx'] * 100:.1f}%")
    print(f"client CPU per token         nbagent {summary['nbagent_cpu_ms_per_token']:.3f} ms, "
          f"bare httpx {summary['raw_httpx_cpu_ms_per_token']:.3f} ms (the server runs on the same cores)")
    print(f"time to first token (median) {summary['ttft_ms_median']:7.0f} ms; server start-up "
          f"{summary['startup_s']:.2f}s")
    if args.json:
        print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", action="store_true", help="also print the summary as JSON")
    try:
        asyncio.run(main(ap.parse_args()))
    except Exception as exc:  # noqa: BLE001 - a benchmark never fails the build
        print(f"benchmark failed: {exc!r}")
    sys.exit(0)
