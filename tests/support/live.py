"""A real Sugo server on 127.0.0.1 in a background thread, with its own data folder."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx
import uvicorn
from sqlmodel import Session

from app.__main__ import proxy_options
from app.main import create_app
from app.platform.settings import Settings

# The server thread's name (its event loop runs `async def` routes): tests/support/pool_nesting.py tells
# request threads from the app's background threads by name.
SERVER_THREAD = "live-sugo"


class LiveSugo:
    def __init__(
        self,
        data_dir: Path,
        *,
        password: str | None = None,
        discovery_ports: dict[str, int] | None = None,
        flush_interval_s: float = 0.05,
        sources=None,
        **settings,
    ) -> None:
        settings.setdefault("start_scheduler", True)
        # An open chat page asks now and then for replies Sugo started by itself; off unless a test
        # is about that, so no page changes under a test that did not ask for it.
        settings.setdefault("chat_watch_s", 0)
        self.settings = Settings(
            data_dir=data_dir,
            password=password,
            discovery_ports=discovery_ports or {},
            stream_flush_interval_s=flush_interval_s,
            **settings,
        )
        self.app = create_app(self.settings, sources=sources)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def services(self):
        return self.app.state.services

    @property
    def engine(self):
        return self.services.engine

    def session(self) -> Session:
        return Session(self.engine)

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)

    def start(self) -> LiveSugo:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose proto
        # says TCP, and without it Nagle plus delayed ACKs add ~40 ms to streamed replies.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        # Proxy headers as `python -m app` takes them (SUGO_TRUSTED_PROXIES), not uvicorn's defaults.
        config = uvicorn.Config(
            self.app,
            loop="asyncio",
            http="h11",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=2,
            **proxy_options(self.settings),
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            daemon=True,
            name=f"{SERVER_THREAD}-{self.port}",
        )
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("Sugo did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server:
            self._server.should_exit = True
        if self._thread:
            self._thread.join(timeout=10)

    def __enter__(self) -> LiveSugo:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
