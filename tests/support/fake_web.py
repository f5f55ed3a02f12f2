"""A small real web site on a loopback address, in a thread: the pages, redirects and fake search
engines (Brave, SearXNG) the web tools' tests fetch from. Each route is a function of the request
giving (status, headers, body); every request is recorded, so a test can show one never arrived."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

Answer = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass
class FakeWeb:
    host: str = "127.0.0.1"
    routes: dict[str, Callable[[Seen], Answer]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def hits(self, path: str) -> int:
        return sum(1 for s in self.seen if s.path == path)

    def page(
        self, path: str, body: str | bytes, content_type: str = "text/html; charset=utf-8", status: int = 200
    ):
        data = body.encode() if isinstance(body, str) else body
        self.routes[path] = lambda _seen: (status, {"Content-Type": content_type}, data)

    def redirect(self, path: str, location: str, status: int = 302):
        self.routes[path] = lambda _seen: (status, {"Location": location}, b"")

    def json(self, path: str, value, status: int = 200):
        self.page(path, json.dumps(value), "application/json", status)

    def __enter__(self) -> FakeWeb:
        web = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802  (http.server's name)
                parts = urlsplit(self.path)
                seen = Seen(
                    "GET", parts.path, parse_qs(parts.query), {k.lower(): v for k, v in self.headers.items()}
                )
                web.seen.append(seen)
                route = web.routes.get(parts.path)
                status, headers, body = (
                    route(seen) if route else (404, {"Content-Type": "text/plain"}, b"no such page")
                )
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet
                pass

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        # A short poll: shutdown() waits for the loop to look, 0.5 s by default, on every test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
