"""Other agents' logs: ``nbagent.agent_usage`` over generated Claude Code logs, first and second call.

    .venv/bin/python bench/bench_agent_usage.py [--mb 100]

Logs like Claude Code's (a prompt, each answer streamed as three records with one usage, tool
results of a few KB, a subagent log per session) are generated into a temporary folder. Measured
in one run, the same folder each time:

- the first ``agent_usage(folder)`` vs a minimal orjson reader with ccusage's counting rule (parse
  the lines holding ``"usage":``, keep one record per message id + request id, sum the tokens): the
  floor of a Python reader (goal <= 1.2x: the issue's ccusage 20 takes 1.2-1.6 s where the minimal
  reader takes 1.0-1.2 s); totals equal;
- when ccusage 20 is installed (``claude daily --json``, from PATH or ~/.cache/nbagent/ccusage): the
  first call vs ccusage (goal <= 1x) and a second call after one file changed vs ccusage (goal <=
  0.1x: ccusage reads every file again); without it, the second call vs the first.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from measure import row  # noqa: E402

LOGS = HERE.parent / "tests" / "fixtures" / "agent_logs" / "recorded"
FIRST_GOAL = 1.2
SECOND_GOAL = 0.1


def write_logs(root: Path, mb: int, sessions: int = 200) -> int:
    """Claude Code-like logs of about ``mb`` MB under ``root/projects``; the number of files."""
    per_session = mb * 2**20 // sessions
    result = "x" * 2048
    files = 0
    for s in range(sessions):
        sid = f"00000000-0000-4000-8000-{s:012d}"
        folder = root / "projects" / f"-home-u-proj{s % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        base = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": f"/home/u/proj{s % 7}",
                "sessionId": sid, "version": "2.1.197", "gitBranch": "main"}
        lines, size, n = [], 0, 0
        while size < per_session:
            n += 1
            ts = f"2026-01-{1 + (s + n // 50) % 28:02d}T{n % 24:02d}:00:00.000Z"
            usage = {"input_tokens": 3 + n % 5, "cache_creation_input_tokens": 400 + n % 300,
                     "cache_read_input_tokens": 20000 + n * 7, "output_tokens": 100 + n % 90}
            lines.append({**base, "type": "user", "message": {"role": "user", "content": f"step {n}"},
                          "uuid": f"u{n}", "timestamp": ts})
            for part in ({"type": "thinking", "thinking": "plan " * 20}, {"type": "text", "text": "ok " * 30},
                         {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": "/a/b.py"}}):
                lines.append({**base, "type": "assistant", "requestId": f"req_{s}_{n}", "uuid": f"a{n}",
                              "timestamp": ts, "message": {"id": f"msg_{s}_{n}", "role": "assistant",
                                                           "model": "claude-sonnet-4-5-20250929",
                                                           "content": [part], "usage": usage}})
            lines.append({**base, "type": "user", "uuid": f"r{n}", "timestamp": ts, "message": {
                "role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": result}]}})
            size = sum(len(json.dumps(x)) for x in lines[-5:]) * n
        (folder / f"{sid}.jsonl").write_text("\n".join(json.dumps(x, separators=(",", ":")) for x in lines) + "\n")
        files += 1
    return files


def minimal_reader(root: Path) -> int:
    """ccusage's rule in a few lines: one record per (message id, request id), tokens summed."""
    import orjson

    seen: dict[tuple, int] = {}
    loose = 0
    for path in root.rglob("*.jsonl"):
        for line in path.read_bytes().split(b"\n"):
            if b'"usage":' not in line:
                continue
            try:
                r = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            m = r.get("message") or {}
            u = m.get("usage") or {}
            total = (u.get("input_tokens", 0) + u.get("output_tokens", 0) + u.get("cache_read_input_tokens", 0)
                     + u.get("cache_creation_input_tokens", 0))
            if m.get("id") is None:
                loose += total
                continue
            key = (m.get("id"), r.get("requestId"))
            seen[key] = max(seen.get(key, 0), total)
    return sum(seen.values()) + loose


def frame_total(df) -> int:
    return int(df.input_tokens.sum() + df.output_tokens.sum() + df.thinking_tokens.sum())


def timed(fn):
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def ccusage_seconds(root: Path) -> float | None:
    exe = shutil.which("ccusage") or str(Path.home() / ".cache/nbagent/ccusage/node_modules/.bin/ccusage")
    if not os.path.exists(exe):
        return None
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(root), "CLAUDE_CONFIG_DIR": str(root)}
    started = time.perf_counter()
    subprocess.run([exe, "claude", "daily", "--json", "--offline"], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=100)
    args = parser.parse_args(argv)
    import nbagent

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "claude"
        files = write_logs(root, args.mb)
        size = sum(p.stat().st_size for p in root.rglob("*.jsonl")) / 2**20
        minimal_reader(root)  # warm the page cache, as a second run of any tool finds it
        # pandas and the genai-prices catalog loaded (0.4 s once a process), as in a notebook that priced a frame
        nbagent.agent_usage(LOGS)
        want, floor = timed(lambda: minimal_reader(root))
        df, first = timed(lambda: nbagent.agent_usage(root))
        one = next(root.rglob("*.jsonl"))
        with open(one, "ab") as f:
            f.write(b'{"type":"last-prompt","sessionId":"x"}\n')
        again, second = timed(lambda: nbagent.agent_usage(root))
        native = ccusage_seconds(root)
    assert frame_total(df) == want == frame_total(again), (frame_total(df), want)
    print(f"{files} files, {size:.0f} MB, {len(df)} calls: minimal orjson reader {floor:.2f} s, "
          f"agent_usage first {first:.2f} s ({first / floor:.2f}x), second after one file changed {second:.3f} s "
          f"({second / first:.3f}x of the first)" + (f"; ccusage 20 {native:.2f} s" if native else ""))
    rows = [row("agent_usage, first call vs a minimal orjson reader", first / floor, f"<= {FIRST_GOAL}x",
                first / floor <= FIRST_GOAL, f"{size:.0f} MB of Claude Code logs: {first:.2f} s vs {floor:.2f} s")]
    if native:  # the goals: the first call no slower than ccusage, a second one 10x faster
        rows += [row("agent_usage, first call vs ccusage 20", first / native, "<= 1x", first <= native,
                     f"{first:.2f} s vs {native:.2f} s"),
                 row("agent_usage, second call after one file changed vs ccusage 20", second / native,
                     f"<= {SECOND_GOAL}x", second / native <= SECOND_GOAL, f"{second * 1000:.0f} ms vs {native:.2f} s")]
    else:
        rows.append(row("agent_usage, second call after one file changed vs the first", second / first,
                        "(ccusage not installed)", True, f"{second * 1000:.0f} ms vs {first:.2f} s"))
    return rows

if __name__ == "__main__":
    for r in main():
        print(r)
