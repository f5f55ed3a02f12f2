"""Tasks' rows: create, change, cancel and list them, and the user's time zone they are read in.
Services flush, never commit (the tool's handler or the request commits). Times are aware UTC in and
out; the table keeps them naive UTC."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import func
from sqlmodel import Session, col, select

from app.characters.models import Character
from app.chats.models import Chat
from app.personas.models import Persona
from app.platform.core.errors import NotFound, UserError
from app.platform.db import chat_scope, lock_for_write
from app.platform.timeutil import as_utc
from app.tools.tasks.core import schedule
from app.tools.tasks.models import Task

log = logging.getLogger(__name__)

OPEN = ("open", "firing")
RECENT_LIMIT = 50  # finished tasks the Tasks page lists


@dataclass(frozen=True)
class Zone:
    """Where the user's clock is: the tzinfo and the name shown beside times."""

    tz: tzinfo
    label: str


def server_zone() -> Zone:
    """The server's own time zone, by its IANA name when the system says it (TZ, /etc/timezone,
    /etc/localtime's link), else the fixed offset the C library reports."""
    names = [os.environ.get("TZ", "").lstrip(":")]
    try:
        names.append(Path("/etc/timezone").read_text().strip())
    except OSError:
        pass
    try:
        names.append(str(Path("/etc/localtime").resolve()).split("/zoneinfo/", 1)[1])
    except (OSError, IndexError):
        pass
    for name in names:
        if name:
            try:
                return Zone(ZoneInfo(name), name)
            except (ZoneInfoNotFoundError, ValueError):
                continue
    local = datetime.now().astimezone().tzinfo or UTC
    return Zone(local, datetime.now(local).tzname() or "UTC")


def user_zone(session: Session, persona_id: int | None) -> Zone:
    """The persona's time zone when it set one (and it is still known), else the server's."""
    persona = session.get(Persona, persona_id) if persona_id else None
    if persona is not None and persona.time_zone:
        try:
            return Zone(ZoneInfo(persona.time_zone), persona.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            log.warning(
                "persona %s has an unknown time zone %r; the server's applies", persona_id, persona.time_zone
            )
    return server_zone()


def open_count(session: Session, chat_id: int) -> int:
    return session.exec(
        select(func.count()).select_from(Task).where(Task.chat_id == chat_id, col(Task.status).in_(OPEN))
    ).one()


def create_task(
    session: Session,
    *,
    chat_id: int,
    character_id: int | None,
    persona_id: int | None,
    purpose: str,
    due_at: datetime,
    interval_hours: int | None,
    now: datetime,
) -> Task:
    purpose = _purpose(purpose)
    # Counted and added in one write transaction: two calls cannot both pass 50.
    lock_for_write(session, chat_scope(chat_id))
    if session.get(Chat, chat_id) is None:
        raise NotFound("No such chat.")
    if open_count(session, chat_id) >= schedule.MAX_OPEN_PER_CHAT:
        raise UserError(
            f"This chat already has {schedule.MAX_OPEN_PER_CHAT} open tasks, the most it may have; "
            "cancel or finish one before setting another."
        )
    task = Task(
        chat_id=chat_id,
        character_id=character_id,
        persona_id=persona_id,
        purpose=purpose,
        due_at=due_at,
        interval_hours=interval_hours or None,
        created_at=now,
        updated_at=now,
    )
    session.add(task)
    session.flush()
    return task


def get_task(session: Session, task_id: int, *, chat_id: int | None = None) -> Task:
    """The task; with `chat_id`, only one of that chat's (a tool sees its own chat's tasks only)."""
    task = session.get(Task, task_id)
    if task is None or (chat_id is not None and task.chat_id != chat_id):
        raise NotFound(f"There is no task {task_id}" + (" in this chat." if chat_id is not None else "."))
    return task


def update_task(
    session: Session,
    task_id: int,
    *,
    now: datetime,
    chat_id: int | None = None,
    purpose: str | None = None,
    due_at: datetime | None = None,
    interval_hours: int | None = None,
) -> Task:
    """Change what is given (`interval_hours` 0: once). A finished, failed or cancelled task given a
    new time opens again; one being delivered right now cannot change."""
    task = get_task(session, task_id, chat_id=chat_id)
    if task.status == "firing":
        raise UserError("This reminder is being delivered right now; change it once its message is written.")
    if purpose is not None:
        task.purpose = _purpose(purpose)
    if interval_hours is not None:
        task.interval_hours = interval_hours or None
    if due_at is not None:
        schedule.check_due(due_at, now)
        task.due_at = due_at
        if task.status != "open":
            if open_count(session, task.chat_id) >= schedule.MAX_OPEN_PER_CHAT:
                raise UserError(
                    f"This chat already has {schedule.MAX_OPEN_PER_CHAT} open tasks, the most it may have."
                )
            task.status, task.last_error, task.late = "open", None, False
    task.updated_at = now
    session.add(task)
    session.flush()
    return task


def cancel_task(session: Session, task_id: int, *, now: datetime, chat_id: int | None = None) -> Task:
    task = get_task(session, task_id, chat_id=chat_id)
    if task.status not in OPEN:
        raise UserError(f"Task {task_id} is {task.status} already; only an open task can be cancelled.")
    if task.status == "firing":
        raise UserError("This reminder is being delivered right now; it can no longer be cancelled.")
    task.status, task.updated_at = "cancelled", now
    session.add(task)
    session.flush()
    return task


def open_tasks(session: Session, chat_id: int, character_id: int | None) -> list[Task]:
    """This chat's open tasks that `character_id` set, soonest first (the prompt lists them)."""
    return list(
        session.exec(
            select(Task)
            .where(Task.chat_id == chat_id, Task.character_id == character_id, Task.status == "open")
            .order_by(col(Task.due_at), col(Task.id))
        )
    )


@dataclass(frozen=True)
class TaskRow:
    """A task as the Tasks page and /api/tasks show it."""

    task: Task
    chat_name: str
    character_name: str
    due_text: str  # in the user's zone
    zone: str
    due_local: str  # "YYYY-MM-DDTHH:MM" in the user's zone, for the edit field
    interval: str


def list_tasks(session: Session, *, now: datetime) -> tuple[list[TaskRow], list[TaskRow]]:
    """Open tasks (soonest first) and recent finished ones (newest first), across chats."""
    opened = session.exec(
        select(Task).where(col(Task.status).in_(OPEN)).order_by(col(Task.due_at), col(Task.id))
    )
    finished = session.exec(
        select(Task)
        .where(col(Task.status).not_in(OPEN))
        .order_by(col(Task.updated_at).desc(), col(Task.id).desc())
        .limit(RECENT_LIMIT)
    )
    return [task_row(session, t, now=now) for t in opened], [task_row(session, t, now=now) for t in finished]


def task_row(session: Session, task: Task, *, now: datetime) -> TaskRow:
    zone = user_zone(session, task.persona_id)
    due = as_utc(task.due_at)
    chat = session.get(Chat, task.chat_id)
    character = session.get(Character, task.character_id) if task.character_id else None
    return TaskRow(
        task=task,
        chat_name=chat.name if chat else "",
        character_name=character.name if character else "",
        due_text=schedule.format_due(due, now, zone.tz, zone.label),
        zone=zone.label,
        due_local=due.astimezone(zone.tz).strftime("%Y-%m-%dT%H:%M"),
        interval=schedule.interval_text(task.interval_hours),
    )


def _purpose(text: str) -> str:
    text = text.strip()
    if not text:
        raise UserError("A task needs a purpose: what to remind about.")
    if len(text) > schedule.MAX_PURPOSE_CHARS:
        raise UserError(
            f"A task's purpose may be at most {schedule.MAX_PURPOSE_CHARS:,} characters (this one has {len(text):,})."
        )
    return text


def edit_task(
    session: Session,
    task_id: int,
    *,
    now: datetime,
    purpose: str | None = None,
    at: str | None = None,
    interval_hours: int | None = None,
) -> Task:
    """The Tasks page's edit (and PUT /api/tasks/{id}): `at` is "YYYY-MM-DD HH:MM" in the task's user
    zone; the time the task already has counts as unchanged (a failed task's past time is no error)."""
    task = get_task(session, task_id)
    due = None
    if at and at.strip():
        zone = user_zone(session, task.persona_id)
        try:
            due = schedule.parse_local_time(at, zone.tz)
        except ValueError as err:
            raise UserError(str(err)) from None
        if due == as_utc(task.due_at).replace(second=0, microsecond=0):
            due = None
    if interval_hours is not None and not 0 <= interval_hours <= schedule.MAX_INTERVAL_HOURS:
        raise UserError(
            f"The interval is a number of hours from 0 (once) to {schedule.MAX_INTERVAL_HOURS:,}."
        )
    try:
        return update_task(
            session, task_id, now=now, purpose=purpose, due_at=due, interval_hours=interval_hours
        )
    except ValueError as err:  # the time has passed, or is ten years away
        raise UserError(str(err)) from None
