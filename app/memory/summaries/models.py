from datetime import datetime

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from app.platform.timeutil import utcnow

ORIGINS = ("user", "model")


class SummaryEntry(SQLModel, table=True):
    """A Chat Summary entry (Roleplay): a recap standing in for the messages it covers.

    It covers every message whose id lies in [first_message_id, last_message_id]; the positions are
    the message numbers when it was written. Deleting a covered message shrinks what it covers (the
    numbers shown are recounted from the ids); an entry whose messages were all deleted stays, with
    its text, until the user deletes it. Editing a covered message leaves the entry as it is."""

    __tablename__ = "summary_entry"
    __table_args__ = (Index("ix_summary_entry_chat_first", "chat_id", "first_message_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    title: str = ""
    content: str
    first_message_id: int
    last_message_id: int
    first_position: int
    last_position: int
    tokens: int = 0
    active: bool = True
    origin: str = "user"  # "user" (written) or "model" (generated)
    awaiting_review: bool = False  # a model-written entry held until the user approves it
    # Why a model-written entry is held besides Review outputs (it seems not to speak of its messages:
    # overlap.py), a sentence for the panel; "" otherwise. Approving or editing its text clears it.
    review_reason: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


# waiting: asked for while another run had the chat, started when it lets go (generate.start_waiting);
# cancelled: Cancel while it waited.
JOB_STATUSES = ("waiting", "running", "failed", "done", "cancelled")


class SummaryJob(SQLModel, table=True):
    """One Generate run: the model asked to summarise a scope. A failure is kept here with its reason
    (no entry is written or changed), so the panel can show it with Retry, which reruns the same scope."""

    __tablename__ = "summary_job"
    __table_args__ = (Index("ix_summary_job_chat", "chat_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    scope: str = "last"  # what the user asked for, so Retry asks the same
    last_n: int | None = None
    start: int | None = None
    end: int | None = None
    first_message_id: int
    last_message_id: int
    first_position: int
    last_position: int
    status: str = "running"
    reason: str = ""  # why a failed run's answer could not be used: a sentence, never the model's text
    entry_id: int | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class SummaryTemplate(SQLModel, table=True):
    """A Summary Prompt the user saved (global, every chat can choose it). The built-in Default is not a
    row: its text lives in prompts.ROLEPLAY_ENTRY_PROMPT, so a newer Sugo improves it for everyone."""

    __tablename__ = "summary_template"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    text: str
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


RUN_KINDS = ("backfill", "automatic", "days")  # days: a Conversation chat's day Backfill (day_runs.py)
RUN_STATUSES = ("running", "stopped", "failed", "done")


class SummaryRun(SQLModel, table=True):
    """A Backfill Summary, an automatic summary run or a day Backfill, kept in the database so a restart
    resumes it (app/platform/jobs.py).

    Backfill: `total` batches were found when it started, `done` of them are finished, `current` says
    which messages the step in hand covers; Stop sets `stop_requested` and the run ends after the model
    call in hand. Automatic: one entry for the messages after the newest one; a failure is tried again
    at `next_attempt_at` (`attempts` failures so far) until it gives up and waits for Retry."""

    __tablename__ = "summary_run"
    __table_args__ = (
        Index("ix_summary_run_chat", "chat_id", "kind", "id"),
        Index("ix_summary_run_status", "status"),
    )

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    kind: str = "backfill"
    status: str = "running"
    total: int = 0
    done: int = 0
    current: str = ""  # "messages 51–100": the step in hand, or the one that failed
    stop_requested: bool = False
    reason: str = ""  # why it failed, a sentence for the panel
    attempts: int = 0  # failed attempts in a row (automatic runs)
    next_attempt_at: datetime | None = None  # when the scheduler tries a failed automatic run again
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
