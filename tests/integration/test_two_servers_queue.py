"""Two Sugo servers on one PostgreSQL share one job queue (issue 26): 200 replies spread over both give
exactly one embedding job each, whichever server's worker runs it. Both servers run in this process on
their own ports with one data folder (as tests/integration/test_two_servers.py does); each counts the
runs of its memory job through the job's own declaration (a counting wrapper of the same job)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from app.memory.recall.jobs import EMBED_CHAT, sync_chat
from app.platform.jobs import Job
from app.sources import default_sources
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.live import LiveSugo
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres
REPLIES = 200


class EmbedRuns:
    """How many times the memory job ran, per chat and per server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.per_chat: Counter[int] = Counter()
        self.per_server: Counter[str] = Counter()

    def sources(self):
        """The app's sources, with Memory Recall's on-demand job counted as it runs."""
        sources = default_sources()
        recall = next(source for source in sources if source.name == "recall")
        declared = recall.jobs()

        def counted_sync_chat(services, chat_id: int) -> None:
            """Memory Recall's per-chat sync, counted."""
            with self._lock:
                self.per_chat[chat_id] += 1
                self.per_server[services.settings.server_name] += 1
            sync_chat(services, chat_id)

        # The sweep is left out: a 10-minute tick falling within the test asks again for every chat's job.
        jobs = tuple(
            Job(job.id, counted_sync_chat, job.every_minutes, job.at_start) if job.id == EMBED_CHAT else job
            for job in declared
            if job.id != "memory.sweep"
        )
        assert any(job.id == EMBED_CHAT for job in jobs)
        recall.jobs = lambda: jobs
        return sources

    def total(self) -> int:
        with self._lock:
            return sum(self.per_chat.values())


@pytest.fixture
def counted_servers(tmp_path, migrated_postgres_url) -> Iterator[tuple[LiveSugo, LiveSugo, EmbedRuns]]:
    runs = EmbedRuns()
    data = tmp_path / "data"
    with (
        LiveSugo(data, database_url=migrated_postgres_url, server_name="one", sources=runs.sources()) as one,
        LiveSugo(data, database_url=migrated_postgres_url, server_name="two", sources=runs.sources()) as two,
    ):
        yield one, two, runs


def _waiting_embed_jobs(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(
            text(
                "SELECT count(*) FROM procrastinate_jobs WHERE task_name = :task AND status IN ('todo', 'doing')"
            ),
            {"task": EMBED_CHAT},
        ).scalar_one()


def test_replies_spread_over_two_servers_give_exactly_one_embedding_job_each(counted_servers, models):
    one, two, runs = counted_servers
    with one.client() as api_one, two.client() as api_two:
        apis = (api_one, api_two)
        add_connection(api_one, models)
        character = add_character(api_one)["id"]
        # One reply per chat: each reply asks for its chat's memory job once, and no other reply of the
        # chat can share it (a second request while one waits is folded into it, by design).
        chats = [new_chat(apis[n % 2], [character])["id"] for n in range(REPLIES)]

        def reply(n: int) -> str:
            api = apis[n % 2]  # every other reply through the other server
            events = read_sse(
                api.post(f"/api/chats/{chats[n]}/generate", json={"action": "send", "content": f"Reply {n}"})
            )
            return events[-1][0]

        with ThreadPoolExecutor(4) as pool:
            outcomes = list(pool.map(reply, range(REPLIES)))
    assert outcomes == ["done"] * REPLIES
    wait_for(
        lambda: runs.total() >= REPLIES and _waiting_embed_jobs(one.engine) == 0,
        timeout=120,
        interval=0.1,
        what="every reply's memory job to run",
    )
    assert runs.per_chat == Counter({chat_id: 1 for chat_id in chats})
    # Both servers' workers took jobs from the one queue.
    assert set(runs.per_server) == {"one", "two"} and runs.per_server.total() == REPLIES
