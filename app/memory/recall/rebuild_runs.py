"""Memory Recall's "Rebuild all" runs, kept in the database (issue 26): every server sharing it shows the
same progress and result, Stop pressed on any of them reaches the server doing the work, and a run whose
server died or restarted is resumed from where it stopped (app/memory/recall/jobs.py does the work).

Decisions:
- One row per rebuild; a new one deletes the chat's older rows (the newest is the one the viewer reports
  on). A run in progress is only ever one row, guarded by the chat's "rebuilds" claim (app/platform/claims.py).
- A rebuild embeds the chat's memories in ascending id order and records the last id it embedded with the
  batch's vectors, in one transaction: a resume embeds only the memories after it.
- `making`: the chat had no memories; the run makes them from the messages first, then embeds the ones
  waiting for vectors (a resume picks those up by their status, so `last_chunk_id` stays empty)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index
from sqlmodel import Field, Session, SQLModel, col, delete, select

import app.platform.modelbase  # noqa: F401  (the naming convention before any table)
from app.platform.timeutil import utcnow

REBUILD_STATUSES = ("running", "done", "stopped", "failed")


class RebuildRun(SQLModel, table=True):
    """One "Rebuild all" of a chat's memories (or the making of them, for a chat that had none)."""

    __tablename__ = "rebuild_run"
    __table_args__ = (Index("ix_rebuild_run_chat", "chat_id", "id"), Index("ix_rebuild_run_status", "status"))

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    status: str = "running"
    making: bool = False
    total: int = 0
    done: int = 0
    last_chunk_id: int | None = None  # the newest memory embedded (ids go in ascending order)
    stop_requested: bool = False
    error: str | None = None  # why it ended early, a sentence for the viewer
    started_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


def latest_rebuild(session: Session, chat_id: int) -> RebuildRun | None:
    """The chat's newest rebuild."""
    return session.exec(
        select(RebuildRun).where(RebuildRun.chat_id == chat_id).order_by(col(RebuildRun.id).desc()).limit(1)
    ).first()


def running_rebuild_chats(session: Session) -> list[int]:
    """The chats whose newest rebuild row says "running" (worked now, or cut short by a restart)."""
    return list(
        session.exec(select(RebuildRun.chat_id).where(RebuildRun.status == "running").distinct()).all()
    )


def new_rebuild(session: Session, chat_id: int, *, total: int, making: bool) -> RebuildRun:
    """A running row for the chat, its older rows gone (uncommitted: the caller commits)."""
    session.exec(delete(RebuildRun).where(col(RebuildRun.chat_id) == chat_id))  # type: ignore[call-overload]
    run = RebuildRun(chat_id=chat_id, total=total, making=making)
    session.add(run)
    return run


def stop_requested(session: Session, run_id: int) -> bool:
    """Whether Stop was asked for the run (on any server): read afresh, not from the session's copy."""
    return bool(session.exec(select(RebuildRun.stop_requested).where(RebuildRun.id == run_id)).first())
