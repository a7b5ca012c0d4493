"""A scripted Anthropic Messages API on loopback, for running a real Claude Code headless (no network,
no key). Adapted from tests/fixtures/agent_logs/recorded/scripted_model.py (the server that recorded
Claude Code 2.1.197's logs).

``ScriptedAnthropic(script)`` answers ``POST .../v1/messages`` as the API streams (SSE). The main
agent's request (one whose tools include ``script``'s first tool) gets the step numbered by how many
assistant messages it already holds: a ``tool_use`` of ``(name, input)``, or a final text for a
``str`` step. Any other request (a title, a quota probe) gets a short text. ``requests`` keeps every
main-agent request body, so a test can read what the client sent back (the tool results).
"""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = tuple[str, dict] | str


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _stream(n: int, model: str, step: Step) -> bytes:
    usage = {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
    out = [_sse("message_start", {"type": "message_start", "message": {
        "id": f"msg_scripted_{n:03d}", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage}})]
    if isinstance(step, str):
        block, delta, stop = {"type": "text", "text": ""}, {"type": "text_delta", "text": step}, "end_turn"
    else:
        name, arguments = step
        block = {"type": "tool_use", "id": f"toolu_scripted_{n:03d}", "name": name, "input": {}}
        delta, stop = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}, "tool_use"
    out += [_sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 20}}),
            _sse("message_stop", {"type": "message_stop"})]
    return b"".join(out)


class ScriptedAnthropic:
    """The server (a daemon thread): ``url`` for ``ANTHROPIC_BASE_URL``, ``requests``, ``close()``."""

    def __init__(self, script: list[Step]) -> None:
        self.script = script
        self.requests: list[dict] = []
        counter = itertools.count(1)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body: dict[str, Any] = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                path = self.path.split("?")[0]
                if path.endswith("/count_tokens"):
                    return self._send(b'{"input_tokens": 100}', "application/json")
                if not path.endswith("/messages"):
                    return self._send(b"{}", "application/json", 404)
                self._send(_stream(next(counter), str(body.get("model", "claude")), owner.step_for(body)),
                           "text/event-stream")

            def do_GET(self) -> None:  # noqa: N802
                self._send(b'{"data": [], "models": []}', "application/json")

            def _send(self, data: bytes, kind: str, code: int = 200) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def step_for(self, body: dict) -> Step:
        tools = {t.get("name") for t in body.get("tools") or []}
        first = self.script[0]
        if isinstance(first, str) or first[0] not in tools:
            return "Notebook fix"  # a title or any side request
        self.requests.append(body)
        done = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
        return self.script[min(done, len(self.script) - 1)]

    def tool_results(self) -> list[str]:
        """The text of every tool result the client sent back, in order (from its last request)."""
        if not self.requests:
            return []
        texts = []
        for message in self.requests[-1].get("messages") or []:
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    content = block.get("content")
                    texts.append(content if isinstance(content, str) else "".join(
                        part.get("text", "") for part in content or [] if isinstance(part, dict)))
        return texts

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
