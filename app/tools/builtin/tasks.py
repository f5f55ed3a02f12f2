"""The task tools: `create_task`, `update_task`, `cancel_task` (permission "tasks"). A reminder is
set in the user's time zone (the persona's, else the server's), fires later as a reply in this chat
(app/tools/tasks/firing.py), and is seen and changed only from this chat."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field
from sqlmodel import Session

from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import as_utc
from app.tools.registry import Tool, ToolContext, ToolError, ToolResult
from app.tools.tasks import service
from app.tools.tasks.core import schedule

TASK_TOOL_NAMES = frozenset({"create_task", "update_task", "cancel_task"})
MAX_MINUTES = 60 * 24 * 3_660
_PURPOSE = (
    "What to remind about, in 2–4 sentences written for later: by then this conversation will be "
    "gone from your context, so say who, what and why. No ids."
)
_AT = "Due time as YYYY-MM-DD HH:MM in the user's time zone; wins over the relative fields."


class CreateTaskArgs(BaseModel):
    purpose: str = Field(min_length=1, max_length=schedule.MAX_PURPOSE_CHARS, description=_PURPOSE)
    at: str | None = Field(default=None, max_length=40, description=_AT)
    minutes_from_now: float | None = Field(default=None, ge=0, le=MAX_MINUTES)
    hours_from_now: float | None = Field(default=None, ge=0, le=MAX_MINUTES / 60)
    days_from_now: float | None = Field(default=None, ge=0, le=MAX_MINUTES / 1440)
    interval_hours: int = Field(
        default=0,
        ge=0,
        le=schedule.MAX_INTERVAL_HOURS,
        description="0: once; 24: daily; 168: weekly. Repeats on this cadence from the first time.",
    )


class UpdateTaskArgs(BaseModel):
    task_id: int = Field(ge=1, le=2**63 - 1)
    purpose: str | None = Field(default=None, min_length=1, max_length=schedule.MAX_PURPOSE_CHARS)
    at: str | None = Field(default=None, max_length=40, description=_AT)
    minutes_from_now: float | None = Field(default=None, ge=0, le=MAX_MINUTES)
    hours_from_now: float | None = Field(default=None, ge=0, le=MAX_MINUTES / 60)
    days_from_now: float | None = Field(default=None, ge=0, le=MAX_MINUTES / 1440)
    interval_hours: int | None = Field(default=None, ge=0, le=schedule.MAX_INTERVAL_HOURS)


class CancelTaskArgs(BaseModel):
    task_id: int = Field(ge=1, le=2**63 - 1)


def _due(args: CreateTaskArgs | UpdateTaskArgs, now: datetime, zone: service.Zone) -> datetime | None:
    """The time asked for (absolute wins; relative parts add up), checked ahead of now; None when none."""
    try:
        if args.at and args.at.strip():
            due = schedule.parse_local_time(args.at, zone.tz)
        elif any(v is not None for v in (args.minutes_from_now, args.hours_from_now, args.days_from_now)):
            due = schedule.relative_due(
                now,
                minutes=args.minutes_from_now or 0,
                hours=args.hours_from_now or 0,
                days=args.days_from_now or 0,
            )
        else:
            return None
        return schedule.check_due(due, now)
    except ValueError as err:
        raise ToolError(str(err)) from None


def _when(due: datetime, interval_hours: int | None, now: datetime, zone: service.Zone) -> str:
    text = schedule.format_due(due, now, zone.tz, zone.label)
    return text + (f", then {schedule.interval_text(interval_hours)}" if interval_hours else "")


def create_task(ctx: ToolContext, args: CreateTaskArgs) -> ToolResult:
    with Session(ctx.services.engine) as session:
        zone = service.user_zone(session, ctx.persona_id)
        due = _due(args, ctx.now, zone)
        if due is None:  # no time at all: a minute from now
            due = schedule.relative_due(ctx.now, minutes=1)
        try:
            task = service.create_task(
                session,
                chat_id=ctx.chat_id,
                character_id=ctx.character_id,
                persona_id=ctx.persona_id,
                purpose=args.purpose,
                due_at=due,
                interval_hours=args.interval_hours,
                now=ctx.now,
            )
        except (UserError, NotFound) as err:
            raise ToolError(str(err)) from None
        session.commit()
        when = _when(due, args.interval_hours, ctx.now, zone)
        return ToolResult(
            text=f"Reminder set for {when} (task {task.id}).", notice=f"Reminder set for {when}"
        )


def update_task(ctx: ToolContext, args: UpdateTaskArgs) -> ToolResult:
    with Session(ctx.services.engine) as session:
        try:
            zone = service.user_zone(
                session, service.get_task(session, args.task_id, chat_id=ctx.chat_id).persona_id
            )
            task = service.update_task(
                session,
                args.task_id,
                now=ctx.now,
                chat_id=ctx.chat_id,
                purpose=args.purpose,
                due_at=_due(args, ctx.now, zone),
                interval_hours=args.interval_hours,
            )
        except (UserError, NotFound) as err:
            raise ToolError(str(err)) from None
        session.commit()
        when = _when(as_utc(task.due_at), task.interval_hours, ctx.now, zone)
        return ToolResult(
            text=f"Task {task.id} is {task.status}, due {when}: {task.purpose}",
            notice=f"Reminder changed: {when}",
        )


def cancel_task(ctx: ToolContext, args: CancelTaskArgs) -> ToolResult:
    with Session(ctx.services.engine) as session:
        try:
            task = service.cancel_task(session, args.task_id, now=ctx.now, chat_id=ctx.chat_id)
        except (UserError, NotFound) as err:
            raise ToolError(str(err)) from None
        session.commit()
        return ToolResult(text=f"Task {task.id} is cancelled.", notice="Reminder cancelled")


TOOLS = [
    Tool(
        name="create_task",
        description=(
            "Set a reminder: at the time given, you will write to the user in this chat about its purpose. "
            "Give a time (at, in the user's time zone, or minutes/hours/days from now; none: one minute "
            "from now) and optionally an interval in hours to repeat it."
        ),
        args=CreateTaskArgs,
        run=create_task,
        permission="tasks",
        macro="task_tool",
        family="task",
        label="Set a reminder",
    ),
    Tool(
        name="update_task",
        description=(
            "Change one of this chat's reminders (its id is in the reminders list): its purpose, its time, "
            "or its interval (0: once). A new time reopens a finished one."
        ),
        args=UpdateTaskArgs,
        run=update_task,
        permission="tasks",
        macro="task_update_tool",
        family="task",
        label="Change a reminder",
    ),
    Tool(
        name="cancel_task",
        description="Cancel one of this chat's open reminders by its id.",
        args=CancelTaskArgs,
        run=cancel_task,
        permission="tasks",
        family="task",
        label="Cancel a reminder",
    ),
]
