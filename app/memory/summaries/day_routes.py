"""Chat Settings → Automatic Summarization of a Conversation chat: the Missing Summaries panel (with
Backfill and Stop) and the Edit Summaries window, each action answering its fragment again."""

from datetime import date

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app import forms
from app.deps import FormDep, ServicesDep, SessionDep
from app.memory.summaries import conversation, day_runs
from app.web import render

MISSING = "memory/_missing_summaries.html"
EDIT = "memory/_day_summaries_edit.html"
router = APIRouter(include_in_schema=False)  # included by routes.py


def _missing(request: Request, session: Session, chat_id: int, *, watch: bool = False) -> HTMLResponse:
    chat = conversation.conversation_chat(session, chat_id)
    engine = request.app.state.services.engine
    return render(request, MISSING, {"chat": chat, "c": day_runs.panel_context(session, chat, engine=engine, watch=watch)})


def _edit(request: Request, session: Session, chat_id: int, *, saved: str = "") -> HTMLResponse:
    return render(request, EDIT, {"chat_id": chat_id, "saved": saved, **conversation.edit_context(session, chat_id)})


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
    """The Edit Summaries window: weeks first, then the days not in a summarised week."""
    return _edit(request, session, chat_id)


def _save(request: Request, form, session: Session, chat_id: int, kind: str, on: date) -> HTMLResponse:
    key = conversation.item_key(kind, on)
    conversation.save_item(session, chat_id, kind, on, summary=forms.text(form, f"s_{key}"),
                           key_details=forms.lines(form, f"k_{key}"))  # fmt: skip
    return _edit(request, session, chat_id, saved=key)


@router.post("/chats/{chat_id}/days/{on}/save")
def save_day_summary_page(chat_id: int, on: date, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Save a day's Summary and Key Details (one per line)."""
    return _save(request, form, session, chat_id, "days", on)


@router.post("/chats/{chat_id}/weeks/{on}/save")
def save_week_summary_page(chat_id: int, on: date, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Save a week's Summary and Key Details (one per line)."""
    return _save(request, form, session, chat_id, "weeks", on)


@router.post("/chats/{chat_id}/days/{on}/delete")
def delete_day_summary_page(chat_id: int, on: date, request: Request, session: SessionDep) -> HTMLResponse:
    """Delete a day's summary; the next run writes it again."""
    conversation.delete_item(session, chat_id, "days", on)
    return _edit(request, session, chat_id)


@router.post("/chats/{chat_id}/weeks/{on}/delete")
def delete_week_summary_page(chat_id: int, on: date, request: Request, session: SessionDep) -> HTMLResponse:
    """Delete a week's summary; its days' summaries stay, and the next run consolidates it again."""
    conversation.delete_item(session, chat_id, "weeks", on)
    return _edit(request, session, chat_id)
