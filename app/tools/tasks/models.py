from datetime import datetime

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from app.platform.timeutil import utcnow

# open: waiting for its time; firing: claimed by a tick, its reply being written; done: delivered (a
# one-time task); cancelled: by the user or the model; failed: its reply could not be written.
TASK_STATUSES = ("open", "firing", "done", "cancelled", "failed")


class Task(SQLModel, table=True):
    """A reminder a character set in a chat: when `due_at` (UTC) comes, the character writes to the
    user about `purpose` in that chat. A recurring one (`interval_hours`) then moves to its next slot."""

    __tablename__ = "task"
    __table_args__ = (
        Index("ix_task_status_due", "status", "due_at"),
        Index("ix_task_chat_status", "chat_id", "status"),
    )

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    character_id: int | None = Field(default=None, foreign_key="character.id", ondelete="SET NULL")
    persona_id: int | None = Field(default=None, foreign_key="persona.id", ondelete="SET NULL")
    purpose: str
    due_at: datetime  # UTC (stored naive)
    interval_hours: int | None = None  # None: once
    status: str = "open"
    fired_at: datetime | None = None
    late: bool = False  # the last firing came late (Sugo was not running at the due time)
    last_error: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
