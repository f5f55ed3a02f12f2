"""The PostgreSQL job queue (app/platform/queue.py, issue 26) on a real PostgreSQL: periodic jobs fire
once across workers, a chat's work is queued once, and a job whose worker is SIGKILLed mid-way is run
again by another worker. The jobs here write a row per run into a table of the test's database: what
ran, with what, on which worker (each queue hands its jobs its own services)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import text

from app.platform.db import make_engine
from app.platform.jobs import Job
from app.platform.queue import PostgresQueue, cron_for, job_key
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def engine(migrated_postgres_url):
    engine = make_engine(migrated_postgres_url)
    with engine.begin() as conn:
        conn.execute(
            text("CREATE TABLE probe_run (id serial PRIMARY KEY, job text, arg int, worker text, done bool)")
        )
    yield engine
    engine.dispose()


def _record(services, job: str, arg: int | None = None, *, done: bool = True) -> None:
    with services.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO probe_run (job, arg, worker, done) VALUES (:job, :arg, :worker, :done)"),
            {"job": job, "arg": arg, "worker": services.name, "done": done},
        )


def tick(services) -> None:
    """The periodic probe: one row per run."""
    _record(services, "probe.tick")


def work(services, chat_id: int) -> None:
    """The on-demand probe: one row per run, with its chat."""
    _record(services, "probe.work", chat_id)


def _rows(engine, sql: str, **params) -> list:
    with engine.connect() as conn:
        return list(conn.execute(text(sql), params))


def _count(engine, sql: str, **params) -> int:
    with engine.connect() as conn:
        return conn.execute(text(sql), params).scalar_one()


@pytest.fixture
def queues(migrated_postgres_url, engine) -> Iterator[list[PostgresQueue]]:
    started: list[PostgresQueue] = []
    yield started
    for queue in started:
        queue.stop()


def _start(queues, url, engine, name: str, jobs, *, worker: bool = True, **options) -> PostgresQueue:
    queue = PostgresQueue(url, jobs, worker_name=name, poll_s=0.2, keep_finished_jobs=True, **options)
    queue.start(SimpleNamespace(engine=engine, name=name), worker=worker)
    queues.append(queue)
    return queue


def test_the_intervals_the_sources_use_have_a_cron():
    assert cron_for(0.25) == "* * * * * */15"
    assert cron_for(5) == "*/5 * * * *"
    assert cron_for(60) == "0 */1 * * *"
    assert cron_for(24 * 60) == "0 0 * * *"
    with pytest.raises(ValueError):
        cron_for(7)
    assert job_key("memory.embed_chat", {"chat_id": 7}) == "memory.embed_chat:7"


def test_a_periodic_job_fires_once_per_tick_across_two_workers(queues, migrated_postgres_url, engine):
    jobs = [Job("probe.tick", tick, every_minutes=1 / 60)]  # every second
    _start(queues, migrated_postgres_url, engine, "one", jobs)
    _start(queues, migrated_postgres_url, engine, "two", jobs)
    wait_for(
        lambda: _count(engine, "SELECT count(*) FROM probe_run WHERE job = 'probe.tick'") >= 6,
        timeout=60,
        what="six ticks run",
    )
    for queue in queues:
        queue.stop()
    # Every tick deferred once (by whichever worker's deferrer came first), and run once.
    per_tick = _rows(
        engine,
        "SELECT args->>'timestamp', count(*) FROM procrastinate_jobs WHERE task_name = 'probe.tick' GROUP BY 1",
    )
    assert len(per_tick) >= 6 and all(count == 1 for _, count in per_tick), per_tick
    finished = _count(
        engine,
        "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'probe.tick' AND status = 'succeeded'",
    )
    assert _count(engine, "SELECT count(*) FROM probe_run WHERE job = 'probe.tick'") == finished


def test_the_same_chats_work_deferred_twice_is_queued_once(queues, migrated_postgres_url, engine):
    jobs = [Job("probe.work", work, every_minutes=None)]
    deferring = _start(queues, migrated_postgres_url, engine, "web", jobs, worker=False)
    assert deferring.defer("probe.work", chat_id=1)
    assert deferring.defer("probe.work", chat_id=1)  # already waiting: nothing more is queued
    assert deferring.defer("probe.work", chat_id=2)
    queued = _rows(
        engine,
        "SELECT queueing_lock, lock, count(*) FROM procrastinate_jobs "
        "WHERE task_name = 'probe.work' AND status = 'todo' GROUP BY 1, 2 ORDER BY 1",
    )
    assert queued == [
        ("probe.work:1", "probe.work:1", 1),
        ("probe.work:2", "probe.work:2", 1),
    ]
    assert deferring.pending("probe.work", chat_id=1) and not deferring.pending("probe.work", chat_id=3)
    worker = _start(queues, migrated_postgres_url, engine, "worker", jobs)
    wait_for(
        lambda: (
            _count(
                engine,
                "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'probe.work' AND status = 'succeeded'",
            )
            == 2
        ),
        timeout=30,
        what="both chats' jobs run",
    )
    assert sorted(_rows(engine, "SELECT arg, worker FROM probe_run")) == [(1, "worker"), (2, "worker")]
    assert not deferring.pending("probe.work", chat_id=1)
    # Once the first ran, the chat's work may be queued again; a paused worker leaves it waiting.
    worker.pause()
    assert deferring.defer("probe.work", chat_id=1)
    assert worker.pending("probe.work", chat_id=1)
    worker.resume()
    wait_for(
        lambda: _count(engine, "SELECT count(*) FROM probe_run WHERE arg = 1") == 2,
        timeout=30,
        what="the chat's second job run",
    )


# A worker in a process of its own: its job writes "started" and never ends, until the process is killed.
DOOMED_WORKER = """
import sys, threading
from types import SimpleNamespace
from sqlalchemy import text
from app.platform.db import make_engine
from app.platform.jobs import Job
from app.platform.queue import PostgresQueue

engine = make_engine(sys.argv[1])

def work(services, chat_id):
    with engine.begin() as conn:
        conn.execute(
            text("INSERT INTO probe_run (job, arg, worker, done) VALUES ('probe.work', :c, 'doomed', false)"),
            {"c": chat_id},
        )
    threading.Event().wait()

queue = PostgresQueue(
    sys.argv[1], [Job("probe.work", work, every_minutes=None)], worker_name="doomed",
    heartbeat_s=0.5, poll_s=0.2, keep_finished_jobs=True,
)
queue.start(SimpleNamespace(engine=engine, name="doomed"))
threading.Event().wait()
"""


def test_a_job_whose_worker_is_killed_mid_way_is_run_again_by_another(
    queues, migrated_postgres_url, engine, tmp_path
):
    jobs = [Job("probe.work", work, every_minutes=None)]
    deferring = _start(queues, migrated_postgres_url, engine, "web", jobs, worker=False)
    assert deferring.defer("probe.work", chat_id=7)
    log_path = tmp_path / "doomed-worker.log"
    with open(log_path, "wb") as log:
        doomed = subprocess.Popen(
            [sys.executable, "-c", DOOMED_WORKER, migrated_postgres_url],
            cwd=REPO,
            env={**os.environ},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: _count(engine, "SELECT count(*) FROM probe_run WHERE worker = 'doomed'") == 1,
            timeout=120,
            what=f"the doomed worker to start the job (log: {log_path})",
        )
        assert _rows(engine, "SELECT status FROM procrastinate_jobs WHERE task_name = 'probe.work'") == [
            ("doing",)
        ]
    finally:
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(30)
    # Another worker finds the job stalled once the dead one's heartbeat is old, and runs it again.
    _start(
        queues,
        migrated_postgres_url,
        engine,
        "rescuer",
        jobs,
        heartbeat_s=0.5,
        stalled_after_s=2,
        stalled_check_cron="* * * * * */1",
    )
    wait_for(
        lambda: _count(engine, "SELECT count(*) FROM probe_run WHERE worker = 'rescuer'") == 1,
        timeout=60,
        what="the rescuing worker to run the killed job again",
    )
    wait_for(
        lambda: (
            _rows(engine, "SELECT status FROM procrastinate_jobs WHERE task_name = 'probe.work'")
            == [("succeeded",)]
        ),
        timeout=30,
        what="the job to finish",
    )
    assert sorted(_rows(engine, "SELECT worker, arg, done FROM probe_run")) == [
        ("doomed", 7, False),
        ("rescuer", 7, True),
    ]


def test_python_m_app_worker_runs_the_apps_jobs_until_told_to_stop(
    queues, migrated_postgres_url, engine, tmp_path
):
    """`python -m app worker`: no HTTP, the app's own jobs from the queue, a clean stop on SIGTERM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUGO_")}
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "app", "worker"],
            cwd=REPO,
            env={**env, "SUGO_DATA_DIR": str(tmp_path / "data"), "SUGO_DATABASE_URL": migrated_postgres_url},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: _count(engine, "SELECT count(*) FROM procrastinate_workers") == 1,
            timeout=240,
            interval=0.1,
            what=f"the worker to register (log: {log_path})",
        )
        # A server that runs no worker of its own asks for a chat's memory sync (a chat that is gone:
        # the job finds nothing to do); the worker process runs it.
        web = _start(
            queues, migrated_postgres_url, engine, "web", [Job("memory.embed_chat", work, None)], worker=False
        )
        assert web.defer("memory.embed_chat", chat_id=12345)
        wait_for(
            lambda: (
                _count(
                    engine, "SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'memory.embed_chat'"
                )
                == 0
            ),
            timeout=60,
            what=f"the worker to run the job (log: {log_path})",
        )
        assert _count(engine, "SELECT count(*) FROM probe_run") == 0  # run by the worker's app, not here
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(60)
    assert code == 0, log_path.read_text()
    assert _count(engine, "SELECT count(*) FROM procrastinate_workers") == 0  # it left the queue


def test_python_m_app_worker_needs_the_postgresql_url(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUGO_")}
    done = subprocess.run(
        [sys.executable, "-m", "app", "worker"],
        cwd=REPO,
        env={**env, "SUGO_DATA_DIR": str(tmp_path / "data")},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 2 and "SUGO_DATABASE_URL" in done.stderr


def test_work_deferred_to_later_waits_once_and_asking_again_starts_the_wait_over(
    queues, migrated_postgres_url, engine
):
    jobs = [Job("probe.work", work, every_minutes=None)]
    deferring = _start(queues, migrated_postgres_url, engine, "web", jobs, worker=False)

    def waiting() -> list:
        return _rows(
            engine,
            "SELECT id, scheduled_at FROM procrastinate_jobs WHERE task_name = 'probe.work' AND status = 'todo'",
        )

    assert deferring.defer_later("probe.work", 3600, chat_id=5)
    [(first_id, first_at)] = waiting()
    assert deferring.pending("probe.work", chat_id=5)
    assert deferring.defer_later("probe.work", 3600, chat_id=5)
    [(second_id, second_at)] = waiting()  # the first was replaced
    assert second_id != first_id and second_at >= first_at
    deferring.cancel("probe.work", chat_id=5)
    assert waiting() == [] and not deferring.pending("probe.work", chat_id=5)
