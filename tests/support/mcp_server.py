"""A real MCP server (the `mcp` SDK's own MCPServer over Streamable HTTP) on 127.0.0.1, in a thread:

    with McpTestServer(token="sk-secret-XYZ") as server:
        ... server.url ...  # http://127.0.0.1:<port>/mcp

Tools: `echo(text)`, `add(a, b)`, `fail(reason)` (answers isError) and `hang()`, which waits until the
server stops (far longer than any limit a test sets). With `token`, every request must carry
`Authorization: Bearer <token>` or gets 401; `auth_headers` and `hosts` record what each request carried.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.responses import PlainTextResponse

HOST = "127.0.0.1"


def _build_server(stopping: threading.Event) -> MCPServer:
    # MCPServer configures logging (logging.basicConfig with a rich handler) unless the root logger
    # already has a handler: given one for the moment, it leaves the test run's logging alone.
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)
    try:
        server = MCPServer("sugo-test", log_level="WARNING")
    finally:
        root.removeHandler(guard)

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails, with the reason given."""
        raise ValueError(reason)

    @server.tool()
    async def hang() -> str:
        """Never answers while the server runs."""
        while not stopping.is_set():
            await anyio.sleep(0.05)
        return "stopped"

    return server


class _RequireToken:
    """Refuses requests without the expected bearer token (401), recording the header each carried."""

    def __init__(self, app, owner: McpTestServer) -> None:
        self.app = app
        self.owner = owner

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization", b"").decode()
            self.owner.auth_headers.append(auth)
            self.owner.hosts.append(headers.get(b"host", b"").decode())
            if self.owner.token and auth != f"Bearer {self.owner.token}":
                await PlainTextResponse("token required", status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class McpTestServer:
    def __init__(self, *, token: str | None = None) -> None:
        self.token = token
        self.auth_headers: list[str] = []
        self.hosts: list[str] = []  # the Host header of each request
        self._stopping = threading.Event()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/mcp"

    def start(self) -> McpTestServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
        self._socket = sock
        self.port = sock.getsockname()[1]
        app = _build_server(self._stopping).streamable_http_app()
        config = uvicorn.Config(
            _RequireToken(app, self),
            http="h11",
            loop="asyncio",
            lifespan="on",  # the SDK's session manager runs in the app's lifespan
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"mcp-server-{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("The test MCP server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._stopping.set()  # a hanging call returns, so the server can shut down
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> McpTestServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
