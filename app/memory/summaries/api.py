"""Chat Summary entries over JSON: the same services as the Chat Settings panel."""

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from app.chats.service import get_chat
from app.memory.days.api import router as days_router
from app.memory.summaries import generate, runs, service, templates
from app.memory.summaries.service import MAX_CONTENT, MAX_ENTRIES, MAX_TITLE, EntryView
from app.memory.summaries.templates import MAX_NAME, MAX_TEXT
from app.platform.modelbase import RowId
from app.web.deps import ServicesDep, SessionDep

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
    """The chat's newest Generate run: waiting its turn (for `waiting_for`: "Backfill", "the automatic
    summary", "the summary of messages 3–7"), running, failed (with the reason), done (with the entry) or
    cancelled (while it waited)."""

    job_id: int | None
    status: Literal["none", "waiting", "running", "failed", "done", "cancelled"]
    reason: str = ""
    entry_id: int | None = None
    first_position: int | None = None
    last_position: int | None = None
    waiting_for: str = ""


def _status(job, session=None) -> GenerateStatus:
    if job is None:
        return GenerateStatus(job_id=None, status="none")
    waiting_for = (
        generate.waiting_for(session, job.chat_id) if session is not None and job.status == "waiting" else ""
    )
    return GenerateStatus(
        job_id=job.id,
        status=job.status,
        reason=job.reason,
        entry_id=job.entry_id,
        first_position=job.first_position,
        last_position=job.last_position,
        waiting_for=waiting_for,
    )


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
    return BackfillStatus(
        run_id=run.id,
        status=run.status,
        total=run.total,
        done=run.done,
        current=run.current,
        reason=run.reason,
        stop_requested=run.stop_requested,
    )


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
    review_reason: str  # why it is held besides Review outputs ("" when it is not)
    created_at: datetime
    updated_at: datetime


def _read(view: EntryView) -> SummaryRead:
    e, pos = view.entry, view.positions
    return SummaryRead(
        id=e.id,
        title=e.title,
        content=e.content,
        first_message_id=e.first_message_id,
        last_message_id=e.last_message_id,
        first_position=pos[0] if pos else None,
        last_position=pos[1] if pos else None,
        message_count=view.count,
        tokens=e.tokens,
        active=e.active,
        origin=e.origin,
        awaiting_review=e.awaiting_review,
        review_reason=e.review_reason,
        created_at=e.created_at,
        updated_at=e.updated_at,
    )


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
def generate_summary(
    chat_id: int, data: GenerateIn, session: SessionDep, services: ServicesDep
) -> GenerateStatus:
    """Have the chat's connection write an entry for the scope; the run goes on in the background. While
    another run has the chat (Backfill, automatic, a Generate) it waits its turn ("waiting"; 409 when one
    waits already)."""
    return _status(generate.start(services, chat_id, **data.model_dump()), session)


@router.get("/{chat_id}/summaries/generate", response_model=GenerateStatus)
def generate_status(chat_id: int, session: SessionDep, services: ServicesDep) -> GenerateStatus:
    """The newest Generate run of this chat."""
    get_chat(session, chat_id)
    return _status(generate.latest_job(session, services.engine, chat_id), session)


@router.post("/{chat_id}/summaries/generate/cancel", response_model=GenerateStatus)
def cancel_waiting_summary(chat_id: int, session: SessionDep, services: ServicesDep) -> GenerateStatus:
    """Cancel the Generate waiting its turn (400 when none waits; one already running goes on)."""
    return _status(generate.cancel_waiting(services, chat_id), session)


@router.post("/{chat_id}/summaries/uncovered", response_model=GenerateStatus, status_code=202)
def summarise_uncovered(chat_id: int, session: SessionDep, services: ServicesDep) -> GenerateStatus:
    """Have the model summarise the oldest messages older than the recent tail that no summary covers
    (at most 50 at a time); the run is polled like any Generate (and waits its turn like one)."""
    return _status(generate.start_uncovered(services, chat_id), session)


@router.post("/{chat_id}/summaries/generate/retry", response_model=GenerateStatus, status_code=202)
def retry_summary(chat_id: int, session: SessionDep, services: ServicesDep) -> GenerateStatus:
    """Run the newest failed Generate again, for the same scope."""
    return _status(generate.retry(services, chat_id), session)  # retry first: see generate.retry


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


# Summary Prompt templates (global, not per chat). The built-in Default is listed with `id: null` and
# `builtin: true`; it can be read and duplicated only. `/chosen` is the one every Roleplay chat uses.
templates_router = APIRouter(prefix="/api/summary-templates", tags=["summaries"])


class TemplateIn(BaseModel):
    name: str = Field(max_length=MAX_NAME)
    text: str = Field(max_length=MAX_TEXT)


class TemplatePatch(BaseModel):
    name: str | None = Field(default=None, max_length=MAX_NAME)
    text: str | None = Field(default=None, max_length=MAX_TEXT)


class TemplateRead(BaseModel):
    id: int | None  # None: the built-in Default
    name: str
    text: str
    builtin: bool
    created_at: datetime | None = None
    updated_at: datetime | None = None


def _template_read(template) -> TemplateRead:
    return TemplateRead(
        id=template.id,
        name=template.name,
        text=template.text,
        builtin=False,
        created_at=template.created_at,
        updated_at=template.updated_at,
    )


class ChosenRead(TemplateRead):
    missing: bool  # the chosen template was deleted: the Default is used until another is chosen


class ChosenIn(BaseModel):
    id: RowId | None  # None: the built-in Default


def _chosen_read(prompt: templates.ChosenPrompt) -> ChosenRead:
    base = _default() if prompt.template is None else _template_read(prompt.template)
    return ChosenRead(**base.model_dump(), missing=prompt.missing)


def _default() -> TemplateRead:
    prompt = templates.chosen_prompt_default()
    return TemplateRead(id=None, name=prompt.name, text=prompt.text, builtin=True)


@templates_router.get("", response_model=list[TemplateRead])
def list_summary_templates(session: SessionDep) -> list[TemplateRead]:
    """The built-in Default first, then the user's templates by name."""
    return [_default(), *(_template_read(t) for t in templates.list_templates(session))]


@templates_router.post("", response_model=TemplateRead, status_code=201)
def create_summary_template(body: TemplateIn, session: SessionDep) -> TemplateRead:
    """Save a new template (name unique ignoring case, at most 200 templates)."""
    return _template_read(templates.create_template(session, name=body.name, text=body.text))


@templates_router.get("/default", response_model=TemplateRead)
def show_default_summary_template() -> TemplateRead:
    """The built-in Default template."""
    return _default()


@templates_router.get("/chosen", response_model=ChosenRead)
def show_chosen_summary_template(session: SessionDep) -> ChosenRead:
    """The Summary Prompt every Roleplay chat uses (`missing`: the chosen one was deleted, so the Default)."""
    return _chosen_read(templates.chosen_prompt(session))


@templates_router.put("/chosen", response_model=ChosenRead)
def choose_summary_template(body: ChosenIn, session: SessionDep) -> ChosenRead:
    """Choose the Summary Prompt of every Roleplay chat: a template's id, or null for the Default."""
    return _chosen_read(templates.choose_template(session, body.id))


@templates_router.post("/default/duplicate", response_model=TemplateRead, status_code=201)
def duplicate_default_summary_template(session: SessionDep) -> TemplateRead:
    """Copy the built-in Default into a template that can be edited."""
    return _template_read(templates.duplicate_template(session, None))


@templates_router.get("/{template_id}", response_model=TemplateRead)
def show_summary_template(template_id: int, session: SessionDep) -> TemplateRead:
    """One template."""
    return _template_read(templates.get_template(session, template_id))


@templates_router.patch("/{template_id}", response_model=TemplateRead)
def update_summary_template(template_id: int, body: TemplatePatch, session: SessionDep) -> TemplateRead:
    """Rename a template and/or change its prompt."""
    return _template_read(templates.update_template(session, template_id, name=body.name, text=body.text))


@templates_router.post("/{template_id}/duplicate", response_model=TemplateRead, status_code=201)
def duplicate_summary_template(template_id: int, session: SessionDep) -> TemplateRead:
    """Copy a template ("<name> (copy)")."""
    return _template_read(templates.duplicate_template(session, template_id))


@templates_router.delete("/{template_id}", status_code=204)
def delete_summary_template(template_id: int, session: SessionDep) -> Response:
    """Delete a template; when it was the chosen one, every Roleplay chat uses the Default."""
    templates.delete_template(session, template_id)
    return Response(status_code=204)


router.include_router(days_router)
