"""Reminders come due: every 15 seconds, and once at start, a tick claims the open tasks whose time
has passed and has their character write to the user about each, in its chat: a real reply, with the
reminder as a system line and the task tools left out of that turn (no reminder sets the next).

Decisions:
- The claim is the database's: `UPDATE task SET status='firing' WHERE id=? AND status='open'` succeeds
  for one tick only, so two ticks racing (two schedulers, a tick at start beside the interval's) fire a
  task once. Before it the tick takes a claim row of the task (kind TASK_DELIVERIES, refreshed by the
  server's heartbeat, given back when the task is settled or reopened), so "firing" can be told apart:
  delivered now by a live server, or left by one that died.
- A chat where a reply is being written is not interrupted: the task goes back to open and the next
  tick tries again.
- The task is settled when its reply ends: a recurring one moves to the first slot of its cadence after
  now (slots missed while Sugo was down are skipped, never fired in a burst), a one-time one is done; a
  reply that failed (no connection, the provider's error) marks a one-time task failed with the reason
  (the Tasks page shows it; a new time reopens it).
- A task left "firing" by a server that died or stopped mid-reply goes back to open once (its kind,
  below, RESUMES; app/platform/jobs.py: at start, and on PostgreSQL when the live servers find its claim
  stale): it fires again, as its reply was cut off. One a live server delivers keeps firing: a second
  server starting meanwhile once reopened it, and the reminder came twice.
- Fired more than `schedule.LATE_AFTER` after its time (Sugo was down, or busy), the reminder says how
  late it is and the task is marked late.

The reply is started through `start_reply` (app/generation/reply.py `start`), handed in by the wiring
(app/sources.py): the generation path sits above the tools in the layers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlmodel import Session, col, select
from starlette.concurrency import run_in_threadpool

from app.chats.models import ChatCharacter
from app.platform.claims import TASK_DELIVERIES
from app.platform.core.errors import UserError
from app.platform.jobs import RESUME, Job, RunKind
from app.platform.timeutil import as_utc
from app.tools.builtin.tasks import TASK_TOOL_NAMES
from app.tools.tasks.core import schedule
from app.tools.tasks.models import Task

log = logging.getLogger(__name__)

TICK_MINUTES = 0.25  # every 15 s
MAX_PER_TICK = 20  # the rest wait for the next tick
StartReply = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Claimed:
    task_id: int
    chat_id: int
    speaker_id: int | None  # None: the character left the chat; its next speaker answers
    reminder: str  # the system line
    fired_at: datetime
    late: bool


def claim_due(services: Any) -> list[Claimed]:
    """Claim the open tasks due by now, each in its own UPDATE that only one tick can win."""
    now = services.clock.now()
    claimed: list[Claimed] = []
    with Session(services.engine, expire_on_commit=False) as session:
        due = session.exec(
            select(Task)
            .where(Task.status == "open", col(Task.due_at) <= now)
            .order_by(col(Task.due_at), col(Task.id))
            .limit(MAX_PER_TICK)
        ).all()
        for task in due:
            late_by = now - as_utc(task.due_at)
            late = schedule.is_late(as_utc(task.due_at), now)
            if not claim(services, session, task.id, now=now):
                continue  # another tick has it
            in_chat = (
                task.character_id is not None
                and session.exec(
                    select(ChatCharacter.character_id).where(
                        ChatCharacter.chat_id == task.chat_id, ChatCharacter.character_id == task.character_id
                    )
                ).first()
            )
            line = schedule.reminder_line(schedule.literal(task.purpose), late_by=late_by if late else None)
            speaker = task.character_id if in_chat else None
            claimed.append(Claimed(task.id, task.chat_id, speaker, line, fired_at=now, late=late))
    return claimed


def claim(services: Any, session: Session, task_id: int, *, now: datetime) -> bool:
    """Claim the task's delivery, then mark it firing and commit; False when another tick or server
    delivers it, or it was open no more (a cancel got there first since it was read)."""
    table = services.claims.table
    if table.take(TASK_DELIVERIES, task_id) is None:
        return False
    try:
        won = session.connection().execute(
            update(Task)
            .where(col(Task.id) == task_id, col(Task.status) == "open")
            .values(status="firing", updated_at=now)
        )
        session.commit()
    except BaseException:
        table.give_back(TASK_DELIVERIES, task_id)
        raise
    if won.rowcount != 1:
        table.give_back(TASK_DELIVERIES, task_id)
        return False
    return True


def reopen(services: Any, task_id: int) -> None:
    """A claimed task whose chat was busy: open again for the next tick, as it was (only its status
    changed)."""
    with Session(services.engine) as session:
        session.connection().execute(
            update(Task).where(col(Task.id) == task_id, col(Task.status) == "firing").values(status="open")
        )
        session.commit()
    services.claims.table.give_back(TASK_DELIVERIES, task_id)


def settle(services: Any, item: Claimed, error: str | None) -> None:
    """The reminder's reply ended (`error`: why it failed): next slot, done or failed; when it fired,
    and whether late, kept for the Tasks page."""
    now = services.clock.now()
    try:
        _settle(services, item, error, now)
    finally:
        services.claims.table.give_back(TASK_DELIVERIES, item.task_id)


def _settle(services: Any, item: Claimed, error: str | None, now: datetime) -> None:
    with Session(services.engine) as session:
        task = session.get(Task, item.task_id)
        if task is None or task.status != "firing":
            return  # deleted with its chat meanwhile
        task.last_error, task.fired_at, task.late = error, item.fired_at, item.late
        if task.interval_hours:
            task.due_at = schedule.next_slot(as_utc(task.due_at), task.interval_hours, now)
            task.status = "open"
        else:
            task.status = "failed" if error else "done"
        task.updated_at = now
        session.add(task)
        session.commit()


def _outcome(gen: Any) -> str | None:
    """Why the reply failed, from its last event; None when it was written (or stopped by the user)."""
    for event, data in reversed(gen.events):
        if event == "error":
            return str(data.get("message") or "The reply failed.")
        if event in ("done", "stopped"):
            return None
    return "The reply ended without a word."


async def fire_due_tasks(services: Any, start_reply: StartReply) -> int:
    """Claim the due reminders and start each one's reply; how many were started."""
    claimed = await run_in_threadpool(claim_due, services)
    started = 0
    loop = asyncio.get_running_loop()
    for item in claimed:
        if services.generations.get(item.chat_id) is not None:
            await run_in_threadpool(reopen, services, item.task_id)
            continue
        try:
            gen = await start_reply(
                services,
                chat_id=item.chat_id,
                action="send",
                content=None,
                speaker_id=item.speaker_id,
                message_id=None,
                reminder=item.reminder,
                excluded_tools=TASK_TOOL_NAMES,
            )
        except UserError as err:
            if services.generations.get(item.chat_id) is not None or "already being written" in str(err):
                await run_in_threadpool(reopen, services, item.task_id)
            else:
                await run_in_threadpool(settle, services, item, str(err))
            continue
        except Exception:
            log.exception("starting the reply for task %s failed", item.task_id)
            await run_in_threadpool(settle, services, item, "The reply could not be started.")
            continue
        started += 1
        gen.task.add_done_callback(_settle_when_done(services, loop, item, gen))
    return started


def _settle_when_done(services: Any, loop: asyncio.AbstractEventLoop, item: Claimed, gen: Any):
    def done(future: asyncio.Future) -> None:
        if future.cancelled():
            return  # the server is stopping: the task stays "firing" and reopens at the next start
        loop.run_in_executor(None, _settle_logged, services, item, _outcome(gen))

    return done


def _settle_logged(services: Any, item: Claimed, error: str | None) -> None:
    try:
        settle(services, item, error)
    except Exception:
        log.exception("settling task %s after its reply failed; it fires again after a restart", item.task_id)


def reopen_cut_short(services: Any) -> int:
    """Tasks left "firing" by a server that stopped mid-reply (no live claim of their delivery) open
    again; how many. One statement reads the claims and changes the tasks: a tick claims a task
    before it marks it firing, so none is reopened under a live delivery."""
    live = services.claims.table.live_ids(TASK_DELIVERIES)
    with Session(services.engine) as session:
        done = session.connection().execute(
            update(Task).where(col(Task.status) == "firing", col(Task.id).not_in(live)).values(status="open")
        )
        session.commit()
        return done.rowcount


def tasks_job(start_reply: StartReply) -> Job:
    async def fire_reminders(services: Any) -> None:
        """Fire the reminders that have come due (every 15 s, and at start for those due while Sugo was down)."""
        await fire_due_tasks(services, start_reply)

    return Job("tasks.fire", fire_reminders, every_minutes=TICK_MINUTES, at_start=True)


TASK_RUNS = RunKind("Reminder delivery", "task", RESUME, reopen_cut_short)
