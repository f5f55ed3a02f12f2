"""Background work that prompt sources declare (app/prompt/sources.py): the jobs the scheduler runs,
and the kinds of runs kept in the database that the app settles once at start.

Jobs: each takes the app's services first, then ids, opens its own session and is idempotent: one that
dies half-way is simply run again.

Runs (one rule for all): a run the user watches in a panel (Prepare existing history, Fix, Re-scan,
Backfill, day Backfill, a Generate and its queue, an automatic summary) is a row that says "running"
while a thread of this process works it. A restart (a crash, a SIGKILL, an update) leaves such rows
behind with no thread. At start, before the scheduler and before the first request, `settle_runs`
hands every one of them to its kind, which either
- RESUMES it: work the user asked for that never redoes what was finished (Prepare, both Backfills, an
  automatic summary, a Generate that was waiting its turn, recaps being written), or
- CLOSES it with a sentence its panel and the API show (Fix, Re-scan, a Generate whose answer was on
  its way): work whose plan was made for a moment that has passed, which the user runs again.
No run is left "running" without a thread, so no panel shows progress frozen for ever. Each kind says
which, and why, in its own module; the README lists them.

Several servers on PostgreSQL: a server that dies leaves its runs "running" and its claims in the
database, and no start of its own may come. Every server looks now and then (`look_after_dead_servers`,
every DEAD_SERVER_LOOK_S) for claims nobody refreshed for the stale time; when it finds some, it
finishes the replies those servers were writing and settles the runs as a start would. Each kind's
settle skips a run whose chat a live claim holds (on any server) and resumes into a claim taken in the
database, so two servers looking at once resume a run once. Then it drops the stale claims it saw.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """A background job a source declares. A periodic one: `func(services)` is called every
    `every_minutes`, and once at start as well when `at_start` (work cut off by a shutdown then
    resumes without waiting for the interval). An on-demand one (`every_minutes` None):
    `func(services, **args)` runs when asked for with `services.queue.defer(id, **args)`, for example
    a chat's memories after a reply.

    The same declaration serves both databases (app/platform/queue.py): on SQLite the app's own
    scheduler runs it in this process; on PostgreSQL it is a procrastinate task any server's worker
    runs (a periodic one fires once across all servers)."""

    id: str  # "memory.sweep"
    func: Callable[..., None]
    every_minutes: float | None
    at_start: bool = False

    @property
    def periodic(self) -> bool:
        return self.every_minutes is not None


# The OS priority ("nice") of the threads doing background work that takes the CPU (embedding a chat's
# memories): when a page or a reply wants the same core, the system gives it to them first.
BACKGROUND_NICE = 10


def lower_this_threads_priority(nice: int = BACKGROUND_NICE) -> None:
    """Give the calling thread a lower OS priority, for good (raising it again would need privileges):
    call it only on threads that do nothing but background work (the scheduler's workers, a rebuild's
    own thread). Linux only, where a thread has its own nice value; elsewhere setpriority would lower
    the whole process, so nothing is done."""
    if not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError:  # a container that forbids it: the work runs at the usual priority
        log.debug("could not lower the priority of thread %s", tid)


def make_scheduler() -> AsyncIOScheduler:
    return AsyncIOScheduler(job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60})


def register_jobs(scheduler: AsyncIOScheduler, jobs: Iterable[Job], services: Any) -> None:
    """The periodic jobs on the scheduler (on-demand ones wait to be deferred)."""
    for job in jobs:
        if job.every_minutes is None:
            continue
        scheduler.add_job(
            job.func, "interval", minutes=job.every_minutes, args=[services], id=job.id, replace_existing=True
        )
        if job.at_start:
            scheduler.add_job(
                job.func,
                args=[services],
                id=f"{job.id}_at_start",
                replace_existing=True,
                misfire_grace_time=None,
            )


def run_soon(scheduler: AsyncIOScheduler | None, func: Callable[..., Any], *args: Any, job_id: str) -> bool:
    """Run `func(*args)` in the background as soon as the scheduler can; a job with the same id
    that has not started yet is replaced (one pending run per id). False when no scheduler runs."""
    if scheduler is None or not scheduler.running:
        return False
    # A second instance may start while one runs: APScheduler would otherwise drop it, and the work
    # it was asked for (a message just deleted) would wait for the sweep. The job itself keeps two
    # runs from overlapping where that matters (memory.recall.jobs.ChatSyncs).
    scheduler.add_job(
        func, args=list(args), id=job_id, replace_existing=True, misfire_grace_time=None, max_instances=2
    )
    return True


def run_later(
    scheduler: AsyncIOScheduler | None, func: Callable[..., Any], *args: Any, job_id: str, delay_s: float
) -> bool:
    """Run `func(*args)` in the background `delay_s` seconds from now; asked again before then, the
    pending run is replaced and the wait starts over (work that should follow a burst of changes once
    they settle). False when no scheduler runs."""
    if scheduler is None or not scheduler.running:
        return False
    when = datetime.now(UTC) + timedelta(seconds=max(delay_s, 0))
    scheduler.add_job(
        func,
        "date",
        run_date=when,
        args=list(args),
        id=job_id,
        replace_existing=True,
        misfire_grace_time=None,
        max_instances=2,
    )
    return True


def job_pending(scheduler: AsyncIOScheduler | None, job_id: str) -> bool:
    """A job asked for with `run_soon` has not started yet."""
    return scheduler is not None and scheduler.running and scheduler.get_job(job_id) is not None


RESUME = "resume"  # the run goes on from where it stopped
CLOSE = "close"  # the run ends, keeping `reason` for its panel


@dataclass(frozen=True)
class RunKind:
    """A kind of run kept in the database that a restart can cut short, and what the next start does with
    it (RESUME, or CLOSE with `reason`). `settle(services)` does it for each such run that no thread of
    this process works (so it is safe at any time, not only at start) and returns how many it settled;
    `table` names where the runs live (a meta-test checks that every table of runs has a kind)."""

    name: str  # "Fix"
    table: str  # "scene_run"
    on_restart: str  # RESUME or CLOSE
    settle: Callable[[Any], int]
    reason: str = ""  # CLOSE: the sentence the closed run keeps


# How often each server looks for what a server that died left (read at every look: a test shortens it).
DEAD_SERVER_LOOK_S = 60.0


def settle_after_dead_servers(services: Any) -> dict[str, int]:
    """When claims went stale (a server died, or one stalled past the stale time): the replies it was
    writing marked interrupted, its runs resumed or closed (`settle_runs`), its stale claims dropped;
    what was settled, by kind. Nothing stale: nothing is read past the claims."""
    table = services.claims.table
    stale = table.stale()
    if not stale:
        return {}
    settled = {"Replies": services.generations.finish_abandoned()}
    settled.update(settle_runs(services))
    table.drop_stale(stale)
    return settled


async def look_after_dead_servers(services: Any) -> None:
    """`settle_after_dead_servers` every DEAD_SERVER_LOOK_S, for as long as the app runs (a task)."""
    while True:
        await asyncio.sleep(DEAD_SERVER_LOOK_S)
        try:
            settled = await asyncio.to_thread(settle_after_dead_servers, services)
        except Exception:  # a busy or unreachable database: the next look tries again
            log.warning("could not look for work a stopped server left", exc_info=True)
            continue
        if any(settled.values()):
            log.warning("Picked up what a server that stopped left: %s", settled)


def settle_runs(services: Any) -> dict[str, int]:
    """Resume or close every run a restart cut short, kind by kind in the order the sources declare them
    (a kind that resumes into a shared claim goes before one that would wait for it); how many per kind.
    One kind failing is logged and leaves the others to settle."""
    settled: dict[str, int] = {}
    for kind in services.sources.runs():
        try:
            settled[kind.name] = count = kind.settle(services)
        except Exception:
            log.exception("settling the %s runs a restart cut short failed", kind.name)
            continue
        if count:
            log.warning(
                "%s: %d run(s) cut short by the last shutdown %s.",
                kind.name,
                count,
                "resumed" if kind.on_restart == RESUME else "closed",
            )
    return settled
