"""Fixtures shared by integration and browser tests: the test model server and a live Sugo."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from sqlalchemy.engine import Engine

from app.platform.db import make_engine
from app.platform.migrate import upgrade_database
from tests.support.live import LiveSugo
from tests.support.model_server import ModelServer
from tests.support.postgres import migrated_postgres_url, postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.support.waiting import wait_for

FIXTURES = Path(__file__).parent / "fixtures"
SERAPHINA_PNG = FIXTURES / "default_Seraphina.png"

# Property tests: no deadline (a slow example on a loaded machine is no failure; nothing in this
# suite is judged by time) and the same examples every run, so a clean clone's run cannot meet one
# by chance that the last run did not. A property is tried wider by hand (settings(derandomize=False, max_examples=...)).
settings.register_profile("sugo", deadline=None, derandomize=True, database=None)
settings.load_profile("sugo")

# Nothing in the suite may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def models(model_server: ModelServer) -> Iterator[ModelServer]:
    # A new epoch per test: what an earlier test's Sugo left running (a summary thread, Prepare, a
    # recap) reaches the server at that test's address and is refused, never eating this one's script.
    model_server.reset()
    model_server.new_epoch()
    model_server.api_key = None
    yield model_server
    model_server.reset()
    model_server.new_epoch()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request, tmp_path: Path) -> Iterator[Engine]:
    """An engine on Sugo's schema at the newest migration, once on each database Sugo runs on (a
    SQLite file, then a fresh PostgreSQL database): storage code tested with it holds on both."""
    if request.param == "sqlite":
        engine = make_engine(tmp_path / "sugo.db")
        upgrade_database(engine)
    else:
        engine = make_engine(request.getfixturevalue("migrated_postgres_url"))
    try:
        yield engine
    finally:
        engine.dispose()


# The PostgreSQL pass (`make test` runs the portable part of the integration suite again this way):
# with SUGO_TEST_DATABASE=postgres the live Sugo of the `sugo` fixture serves from a fresh PostgreSQL
# database instead of its SQLite file.
ON_POSTGRES = os.environ.get("SUGO_TEST_DATABASE", "sqlite") == "postgres"


@pytest.fixture
def sugo(request, tmp_path: Path) -> Iterator[LiveSugo]:
    url = request.getfixturevalue("migrated_postgres_url") if ON_POSTGRES else None
    with LiveSugo(tmp_path / "data", database_url=url) as live:
        yield live


def jobs_waiting(engine: Engine) -> int:
    """procrastinate's jobs due now and not ended (PostgreSQL)."""
    with engine.connect() as conn:
        return conn.exec_driver_sql(
            "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing') "
            "AND (scheduled_at IS NULL OR scheduled_at <= now())"
        ).scalar_one()


@contextlib.contextmanager
def hold_background(sugo: LiveSugo) -> Iterator[LiveSugo]:
    """`sugo` with its job queue paused inside the block: the start-up pass of the periodic jobs has
    ended (on PostgreSQL a worker thread runs it while the test is already creating its chat), and no
    job runs under the block; work asked for meanwhile waits for its end. Pause the queue, never
    `services.scheduler`: on PostgreSQL the scheduler only times the periodic jobs, and a worker
    thread takes the deferred ones (found: an import's memory job ran under a paused scheduler)."""
    if sugo.engine.dialect.name == "postgresql":
        # Pausing stops this server's worker, and a start-up job deferred but not taken yet would
        # wait in the table and run at `resume`, racing the test for the chat's claim and the model
        # server's script (found: the day summaries' start-up pass answering a reply's script).
        wait_for(lambda: jobs_waiting(sugo.engine) == 0, timeout=30, what="the start-up jobs")
    sugo.services.queue.pause()
    try:
        yield sugo
    finally:
        sugo.services.queue.resume()


@pytest.fixture
def background_held(sugo: LiveSugo) -> Iterator[LiveSugo]:
    """`sugo` with its job queue paused for the whole test (`hold_background`). For a test that runs
    a periodic job's work by hand, or presses a button whose claim a periodic job takes (the day
    summaries' job claims every Conversation chat)."""
    with hold_background(sugo):
        yield sugo


@pytest.fixture
def postgres_sugo(request, tmp_path: Path) -> Iterator[LiveSugo]:
    """A live Sugo serving from a fresh PostgreSQL database (its data folder still holds keys and images)."""
    with LiveSugo(tmp_path / "data", database_url=request.getfixturevalue("migrated_postgres_url")) as live:
        yield live


@pytest.fixture
def two_servers(request, tmp_path: Path) -> Iterator[tuple[LiveSugo, LiveSugo]]:
    """Two live Sugo servers ("one", "two") sharing a fresh PostgreSQL database, each on its own
    loopback port as two machines behind a proxy, with one data folder (the key that seals API keys
    is shared, as it must be). For tests marked postgres."""
    url = request.getfixturevalue("migrated_postgres_url")
    data = tmp_path / "data"
    with (
        LiveSugo(data, database_url=url, server_name="one") as one,
        LiveSugo(data, database_url=url, server_name="two") as two,
    ):
        yield one, two


@pytest.fixture
def api(sugo: LiveSugo):
    with sugo.client() as client:
        yield client


def add_connection(api, models: ModelServer, **overrides) -> dict:
    body = {
        "name": "Test model",
        "kind": "openai",
        "base_url": models.base_url,
        "model": "test-model",
        "context_size": 8192,
        "max_tokens": 256,
        **overrides,
    }
    r = api.post("/api/connections", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def add_character(api, name: str = "Aria", **fields) -> dict:
    body = {
        "name": name,
        "description": f"{name} is a wandering bard.",
        "first_mes": f"*{name} waves.* Hello, {{{{user}}}}!",
        **fields,
    }
    r = api.post("/api/characters", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def new_chat(api, character_ids: list[int], **fields) -> dict:
    r = api.post("/api/chats", json={"character_ids": character_ids, **fields})
    assert r.status_code == 201, r.text
    return r.json()


def read_sse(response) -> list[tuple[str, dict]]:
    import json

    events = []
    for block in response.text.split("\n\n"):
        event, data = "message", ""
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
        if data:
            events.append((event, json.loads(data)))
    return events


def pytest_collection_modifyitems(config, items):
    if ON_POSTGRES:
        # The PostgreSQL pass runs again what the database can change: the tests whose live Sugo (the
        # `sugo` fixture) now serves from PostgreSQL. The rest already ran (storage tests on both
        # databases through the `database` fixture); tests about SQLite itself (sqlite_only) have
        # their PostgreSQL counterparts among the tests marked postgres.
        again = [i for i in items if "sugo" in i.fixturenames and not i.get_closest_marker("sqlite_only")]
        config.hook.pytest_deselected(items=[i for i in items if i not in set(again)])
        items[:] = again
    # Browser tests last: Playwright's sync API keeps an event loop running in the main thread for
    # the rest of the session, and the async provider tests need to start their own.
    items.sort(key=lambda item: "/e2e/" in str(item.fspath))


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (bound, then closed): a connection to it is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port
