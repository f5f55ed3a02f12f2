"""JSON twins of the Tasks page: /api/tasks."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.platform.timeutil import as_utc
from app.tools.tasks import service
from app.tools.tasks.core import schedule
from app.web.deps import ServicesDep, SessionDep

router = APIRouter(prefix="/api/tasks", tags=["tasks"])


class TaskRead(BaseModel):
    id: int
    chat_id: int
    chat_name: str
    character_id: int | None
    character_name: str
    purpose: str
    due_at: datetime  # UTC
    due_text: str  # in the user's time zone: "Fri 4 Dec, 09:00 (Europe/Lisbon)"
    time_zone: str
    interval_hours: int | None
    interval: str
    status: str  # open | firing | done | cancelled | failed
    late: bool  # the last firing came late
    fired_at: datetime | None
    last_error: str | None


class TaskList(BaseModel):
    open: list[TaskRead]
    recent: list[TaskRead]


class TaskUpdate(BaseModel):
    purpose: str | None = Field(default=None, min_length=1, max_length=schedule.MAX_PURPOSE_CHARS)
    at: str | None = Field(
        default=None, max_length=40, description="YYYY-MM-DD HH:MM in the user's time zone"
    )
    interval_hours: int | None = Field(
        default=None, ge=0, le=schedule.MAX_INTERVAL_HOURS, description="0: once"
    )


def _read(row: service.TaskRow) -> TaskRead:
    t = row.task
    return TaskRead(
        id=t.id,
        chat_id=t.chat_id,
        chat_name=row.chat_name,
        character_id=t.character_id,
        character_name=row.character_name,
        purpose=t.purpose,
        due_at=as_utc(t.due_at),
        due_text=row.due_text,
        time_zone=row.zone,
        interval_hours=t.interval_hours,
        interval=row.interval,
        status=t.status,
        late=t.late,
        fired_at=as_utc(t.fired_at) if t.fired_at else None,
        last_error=t.last_error,
    )


@router.get("", response_model=TaskList)
def list_tasks(session: SessionDep, services: ServicesDep) -> TaskList:
    """Open tasks (soonest first) and recent finished ones, across chats."""
    opened, recent = service.list_tasks(session, now=services.clock.now())
    return TaskList(open=[_read(r) for r in opened], recent=[_read(r) for r in recent])


@router.put("/{task_id}", response_model=TaskRead)
def update_task(task_id: int, data: TaskUpdate, session: SessionDep, services: ServicesDep) -> TaskRead:
    """Change a task's purpose, time or interval; a new time reopens a finished one."""
    now = services.clock.now()
    task = service.edit_task(
        session, task_id, now=now, purpose=data.purpose, at=data.at, interval_hours=data.interval_hours
    )
    return _read(service.task_row(session, task, now=now))


@router.post("/{task_id}/cancel", response_model=TaskRead)
def cancel_task(task_id: int, session: SessionDep, services: ServicesDep) -> TaskRead:
    """Cancel an open task."""
    now = services.clock.now()
    task = service.cancel_task(session, task_id, now=now)
    return _read(service.task_row(session, task, now=now))
