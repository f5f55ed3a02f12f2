"""The APScheduler instance and job registration. Prompt sources declare their jobs (app/prompt/
sources.py); the app registers them all at start. Each job takes the app's services first, then
ids, opens its own session and is idempotent: one that dies half-way is simply run again."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler


@dataclass(frozen=True)
class Job:
    """A background job a source runs on a schedule. `func(services)` is called every
    `every_minutes`, and once at start as well when `at_start` (work cut off by a shutdown then
    resumes without waiting for the interval)."""

    id: str  # "memory.sweep"
    func: Callable[[Any], None]
    every_minutes: float
    at_start: bool = False


def make_scheduler() -> AsyncIOScheduler:
    return AsyncIOScheduler(job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60})


def register_jobs(scheduler: AsyncIOScheduler, jobs: Iterable[Job], services: Any) -> None:
    for job in jobs:
        scheduler.add_job(job.func, "interval", minutes=job.every_minutes, args=[services], id=job.id,
                          replace_existing=True)  # fmt: skip
        if job.at_start:
            scheduler.add_job(job.func, args=[services], id=f"{job.id}_at_start", replace_existing=True,
                              misfire_grace_time=None)  # fmt: skip


def run_soon(scheduler: AsyncIOScheduler | None, func: Callable[..., Any], *args: Any, job_id: str) -> bool:
    """Run `func(*args)` in the background as soon as the scheduler can; a job with the same id
    that has not started yet is replaced (one pending run per id). False when no scheduler runs."""
    if scheduler is None or not scheduler.running:
        return False
    # A second instance may start while one runs: APScheduler would otherwise drop it, and the work
    # it was asked for (a message just deleted) would wait for the sweep. The job itself keeps two
    # runs from overlapping where that matters (memory.recall.jobs.ChatSyncs).
    scheduler.add_job(func, args=list(args), id=job_id, replace_existing=True, misfire_grace_time=None,
                      max_instances=2)  # fmt: skip
    return True


def run_later(scheduler: AsyncIOScheduler | None, func: Callable[..., Any], *args: Any, job_id: str,
              delay_s: float) -> bool:  # fmt: skip
    """Run `func(*args)` in the background `delay_s` seconds from now; asked again before then, the
    pending run is replaced and the wait starts over (work that should follow a burst of changes once
    they settle). False when no scheduler runs."""
    if scheduler is None or not scheduler.running:
        return False
    when = datetime.now(UTC) + timedelta(seconds=max(delay_s, 0))
    scheduler.add_job(func, "date", run_date=when, args=list(args), id=job_id, replace_existing=True,
                      misfire_grace_time=None, max_instances=2)  # fmt: skip
    return True


def job_pending(scheduler: AsyncIOScheduler | None, job_id: str) -> bool:
    """A job asked for with `run_soon` has not started yet."""
    return scheduler is not None and scheduler.running and scheduler.get_job(job_id) is not None
