"""Conversation chats' day and week summaries over JSON, and Backfill."""

from datetime import date, datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.memory.days import runs as day_runs
from app.memory.days import service as conversation
from app.memory.days import write as day_write
from app.memory.days.core.days import week_start
from app.memory.days.models import DaySummary, WeekSummary
from app.memory.summaries.core.answers import MAX_KEY_DETAIL_CHARS, MAX_KEY_DETAILS
from app.platform.core.errors import UserError
from app.web.deps import ServicesDep, SessionDep

router = APIRouter(tags=["summaries"])  # included by api.py, under its /api/chats


class SummaryRead(BaseModel):
    date: date  # the day, or the week's Monday
    summary: str
    key_details: list[str]
    origin: Literal["model", "user"]
    created_at: datetime
    updated_at: datetime


class SummaryPatch(BaseModel):
    summary: str | None = Field(default=None, max_length=conversation.MAX_SUMMARY_CHARS)
    key_details: list[str] | None = Field(default=None, max_length=MAX_KEY_DETAILS)


class BackfillStatus(BaseModel):
    """The chat's newest Backfill in this run of Sugo: "none" when there was none."""

    status: Literal["none", "running", "done", "stopped"]
    total: int = 0
    done: int = 0
    added: int = 0
    failed: int = 0
    remaining: int = 0
    current: str = ""
    result: str = ""


class WriteStatus(BaseModel):
    """The chat's Write now of this day or week in this run of Sugo: "none" when there was none."""

    status: Literal["none", "running", "done", "failed"]
    date: date  # the day, or the week's Monday
    current: str = ""  # what it is doing now
    days_written: int = 0  # day summaries it wrote (a week's missing days come first)
    result: str = ""  # the sentence the window shows once it ended


def _write_status(services, chat_id: int, kind: str, on: date) -> WriteStatus:
    run = day_write.write_status(services, chat_id)
    if run is None or run.key != conversation.item_key(kind, on):
        return WriteStatus(status="none", date=on)
    status = "running" if run.running else "failed" if run.failure else "done"
    return WriteStatus(
        status=status,
        date=on,
        current=run.current,
        days_written=run.days_written,  # type: ignore[arg-type]
        result=run.result(),
    )


def _read(row: DaySummary | WeekSummary) -> SummaryRead:
    on = row.day if isinstance(row, DaySummary) else row.week
    return SummaryRead(
        date=on,
        summary=row.summary,
        key_details=row.key_details,
        origin=row.origin,  # type: ignore[arg-type]
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _status(progress: day_runs.Progress | None) -> BackfillStatus:
    if progress is None:
        return BackfillStatus(status="none")
    status = "running" if progress.running else "stopped" if progress.stopped else "done"
    return BackfillStatus(
        status=status,
        total=progress.total,
        done=progress.done,
        added=progress.added,  # type: ignore[arg-type]
        failed=progress.failed,
        remaining=progress.remaining,
        current=progress.current,
        result="" if progress.running else day_runs.result_sentence(progress),
    )


def _details(data: SummaryPatch) -> list[str] | None:
    if data.key_details is not None and any(len(d) > MAX_KEY_DETAIL_CHARS for d in data.key_details):
        raise UserError(f"A key detail can be at most {MAX_KEY_DETAIL_CHARS} characters.")
    return data.key_details


def _monday(day: date) -> date:
    if day != week_start(day):
        raise UserError(f"A week is named by its Monday; {day.isoformat()} is not one.")
    return day


@router.get("/{chat_id}/days")
def list_day_summaries(chat_id: int, session: SessionDep) -> list[SummaryRead]:
    """The chat's day summaries, oldest first."""
    return [_read(r) for r in conversation.list_days(session, chat_id)]


@router.get("/{chat_id}/weeks")
def list_week_summaries(chat_id: int, session: SessionDep) -> list[SummaryRead]:
    """The chat's week summaries, oldest first, each dated by its Monday."""
    return [_read(r) for r in conversation.list_weeks(session, chat_id)]


@router.get("/{chat_id}/days/backfill")
def backfill_status(chat_id: int, session: SessionDep, services: ServicesDep) -> BackfillStatus:
    """How the chat's Backfill is going."""
    conversation.list_days(session, chat_id)  # a Roleplay chat gets the same 400 as the other routes
    return _status(services.day_backfills.latest(chat_id))


@router.post("/{chat_id}/days/backfill", status_code=202)
def start_backfill(chat_id: int, services: ServicesDep) -> BackfillStatus:
    """Summarise up to 14 of the newest missing days now."""
    return _status(day_runs.start_backfill(services, chat_id))


@router.post("/{chat_id}/days/backfill/stop")
def stop_backfill(chat_id: int, services: ServicesDep) -> BackfillStatus:
    """Stop after the day being summarised; the days already done stay."""
    return _status(day_runs.stop_backfill(services, chat_id))


@router.patch("/{chat_id}/days/{day}")
def update_day_summary(chat_id: int, day: date, data: SummaryPatch, session: SessionDep) -> SummaryRead:
    """Edit a day's summary or key details."""
    return _read(
        conversation.update_day(session, chat_id, day, summary=data.summary, key_details=_details(data))
    )


@router.delete("/{chat_id}/days/{day}", status_code=204)
def delete_day_summary(chat_id: int, day: date, session: SessionDep) -> None:
    """Delete a day's summary; the day is summarised again by the next run."""
    conversation.delete_day(session, chat_id, day)


@router.patch("/{chat_id}/weeks/{monday}")
def update_week_summary(chat_id: int, monday: date, data: SummaryPatch, session: SessionDep) -> SummaryRead:
    """Edit a week's summary or key details."""
    return _read(
        conversation.update_week(
            session, chat_id, _monday(monday), summary=data.summary, key_details=_details(data)
        )
    )


@router.delete("/{chat_id}/weeks/{monday}", status_code=204)
def delete_week_summary(chat_id: int, monday: date, session: SessionDep) -> None:
    """Delete a week's summary; its days' summaries stay."""
    conversation.delete_week(session, chat_id, _monday(monday))


@router.post("/{chat_id}/days/{day}/write", status_code=202)
def write_day_summary(chat_id: int, day: date, services: ServicesDep) -> WriteStatus:
    """Write now: summarise a finished day that has no summary (its week's summary may speak for it)."""
    day_write.start_write(services, chat_id, "days", day)
    return _write_status(services, chat_id, "days", day)


@router.get("/{chat_id}/days/{day}/write")
def write_day_status(chat_id: int, day: date, session: SessionDep, services: ServicesDep) -> WriteStatus:
    """How the day's Write now is going."""
    conversation.list_days(session, chat_id)  # a Roleplay chat gets the same 400 as the other routes
    return _write_status(services, chat_id, "days", day)


@router.post("/{chat_id}/weeks/{monday}/write", status_code=202)
def write_week_summary(chat_id: int, monday: date, services: ServicesDep) -> WriteStatus:
    """Write now: summarise a finished week that has no summary, its days without one first."""
    day_write.start_write(services, chat_id, "weeks", _monday(monday))
    return _write_status(services, chat_id, "weeks", monday)


@router.get("/{chat_id}/weeks/{monday}/write")
def write_week_status(chat_id: int, monday: date, session: SessionDep, services: ServicesDep) -> WriteStatus:
    """How the week's Write now is going."""
    conversation.list_days(session, chat_id)
    return _write_status(services, chat_id, "weeks", _monday(monday))
