"""The APScheduler instance. Memory jobs (chunking, embedding, summaries, scenes) register here in
later capabilities; each job takes ids, opens its own session and is idempotent."""

from apscheduler.schedulers.asyncio import AsyncIOScheduler


def make_scheduler() -> AsyncIOScheduler:
    return AsyncIOScheduler(job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60})
