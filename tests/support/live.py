"""A real Sugo server on 127.0.0.1 in a background thread, with its own data folder."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn
from sqlmodel import Session

from app.__main__ import proxy_options
from app.main import create_app
from app.platform.db import make_engine
from app.platform.migrate import upgrade_database
from app.platform.settings import Settings

# The server thread's name (its event loop runs `async def` routes): tests/support/pool_nesting.py tells
# request threads from the app's background threads by name.
SERVER_THREAD = "live-sugo"


@functools.cache
def _migrated_sqlite() -> Path:
    """A SQLite database at the newest schema, made once per test process."""
    folder = tempfile.mkdtemp(prefix="sugo-template-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # else each test run leaves one behind
    path = Path(folder) / "sugo.db"
    engine = make_engine(path)
    upgrade_database(engine)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
    engine.dispose()
    return path


def _seed_data_folder(settings: Settings) -> None:
    """A new data folder starts with a copy of the migrated database, as the app would have made it
    (owner-only folder and file): migrating an empty database costs a fifth of a second, and the suite
    starts about a thousand Sugos. A folder that exists is the test's own and is left as it is."""
    if settings.database_url or settings.data_dir.exists():
        return
    settings.data_dir.parent.mkdir(parents=True, exist_ok=True)
    settings.data_dir.mkdir(mode=0o700)
    shutil.copyfile(_migrated_sqlite(), settings.database_path)
    os.chmod(settings.database_path, 0o600)


class _Server(uvicorn.Server):
    """uvicorn's server, woken at once by `wake` when told to exit: its own loop looks every 0.1 s, a
    tenth of a second at each of the suite's thousand stops."""

    _loop: asyncio.AbstractEventLoop | None = None
    _woken: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._woken = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    def wake(self) -> None:
        if self._loop is not None and self._woken is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: it was ending anyway
                self._loop.call_soon_threadsafe(self._woken.set)


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
        _seed_data_folder(self.settings)
        self.app = create_app(self.settings, sources=sources)
        # Before any thread uses the pool: a test's recorder attaches later without adding a listener.
        from tests.support.pool_nesting import watch

        watch(self.engine)
        self._server: _Server | None = None
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
        self._server = _Server(config)
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
            self._server.wake()
        if self._thread:
            self._thread.join(timeout=10)

    def __enter__(self) -> LiveSugo:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
