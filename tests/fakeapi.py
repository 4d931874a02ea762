"""A local HTTP server that speaks just enough of the provider APIs for tests (127.0.0.1 only).

Tests register a handler per path; every request body is recorded so a test can assert the
exact JSON the real SDK sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[[dict[str, Any], dict[str, str]], tuple[int, dict[str, Any]]]


@dataclass
class FakeApi:
    """Routes and the requests received."""

    routes: dict[str, Handler] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    base_url: str = ""


def _make_handler(api: FakeApi) -> type[BaseHTTPRequestHandler]:
    class RequestHandler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:  # keep test output clean
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = self.path.split("?", 1)[0]
            api.requests.append((path, headers, body))
            handler = api.routes.get(path)
            if handler is None:
                status, payload = (
                    404,
                    {"type": "error", "error": {"type": "not_found_error", "message": path}},
                )
            else:
                status, payload = handler(body, headers)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return RequestHandler


@contextmanager
def serve(routes: dict[str, Handler]) -> Iterator[FakeApi]:
    """Run a FakeApi on an ephemeral 127.0.0.1 port for the duration of the block."""
    api = FakeApi(routes=dict(routes))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(api))
    api.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
