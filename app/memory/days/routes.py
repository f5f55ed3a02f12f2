"""Chat Settings → Automatic Summarization of a Conversation chat: the Missing Summaries panel (with
Backfill and Stop) and the Edit Summaries window (with Write now), each action answering its fragment
again. An answer that changed the summaries says so (`sugo:day-summaries-changed`), so the Missing
Summaries panel counts again."""

from datetime import date

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app.memory.days import runs as day_runs
from app.memory.days import service as conversation
from app.memory.days import write as day_write
from app.memory.days.core.days import week_start
from app.platform import forms
from app.platform.core.errors import NotFound, UserError
from app.web.deps import FormDep, ServicesDep, SessionDep
from app.web.templates import render

MISSING = "memory/_missing_summaries.html"
EDIT = "memory/_day_summaries_edit.html"
WEEK = "memory/_day_summaries_week.html"
CHANGED = {"HX-Trigger": "sugo:day-summaries-changed"}
router = APIRouter(include_in_schema=False)  # included by routes.py


def _missing(request: Request, session: Session, chat_id: int, *, watch: bool = False) -> HTMLResponse:
    chat = conversation.conversation_chat(session, chat_id)
    services = request.app.state.services
    return render(
        request,
        MISSING,
        {"chat": chat, "c": day_runs.panel_context(session, chat, services=services, watch=watch)},
    )


def _context(request: Request, chat_id: int, **extra) -> dict:
    return {
        "chat_id": chat_id,
        "saved": "",
        "saved_note": "",
        "deleted": "",
        "refused": None,
        "show_result": False,
        "run": day_write.write_status(request.app.state.services, chat_id),
        **extra,
    }


def _edit(
    request: Request, session: Session, chat_id: int, *, changed: bool = False, **extra
) -> HTMLResponse:
    response = render(
        request, EDIT, {**_context(request, chat_id, **extra), **conversation.edit_context(session, chat_id)}
    )
    if changed:
        response.headers.update(CHANGED)
    return response


def _week(
    request: Request, session: Session, chat_id: int, on: date, *, changed: bool = False, **extra
) -> HTMLResponse:
    """One week of the window (the week `on` falls in), for Write now and its poll."""
    chat = conversation.conversation_chat(session, chat_id)
    found = conversation.week_items(session, chat, only=week_start(on))
    if not found:
        raise NotFound("The Edit Summaries window shows no such week: reopen it.")
    response = render(
        request,
        WEEK,
        {**_context(request, chat_id, **extra), "w": found[0], "week_span": conversation.WEEK_SPAN},
    )
    if changed:
        response.headers.update(CHANGED)
    return response


@router.get("/chats/{chat_id}/days/missing")
def missing_summaries_panel(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The Missing Summaries panel (polled while a Backfill runs, with ?watch=1: the poll that sees the
    run end is told its result)."""
    return _missing(request, session, chat_id, watch=request.query_params.get("watch") == "1")


@router.post("/chats/{chat_id}/days/backfill")
def backfill_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Summarise up to 14 of the newest missing days now; the panel shows the progress."""
    day_runs.start_backfill(services, chat_id)
    with Session(services.engine) as session:
        return _missing(request, session, chat_id, watch=True)


@router.post("/chats/{chat_id}/days/backfill/stop")
def stop_backfill_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Stop the Backfill after the day being summarised."""
    day_runs.stop_backfill(services, chat_id)
    with Session(services.engine) as session:
        return _missing(request, session, chat_id, watch=True)


@router.get("/chats/{chat_id}/days/edit")
def edit_summaries_window(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The Edit Summaries window: every week, its summary and its days under it."""
    return _edit(request, session, chat_id)


def _save(request: Request, form, session: Session, chat_id: int, kind: str, on: date) -> HTMLResponse:
    key = conversation.item_key(kind, on)
    # One field per key detail: a detail may hold line breaks.
    details = [v for v in form.getlist(f"k_{key}") if isinstance(v, str)]
    changed = conversation.save_item(
        session, chat_id, kind, on, summary=forms.text(form, f"s_{key}"), key_details=details
    )
    return _edit(
        request,
        session,
        chat_id,
        changed=changed,
        saved=key,
        saved_note="Saved." if changed else "No changes.",
    )


@router.post("/chats/{chat_id}/days/{on}/save")
def save_day_summary_page(
    chat_id: int, on: date, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Save a day's Summary and Key Details (one field each)."""
    return _save(request, form, session, chat_id, "days", on)


@router.post("/chats/{chat_id}/weeks/{on}/save")
def save_week_summary_page(
    chat_id: int, on: date, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Save a week's Summary and Key Details (one field each)."""
    return _save(request, form, session, chat_id, "weeks", on)


@router.post("/chats/{chat_id}/days/{on}/delete")
def delete_day_summary_page(chat_id: int, on: date, request: Request, session: SessionDep) -> HTMLResponse:
    """Delete a day's summary; Write now or the next run writes it again."""
    conversation.delete_item(session, chat_id, "days", on)
    return _edit(request, session, chat_id, changed=True, deleted=conversation.item_key("days", on))


@router.post("/chats/{chat_id}/weeks/{on}/delete")
def delete_week_summary_page(chat_id: int, on: date, request: Request, session: SessionDep) -> HTMLResponse:
    """Delete a week's summary; its days' summaries stay, and Write now or the next run writes it again."""
    conversation.delete_item(session, chat_id, "weeks", on)
    return _edit(request, session, chat_id, changed=True, deleted=conversation.item_key("weeks", on))


def _write(request: Request, services, chat_id: int, kind: str, on: date) -> HTMLResponse:
    key = conversation.item_key(kind, on)
    try:
        day_write.start_write(services, chat_id, kind, on)
    except UserError as err:  # said beside the button pressed, not far off in a toast
        with Session(services.engine) as session:
            return _week(request, session, chat_id, on, refused=(key, str(err)))
    with Session(services.engine) as session:
        return _week(
            request, session, chat_id, on, show_result=True, changed=_ended(request, chat_id, kind, on)
        )


def _ended(request: Request, chat_id: int, kind: str, on: date) -> bool:
    run = day_write.write_status(request.app.state.services, chat_id)
    return run is not None and not run.running and run.key == conversation.item_key(kind, on)


@router.post("/chats/{chat_id}/days/{on}/write")
def write_day_summary_page(chat_id: int, on: date, request: Request, services: ServicesDep) -> HTMLResponse:
    """Write now: summarise the finished day; its week answers, with the progress, polled until done."""
    return _write(request, services, chat_id, "days", on)


@router.post("/chats/{chat_id}/weeks/{on}/write")
def write_week_summary_page(chat_id: int, on: date, request: Request, services: ServicesDep) -> HTMLResponse:
    """Write now: summarise the finished week's missing days, then the week."""
    return _write(request, services, chat_id, "weeks", on)


@router.get("/chats/{chat_id}/days/{on}/write")
def write_day_progress_page(chat_id: int, on: date, request: Request, session: SessionDep) -> HTMLResponse:
    """The week a day's Write now works in: the progress while it runs, the result once done."""
    return _week(
        request, session, chat_id, on, show_result=True, changed=_ended(request, chat_id, "days", on)
    )


@router.get("/chats/{chat_id}/weeks/{on}/write")
def write_week_progress_page(chat_id: int, on: date, request: Request, session: SessionDep) -> HTMLResponse:
    """The week a Write now works on: the progress while it runs, the result once done."""
    return _week(
        request, session, chat_id, on, show_result=True, changed=_ended(request, chat_id, "weeks", on)
    )
