"""A scripted model API on loopback, for running a real Claude Code or Codex headless (no network, no
key). Adapted from tests/fixtures/agent_logs/recorded/scripted_model.py (the server that recorded
Claude Code 2.1.197's and Codex 0.171.0's logs).

``ScriptedModelApi(script)`` answers ``POST .../messages`` as the Anthropic Messages API streams (SSE)
and ``POST .../responses`` as the OpenAI Responses API does. The main agent's request (one offering
``script``'s first tool) gets the step numbered by how many tool calls it already holds: a call of
``(name, arguments)``, or a final text for a ``str`` step. Tool names are Claude Code's,
``mcp__<server>__<tool>``; to Codex, which offers an MCP server's tools as the namespace
``mcp__<server>``, the same name is sent as that namespace and the tool. Any other request (a title)
gets a short text. ``tool_results()`` reads what the client sent back.
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


def _responses_stream(n: int, step: Step) -> bytes:
    if isinstance(step, str):
        item: dict = {"type": "message", "role": "assistant", "id": f"msg_{n}",
                      "content": [{"type": "output_text", "text": step, "annotations": []}]}
    else:
        namespace, _, name = step[0].rpartition("__")
        item = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": name,
                "namespace": namespace, "arguments": json.dumps(step[1])}
    rid = f"resp_scripted_{n:03d}"
    usage = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    return b"".join([_sse("response.created", {"type": "response.created", "response": {"id": rid}}),
                     _sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                        "item": item}),
                     _sse("response.completed", {"type": "response.completed", "response": {"id": rid,
                                                                                              "usage": usage}})])


def _offered(body: dict) -> set[str]:
    """The tool names a request offers, a namespace's tools as ``<namespace>__<tool>``."""
    names = set()
    for tool in body.get("tools") or []:
        names.add(str(tool.get("name")))
        for inner in tool.get("tools") or [] if tool.get("type") == "namespace" else []:
            names.add(f"{tool.get('name')}__{inner.get('name')}")
    return names


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


class ScriptedModelApi:
    """The server (a daemon thread): ``url`` (``ANTHROPIC_BASE_URL``; Codex's ``base_url`` is ``url + "/v1"``),
    ``requests`` (the main agent's), ``close()``."""

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
                if path.endswith("/messages"):
                    step = owner.step_for(body, sum(m.get("role") == "assistant" for m in body.get("messages") or []))
                    return self._send(_stream(next(counter), str(body.get("model", "claude")), step),
                                      "text/event-stream")
                if path.endswith("/responses"):
                    step = owner.step_for(body, sum(i.get("type") == "function_call" for i in body.get("input") or []))
                    return self._send(_responses_stream(next(counter), step), "text/event-stream")
                self._send(b"{}", "application/json", 404)

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

    def step_for(self, body: dict, done: int) -> Step:
        first = self.script[0]
        if isinstance(first, str) or first[0] not in _offered(body):
            return "Notebook fix"  # a title or any side request
        self.requests.append(body)
        return self.script[min(done, len(self.script) - 1)]

    def tool_results(self) -> list[str]:
        """The text of every tool result the client sent back, in order (from its last request)."""
        if not self.requests:
            return []
        last = self.requests[-1]
        texts = [_text(item.get("output")) for item in last.get("input") or [] if item.get("type") == "function_call_output"]
        for message in last.get("messages") or []:
            for block in message.get("content") if isinstance(message.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    texts.append(_text(block.get("content")))
        return texts

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
