"""A real OTLP/HTTP trace receiver on loopback: ``POST /v1/traces`` with a protobuf
``ExportTraceServiceRequest``, decoded with opentelemetry-proto, as a collector would.

``OtlpReceiver()`` is a context manager; ``.url`` is its base URL, ``.requests`` the decoded
requests, ``.spans()`` every received span as a :class:`ReceivedSpan`. ``status=`` makes it answer
every request with that HTTP status (a refusing receiver).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                      ExportTraceServiceResponse)


@dataclass
class ReceivedSpan:
    name: str
    trace_id: str  # hex, as OTLP carries it (bytes)
    span_id: str
    parent_span_id: str  # "" for a root span
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error
    service_name: str
    scope: str


def any_value(v: Any) -> Any:
    """An OTLP AnyValue as a Python value."""
    which = v.WhichOneof("value")
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, which) if which else None


class OtlpReceiver:
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.paths.append(self.path)
                receiver.content_types.append(self.headers.get("Content-Type") or "")
                if receiver.status == 200 and self.path == "/v1/traces":
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver.requests.append(request)
                    reply, code = ExportTraceServiceResponse().SerializeToString(), 200
                else:
                    reply, code = b"refused", receiver.status if receiver.status != 200 else 404
                self.send_response(code)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def spans(self) -> list[ReceivedSpan]:
        out = []
        for request in self.requests:
            for rs in request.resource_spans:
                resource = {kv.key: any_value(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append(ReceivedSpan(
                            s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.kind,
                            s.start_time_unix_nano, s.end_time_unix_nano,
                            {kv.key: any_value(kv.value) for kv in s.attributes}, s.status.code,
                            resource.get("service.name", ""), ss.scope.name))
        return out
