"""Conversation chats' automatic summaries: one per finished day, one per finished week, and the
failures that keep a day in Missing Summaries until it succeeds.

Unique by (chat, day) and (chat, week): a run cut short by a restart, a Backfill racing the
scheduled job, or two servers on one data folder can never write a day twice."""

from datetime import date, datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from app.platform.modelbase import json_field
from app.platform.timeutil import utcnow

DAY_ORIGINS = ("model", "user")  # "user": edited by hand since the model wrote it


class DaySummary(SQLModel, table=True):
    __tablename__ = "summary_day"
    __table_args__ = (UniqueConstraint("chat_id", "day", name="uq_summary_day_chat_day"),)

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    day: date
    summary: str
    key_details: list = json_field(list)
    origin: str = "model"
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class WeekSummary(SQLModel, table=True):
    """A finished week consolidated from its days, keyed by the week's Monday."""

    __tablename__ = "summary_week"
    __table_args__ = (UniqueConstraint("chat_id", "week", name="uq_summary_week_chat_week"),)

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    week: date  # its Monday
    summary: str
    key_details: list = json_field(list)
    origin: str = "model"
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class DayFailure(SQLModel, table=True):
    """Why the model could not summarise a day (or, kind "week", consolidate a week), and when the
    scheduled job may try again. Deleted when the summary is saved."""

    __tablename__ = "summary_day_failure"
    __table_args__ = (
        UniqueConstraint("chat_id", "kind", "day", name="uq_summary_day_failure_chat_kind_day"),
    )

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    kind: str = "day"  # "day" or "week"
    day: date
    reason: str
    attempts: int = 1
    next_attempt_at: datetime
    updated_at: datetime = Field(default_factory=utcnow)
