"""The process nbagent starts for an MCP server over stdio: ``python mcp_relay.py CAP -- COMMAND...``.

It runs the server as its child and copies the server's output to nbagent line by line (its
input and stderr are the server's own). Standard library only: it runs as a script, no package
import.

- It dies with its parent, and the server with it: ``PR_SET_PDEATHSIG`` (SIGKILL) on Linux for
  both, so a killed kernel leaves no server behind (the MCP SDK also puts them in a process group
  of their own, which it kills on shutdown).
- A line of more than CAP bytes (one JSON-RPC message; the SDK joins a long line at quadratic
  cost: 50 MB took over a minute) is cut while it is read: a tool result's text and other blocks
  are shortened with a note saying so; one still too big, or past HARD_LIMIT, becomes a JSON-RPC
  error for its request, so the call ends at once with a clear message.
"""

from __future__ import annotations

import ctypes
import json
import re
import signal
import subprocess
import sys
from typing import IO, Any

PR_SET_PDEATHSIG = 1
HARD_LIMIT = 512 * 1024 * 1024  # a line longer than this is not parsed, only answered with an error
CHUNK = 1024 * 1024
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


def _libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


LIBC = _libc()


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process when its parent ends (Linux; elsewhere nothing)."""
    if LIBC is not None:
        LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))


def note(size: int, cap: int) -> str:
    return (f"[nbagent: the server's reply was {size:,} bytes, over the {cap:,}-byte cap "
            "(mcp_tools(..., max_message_bytes=)); cut]")


def shrink(message: Any, size: int, cap: int) -> bytes | None:
    """A tool result cut to fit ``cap`` bytes (its text blocks' ends, big other blocks left out)."""
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return None
    budget, said = cap // 8, note(size, cap)
    blocks = []
    for block in result["content"]:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            text = block["text"]
            if len(text) > budget:
                block = {**block, "text": f"{text[:budget]}\n… [{len(text) - budget:,} characters cut] {said}"}
            budget = max(budget - len(block["text"]), 0)
        elif len(json.dumps(block)) > budget:
            kind = block.get("type", "content") if isinstance(block, dict) else "content"
            block = {"type": "text", "text": f"[a {kind} block left out] {said}"}
        blocks.append(block)
    result["content"] = blocks
    if "structuredContent" in result:  # its long strings cut the same way (it must still fit its schema)
        result["structuredContent"] = cut_strings(result["structuredContent"], cap // 8, said)
    encoded = json.dumps(message).encode("utf-8") + b"\n"
    return encoded if len(encoded) <= cap else None


def cut_strings(value: Any, limit: int, said: str) -> Any:
    """``value`` with every string longer than ``limit`` cut, saying so."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}\n… [{len(value) - limit:,} characters cut] {said}"
    if isinstance(value, dict):
        return {k: cut_strings(v, limit, said) for k, v in value.items()}
    if isinstance(value, list):
        return [cut_strings(v, limit, said) for v in value]
    return value


def error_line(head: bytes, size: int, cap: int) -> bytes:
    """A JSON-RPC error answering the request whose reply was too big (nothing if it has no id)."""
    found = _ID.search(head[:4096])
    if found is None:
        sys.stderr.write(f"nbagent: dropped a {size:,}-byte message from the server (over the cap)\n")
        return b""
    error = {"jsonrpc": "2.0", "id": json.loads(found.group(1)),
             "error": {"code": -32603, "message": f"the reply was too big to pass on: {note(size, cap)}"}}
    return json.dumps(error).encode("utf-8") + b"\n"


def oversized(head: bytes, source: IO[bytes], cap: int) -> bytes:
    """The rest of a line longer than ``cap`` read, and the line cut to fit (or an error for it)."""
    parts, size, complete = [head], len(head), head.endswith(b"\n")
    while not complete:
        chunk = source.readline(CHUNK)
        if not chunk:
            break
        size += len(chunk)
        complete = chunk.endswith(b"\n")
        if size <= HARD_LIMIT:
            parts.append(chunk)
    if size <= HARD_LIMIT:
        try:
            cut = shrink(json.loads(b"".join(parts)), size, cap)
        except ValueError:
            cut = None
        if cut is not None:
            return cut
    return error_line(head, size, cap)


def relay(source: IO[bytes], out: IO[bytes], cap: int) -> None:
    while True:
        line = source.readline(cap + 1)
        if not line:
            return
        if len(line) > cap:
            line = oversized(line, source, cap)
        out.write(line)
        out.flush()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: mcp_relay.py CAP -- COMMAND [ARGS...]\n")
        return 2
    cap, command = int(argv[1]), argv[3:]
    die_with_parent()
    try:
        server = subprocess.Popen(command, stdout=subprocess.PIPE,
                                  preexec_fn=die_with_parent if LIBC is not None else None)
    except OSError as exc:
        sys.stderr.write(f"cannot start {command[0]!r}: {exc}\n")
        return 127
    signal.signal(signal.SIGTERM, lambda *_: server.terminate())
    assert server.stdout is not None
    try:
        relay(server.stdout, sys.stdout.buffer, cap)
    except (BrokenPipeError, KeyboardInterrupt):
        server.terminate()
    code = server.wait()
    if code:  # the last line of its stderr, quoted in nbagent's error when it did not start
        how = f"status {code}" if code > 0 else f"signal {-code}"
        sys.stderr.write(f"[nbagent] the server exited with {how}\n")
        sys.stderr.flush()
    return code if code >= 0 else 128 - code  # killed by a signal: 128 + its number, as a shell says


if __name__ == "__main__":
    sys.exit(main(sys.argv))
