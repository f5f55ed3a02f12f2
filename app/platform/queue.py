"""Where background work runs: one interface over the two databases' ways (issue 26).

    services.queue.defer("memory.embed_chat", chat_id=7)   # this chat's memories, soon, queued once

The jobs are the `Job` declarations the prompt sources make (app/platform/jobs.py); the same
declarations serve both queues:
- `InProcessQueue` (SQLite, the default): the app's own APScheduler in this process, exactly as
  before. A periodic job runs on its interval; a deferred one replaces a pending run of the same
  job and arguments.
- `PostgresQueue` (SUGO_DATABASE_URL on PostgreSQL): procrastinate, a job queue kept in the
  database, so any Sugo server sharing it, or `python -m app worker`, runs the work. Why
  procrastinate: queueing locks, retries, periodic tasks and stalled-job detection are the
  database's business there, not a home-made protocol.
  - A periodic job is a procrastinate periodic task: every worker's deferrer tries, the database
    keeps one per tick, so it fires once across all servers. Its queueing lock keeps a single run
    waiting when a slow one is still at work.
  - A deferred job carries `queueing_lock` and `lock` "<job id>:<args>" ("memory.embed_chat:7"):
    the same chat's work is never queued twice (asking again while one waits is a no-op: the waiting
    one will see the newest messages), and never runs twice at once on two servers.
  - A job killed mid-way (its server SIGKILLed) is left "doing" with a worker whose heartbeat stops;
    the periodic `sugo.retry_stalled_jobs` puts it back to "todo" once the worker is stale, and
    another worker runs it again (jobs are idempotent, app/platform/jobs.py). A job that raises is
    retried a few times, later each time.
  - Work not yet moved to the queue still uses `services.scheduler` (an APScheduler without the
    periodic jobs), so nothing behaves differently on PostgreSQL until its call site moves.

Each queue belongs to `Services` (never module-level), is started and stopped by the app's lifespan,
and knows the services it hands to each job."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from app.platform.jobs import Job, job_pending, make_scheduler, register_jobs, run_later, run_soon

if TYPE_CHECKING:
    import procrastinate
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger(__name__)

# How often a worker says it is alive, and how long without a word makes its "doing" jobs stalled.
HEARTBEAT_S = 10.0
STALLED_AFTER_S = 60.0
STALLED_CHECK_CRON = "* * * * *"  # once a minute, across all servers
WORKER_CONCURRENCY = 4  # jobs at once per worker (each in a thread of its own: the jobs are sync)
RETRY = {"max_attempts": 5, "wait": 10, "exponential_wait": 2}  # a job that raised: 10 s, 20 s, 40 s…
RETRY_STALLED = "sugo.retry_stalled_jobs"


def job_key(name: str, args: dict[str, Any]) -> str:
    """The job's name and arguments, "memory.embed_chat:7": one pending run per key."""
    return name + "".join(f":{args[key]}" for key in sorted(args))


def cron_for(every_minutes: float) -> str:
    """A procrastinate cron (seconds as a sixth field) firing every `every_minutes`, for the
    intervals the sources use: seconds dividing a minute, minutes dividing an hour, whole hours
    dividing a day."""
    seconds = round(every_minutes * 60)
    if 0 < seconds < 60 and 60 % seconds == 0:
        return f"* * * * * */{seconds}"
    minutes, rest = divmod(seconds, 60)
    if not rest and 0 < minutes < 60 and 60 % minutes == 0:
        return f"*/{minutes} * * * *"
    hours, rest = divmod(minutes, 60)
    if not rest and hours == 24:
        return "0 0 * * *"
    if not rest and 0 < hours < 24 and 24 % hours == 0:
        return f"0 */{hours} * * *"
    raise ValueError(f"no cron runs a job every {every_minutes} minutes")


def psycopg_conninfo(database_url: str) -> str:
    """The libpq URI psycopg takes, from SQLAlchemy's postgresql+psycopg://… URL."""
    from sqlalchemy.engine import make_url

    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


class JobQueue(Protocol):
    scheduler: AsyncIOScheduler | None
    shared: bool  # other servers take jobs from it too: a chat's work goes through it, not inline

    def start(self, services: Any, *, worker: bool = True) -> None:
        """Run the periodic jobs and take deferred work (with `worker`, this process runs jobs)."""

    def stop(self) -> None: ...

    def pause(self) -> None:
        """Take no more jobs here until `resume`; those running have ended when it returns (deferred
        ones wait; a test holds background work so)."""

    def resume(self) -> None: ...

    def defer(self, name: str, **args: Any) -> bool:
        """Run the on-demand job `name` with `args` soon; False when nothing runs jobs (not started)."""
        ...

    def defer_later(self, name: str, delay_s: float, **args: Any) -> bool:
        """Run the job `delay_s` seconds from now; asked again before then, the waiting run is replaced
        and the wait starts over (work that follows a burst of changes once they settle)."""
        ...

    def pending(self, name: str, **args: Any) -> bool:
        """A deferred run of the job with these arguments waits to start."""
        ...

    def cancel(self, name: str, **args: Any) -> None:
        """Drop the deferred run of the job with these arguments that waits to start, if any."""


class InProcessQueue:
    """The jobs on this process's APScheduler (SQLite: one process owns the database)."""

    shared = False

    def __init__(self, jobs: Iterable[Job]) -> None:
        self._jobs = {job.id: job for job in jobs}
        self._services: Any = None
        self.scheduler: AsyncIOScheduler | None = None
        # Runs handed to the executor and not yet ended: `pause` waits for them, as the PostgreSQL
        # queue's does (its worker stops after the jobs in hand).
        self._running = 0
        self._ended = threading.Condition()

    def start(self, services: Any, *, worker: bool = True) -> None:
        from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_SUBMITTED

        self._services = services
        scheduler = make_scheduler()
        scheduler.add_listener(self._count, EVENT_JOB_SUBMITTED | EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
        scheduler.start()
        self.scheduler = scheduler
        register_jobs(scheduler, self._jobs.values(), services)

    def _count(self, event: Any) -> None:
        from apscheduler.events import EVENT_JOB_SUBMITTED

        with self._ended:
            self._running += 1 if event.code == EVENT_JOB_SUBMITTED else -1
            self._ended.notify_all()

    def stop(self) -> None:
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    def pause(self) -> None:
        """No job starts until `resume`, and those running have ended when this returns (call it
        from a thread other than the app's event loop, which ends them)."""
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.pause()
            with self._ended:
                self._ended.wait_for(lambda: self._running <= 0, timeout=30)

    def resume(self) -> None:
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.resume()

    def defer(self, name: str, **args: Any) -> bool:
        job = self._jobs[name]
        return run_soon(self.scheduler, partial(job.func, self._services, **args), job_id=job_key(name, args))

    def defer_later(self, name: str, delay_s: float, **args: Any) -> bool:
        job = self._jobs[name]
        work = partial(job.func, self._services, **args)
        return run_later(self.scheduler, work, job_id=job_key(name, args), delay_s=delay_s)

    def pending(self, name: str, **args: Any) -> bool:
        return job_pending(self.scheduler, job_key(name, args))

    def cancel(self, name: str, **args: Any) -> None:
        if job_pending(self.scheduler, key := job_key(name, args)):
            assert self.scheduler is not None
            self.scheduler.remove_job(key)


class PostgresQueue:
    """The jobs as procrastinate tasks in the PostgreSQL database, run by a worker thread of this
    process (each Sugo server has one) and by `python -m app worker`."""

    shared = True

    def __init__(
        self,
        database_url: str,
        jobs: Iterable[Job],
        *,
        worker_name: str = "sugo",
        concurrency: int = WORKER_CONCURRENCY,
        heartbeat_s: float = HEARTBEAT_S,
        stalled_after_s: float = STALLED_AFTER_S,
        stalled_check_cron: str = STALLED_CHECK_CRON,
        poll_s: float = 5.0,
        keep_finished_jobs: bool = False,
    ) -> None:
        self._conninfo = psycopg_conninfo(database_url)
        self._jobs = {job.id: job for job in jobs}
        self._worker_name = worker_name
        self._concurrency = concurrency
        self._heartbeat_s = heartbeat_s
        self._stalled_after_s = stalled_after_s
        self._stalled_check_cron = stalled_check_cron
        self._poll_s = poll_s
        # Finished jobs stay in procrastinate_jobs to be looked at; by default only failed ones do.
        self._delete_jobs = "never" if keep_finished_jobs else "successful"
        self._services: Any = None
        self._app_loop: asyncio.AbstractEventLoop | None = None
        self._deferrer: procrastinate.App | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._worker_ready = threading.Event()
        self.scheduler: AsyncIOScheduler | None = None

    # -- the procrastinate app the worker runs ---------------------------------------------------

    def _worker_app(self) -> procrastinate.App:
        import procrastinate

        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=self._conninfo))
        for job in self._jobs.values():
            if inspect.iscoroutinefunction(job.func):
                run: Any = partial(_run_async_job, job, self._services, self._app_loop)
            else:
                run = partial(_run_job, job, self._services)
            task = app.task(name=job.id, retry=procrastinate.RetryStrategy(**RETRY))(run)
            if job.every_minutes is not None:
                # Its own locks: a periodic run still waiting keeps the next tick from piling up, and one
                # runs at a time across servers (the at-start run of a server starting meanwhile included).
                app.periodic(
                    cron=cron_for(job.every_minutes), periodic_id=job.id, queueing_lock=job.id, lock=job.id
                )(task)

        stalled_after_s = self._stalled_after_s

        async def retry_stalled_jobs(context: procrastinate.JobContext, timestamp: int) -> int:
            manager = context.app.job_manager
            stalled = await manager.get_stalled_jobs(seconds_since_heartbeat=stalled_after_s)
            for job in stalled:
                log.warning(
                    "job %s (%s) was cut off with its worker: running it again", job.id, job.task_name
                )
                await manager.retry_job(job)
            return len(stalled)

        stalled_task = app.task(name=RETRY_STALLED, pass_context=True, queueing_lock=RETRY_STALLED)(
            retry_stalled_jobs
        )
        app.periodic(cron=self._stalled_check_cron, periodic_id=RETRY_STALLED)(stalled_task)
        return app

    async def _work(self, app: procrastinate.App) -> None:
        async with app.open_async():
            self._worker_task = asyncio.create_task(
                app.run_worker_async(
                    name=self._worker_name,
                    concurrency=self._concurrency,
                    install_signal_handlers=False,
                    update_heartbeat_interval=self._heartbeat_s,
                    stalled_worker_timeout=self._stalled_after_s,
                    fetch_job_polling_interval=self._poll_s,
                    delete_jobs=self._delete_jobs,
                    shutdown_graceful_timeout=5,
                )
            )
            self._loop = asyncio.get_running_loop()
            self._worker_ready.set()
            try:
                await self._worker_task
            except asyncio.CancelledError:
                pass

    def _run_worker(self, app: procrastinate.App) -> None:
        try:
            asyncio.run(self._work(app))
        except Exception:  # the database went away for good: the server goes on, jobs wait for a worker
            log.exception("the job queue's worker stopped")
        finally:
            self._worker_ready.set()

    # -- JobQueue ----------------------------------------------------------------------------------

    def start(self, services: Any, *, worker: bool = True) -> None:
        import procrastinate

        self._services = services
        try:  # the app's event loop, where async jobs run (started from the lifespan, on that loop)
            self._app_loop = asyncio.get_running_loop()
        except RuntimeError:
            self._app_loop = None
        self._deferrer = procrastinate.App(
            connector=procrastinate.SyncPsycopgConnector(conninfo=self._conninfo, min_size=1, max_size=4)
        ).open()
        # Work not moved to the queue yet (see the module doc): the in-process scheduler, no periodic jobs,
        # on the app's event loop (a bare worker in a test has none, and no such work).
        if self._app_loop is not None:
            scheduler = make_scheduler()
            scheduler.start()
            self.scheduler = scheduler
        if worker:
            for job in self._jobs.values():  # as the in-process queue does: cut-off work resumes at once
                if job.at_start:
                    self._defer(job.id, {}, queueing_lock=job.id, lock=job.id)
            self._start_worker()

    def _start_worker(self) -> None:
        self._worker_ready.clear()
        self._loop = self._worker_task = None
        self._thread = threading.Thread(
            target=self._run_worker, args=(self._worker_app(),), name="job-queue-worker", daemon=True
        )
        self._thread.start()
        self._worker_ready.wait(30)

    def _stop_worker(self) -> None:
        if self._loop is not None and self._worker_task is not None:
            try:
                self._loop.call_soon_threadsafe(self._worker_task.cancel)
            except RuntimeError:  # its loop ended already (the worker stopped on its own)
                pass
        if self._thread is not None:
            self._thread.join(15)
            self._thread = None

    def pause(self) -> None:
        """This server stops taking jobs (those running end first); deferring goes on. Other
        servers' workers, if any, still take them."""
        self._stop_worker()
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.pause()

    def resume(self) -> None:
        if self._thread is None and self._deferrer is not None:
            self._start_worker()
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.resume()

    def stop(self) -> None:
        self._stop_worker()
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        if self._deferrer is not None:
            self._deferrer.close()
            self._deferrer = None

    def _defer(
        self,
        name: str,
        args: dict[str, Any],
        *,
        queueing_lock: str,
        lock: str | None,
        delay_s: float | None = None,
    ) -> bool:
        import procrastinate

        if self._deferrer is None:
            return False
        later = {"schedule_in": {"seconds": delay_s}} if delay_s is not None else {}
        try:
            self._deferrer.configure_task(name, queueing_lock=queueing_lock, lock=lock, **later).defer(**args)
        except procrastinate.exceptions.AlreadyEnqueued:
            pass  # one waits already: it will see everything this one would have
        return True

    def defer(self, name: str, **args: Any) -> bool:
        if name not in self._jobs:
            raise KeyError(f"no job {name!r} is declared")
        key = job_key(name, args)
        return self._defer(name, args, queueing_lock=key, lock=key)

    def defer_later(self, name: str, delay_s: float, **args: Any) -> bool:
        if name not in self._jobs:
            raise KeyError(f"no job {name!r} is declared")
        self.cancel(name, **args)  # the wait starts over (two servers at once: one of them queues it)
        key = job_key(name, args)
        return self._defer(name, args, queueing_lock=key, lock=key, delay_s=max(delay_s, 0))

    def pending(self, name: str, **args: Any) -> bool:
        if self._deferrer is None:
            return False
        key = job_key(name, args)
        return bool(self._deferrer.job_manager.list_jobs(queueing_lock=key, status="todo"))

    def cancel(self, name: str, **args: Any) -> None:
        if self._deferrer is None:
            return
        manager = self._deferrer.job_manager
        for job in manager.list_jobs(queueing_lock=job_key(name, args), status="todo"):
            assert job.id is not None
            manager.cancel_job_by_id(job.id, delete_job=True)


def _run_job(job: Job, services: Any, timestamp: int | None = None, **args: Any) -> None:
    """One procrastinate task: the declared job with the app's services (a periodic task's tick,
    `timestamp`, is not the job's business)."""
    job.func(services, **args)


async def _run_async_job(
    job: Job,
    services: Any,
    app_loop: asyncio.AbstractEventLoop | None,
    timestamp: int | None = None,
    **args: Any,
) -> None:
    """An async job runs on the app's own event loop, as on the in-process scheduler: what it starts
    there (a reminder's reply) lives with the app's other replies, not in the worker's loop."""
    if app_loop is None or app_loop.is_closed():
        await job.func(services, **args)
        return
    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(job.func(services, **args), app_loop))


def make_queue(settings: Any, jobs: Iterable[Job]) -> JobQueue:
    """The app's queue: in process on SQLite, procrastinate's on PostgreSQL."""
    if settings.database_url:
        return PostgresQueue(settings.database_url, jobs, worker_name=settings.server)
    return InProcessQueue(jobs)
