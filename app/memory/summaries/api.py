"""Chat Summary entries over JSON: the same services as the Chat Settings panel."""

from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.chats.service import get_chat
from app.deps import ServicesDep, SessionDep
from app.memory.summaries import generate, runs, service
from app.memory.summaries.service import MAX_CONTENT, MAX_ENTRIES, MAX_TITLE, EntryView
from app.modelbase import RowId

router = APIRouter(prefix="/api/chats", tags=["summaries"])


class SummaryIn(BaseModel):
    """A summary the user wrote: for the `last` newest messages, or the message numbers start–end."""

    content: str = Field(max_length=MAX_CONTENT)
    title: str = Field(default="", max_length=MAX_TITLE)
    scope: Literal["last", "range"] = "last"
    last: int | None = Field(default=None, ge=1, le=1_000_000)
    start: int | None = Field(default=None, ge=1, le=1_000_000)
    end: int | None = Field(default=None, ge=1, le=1_000_000)


class GenerateIn(BaseModel):
    """Which messages the model summarises: the `last` newest, or the message numbers start–end."""

    scope: Literal["last", "range"] = "last"
    last: int | None = Field(default=None, ge=1, le=1_000_000)
    start: int | None = Field(default=None, ge=1, le=1_000_000)
    end: int | None = Field(default=None, ge=1, le=1_000_000)


class GenerateStatus(BaseModel):
    """The chat's newest Generate run: running, failed (with the reason) or done (with the entry)."""

    job_id: int | None
    status: Literal["none", "running", "failed", "done"]
    reason: str = ""
    entry_id: int | None = None
    first_position: int | None = None
    last_position: int | None = None


def _status(job) -> GenerateStatus:
    if job is None:
        return GenerateStatus(job_id=None, status="none")
    return GenerateStatus(job_id=job.id, status=job.status, reason=job.reason, entry_id=job.entry_id,
                          first_position=job.first_position, last_position=job.last_position)  # fmt: skip


class BackfillStatus(BaseModel):
    """The chat's newest Backfill Summary run: `done` of `total` steps, the step in hand, why it failed."""

    run_id: int | None
    status: Literal["none", "running", "stopped", "failed", "done"]
    total: int = 0
    done: int = 0
    current: str = ""
    reason: str = ""
    stop_requested: bool = False


def _backfill(run) -> BackfillStatus:
    if run is None:
        return BackfillStatus(run_id=None, status="none")
    return BackfillStatus(run_id=run.id, status=run.status, total=run.total, done=run.done, current=run.current,
                          reason=run.reason, stop_requested=run.stop_requested)  # fmt: skip


class SummaryPatch(BaseModel):
    title: str | None = Field(default=None, max_length=MAX_TITLE)
    content: str | None = Field(default=None, max_length=MAX_CONTENT)
    active: bool | None = None


class SummaryActivation(BaseModel):
    """Activate or deactivate every entry, or those listed."""

    active: bool
    ids: list[RowId] | None = Field(default=None, max_length=MAX_ENTRIES)


class SummaryRead(BaseModel):
    id: int
    title: str
    content: str
    first_message_id: int
    last_message_id: int
    first_position: int | None  # message numbers now (None when all its messages were deleted)
    last_position: int | None
    message_count: int
    tokens: int
    active: bool
    origin: str
    awaiting_review: bool
    created_at: datetime
    updated_at: datetime


def _read(view: EntryView) -> SummaryRead:
    e, pos = view.entry, view.positions
    return SummaryRead(
        id=e.id, title=e.title, content=e.content, first_message_id=e.first_message_id,
        last_message_id=e.last_message_id, first_position=pos[0] if pos else None,
        last_position=pos[1] if pos else None, message_count=view.count, tokens=e.tokens, active=e.active,
        origin=e.origin, awaiting_review=e.awaiting_review, created_at=e.created_at, updated_at=e.updated_at,
    )  # fmt: skip


def _one(session, chat_id: int, summary_id: int) -> SummaryRead:
    return next(_read(v) for v in service.entry_views(session, chat_id) if v.entry.id == summary_id)


@router.get("/{chat_id}/summaries", response_model=list[SummaryRead])
def list_summaries(chat_id: int, session: SessionDep) -> list[SummaryRead]:
    """The chat's summary entries in message order, with the message numbers they cover now."""
    get_chat(session, chat_id)
    return [_read(v) for v in service.entry_views(session, chat_id)]


@router.post("/{chat_id}/summaries", response_model=SummaryRead, status_code=201)
def write_summary(chat_id: int, data: SummaryIn, session: SessionDep) -> SummaryRead:
    """Add a summary the user wrote (Roleplay chats), active at once."""
    entry = service.write_entry(session, chat_id, **data.model_dump())
    return _one(session, chat_id, entry.id)


@router.post("/{chat_id}/summaries/generate", response_model=GenerateStatus, status_code=202)
def generate_summary(chat_id: int, data: GenerateIn, services: ServicesDep) -> GenerateStatus:
    """Have the chat's connection write an entry for the scope; the run goes on in the background."""
    return _status(generate.start(services, chat_id, **data.model_dump()))


@router.get("/{chat_id}/summaries/generate", response_model=GenerateStatus)
def generate_status(chat_id: int, session: SessionDep, services: ServicesDep) -> GenerateStatus:
    """The newest Generate run of this chat."""
    get_chat(session, chat_id)
    return _status(generate.latest_job(session, services.engine, chat_id))


@router.post("/{chat_id}/summaries/generate/retry", response_model=GenerateStatus, status_code=202)
def retry_summary(chat_id: int, session: SessionDep, services: ServicesDep) -> GenerateStatus:
    """Run the newest failed Generate again, for the same scope."""
    get_chat(session, chat_id)
    return _status(generate.retry(services, chat_id))


@router.post("/{chat_id}/summaries/backfill", response_model=BackfillStatus, status_code=202)
def start_backfill(chat_id: int, services: ServicesDep) -> BackfillStatus:
    """Summarise the older messages no entry covers, in batches, in the background (resumes a failed run)."""
    return _backfill(runs.start_backfill(services, chat_id))


@router.get("/{chat_id}/summaries/backfill", response_model=BackfillStatus)
def backfill_status(chat_id: int, session: SessionDep) -> BackfillStatus:
    """The newest Backfill run of this chat: its progress, or why it stopped."""
    get_chat(session, chat_id)
    return _backfill(runs.latest_run(session, chat_id, "backfill"))


@router.post("/{chat_id}/summaries/backfill/stop", response_model=BackfillStatus)
def stop_backfill(chat_id: int, services: ServicesDep) -> BackfillStatus:
    """End the running Backfill after the model call in hand; finished entries stay."""
    return _backfill(runs.stop_backfill(services, chat_id))


@router.post("/{chat_id}/summaries/{summary_id}/approve", response_model=SummaryRead)
def approve_summary(chat_id: int, summary_id: RowId, session: SessionDep) -> SummaryRead:
    """Accept a model-written entry held by Review outputs: it becomes active."""
    service.approve_entry(session, chat_id, summary_id)
    return _one(session, chat_id, summary_id)


@router.get("/{chat_id}/summaries/{summary_id}", response_model=SummaryRead)
def show_summary(chat_id: int, summary_id: RowId, session: SessionDep) -> SummaryRead:
    """One summary entry."""
    service.get_entry(session, chat_id, summary_id)
    return _one(session, chat_id, summary_id)


@router.patch("/{chat_id}/summaries/{summary_id}", response_model=SummaryRead)
def update_summary(chat_id: int, summary_id: RowId, data: SummaryPatch, session: SessionDep) -> SummaryRead:
    """Change a summary's title, text or active state."""
    service.update_entry(session, chat_id, summary_id, **data.model_dump())
    return _one(session, chat_id, summary_id)


@router.delete("/{chat_id}/summaries/{summary_id}", status_code=204)
def delete_summary(chat_id: int, summary_id: RowId, session: SessionDep) -> None:
    """Delete a summary entry; the messages it covered are untouched."""
    service.delete_entry(session, chat_id, summary_id)


@router.post("/{chat_id}/summaries/activation")
def activate_summaries(chat_id: int, data: SummaryActivation, session: SessionDep) -> dict:
    """Activate or deactivate all the chat's entries, or those in `ids`; says how many changed."""
    return {"changed": service.set_active(session, chat_id, data.active, data.ids)}
