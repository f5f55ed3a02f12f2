"""Chat Settings → Chat Summary: the panel's HTMX actions, each answering the panel again."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app import forms
from app.chats.service import get_chat
from app.deps import FormDep, ServicesDep, SessionDep
from app.memory.summaries import generate, runs, service
from app.memory.summaries.source import panel_context
from app.modelbase import parse_row_id
from app.web import render

router = APIRouter(include_in_schema=False)
PANEL = "memory/_summary_panel.html"


def _panel(request: Request, session, chat_id: int, *, show_inactive: bool = True,
           editing: int | None = None) -> HTMLResponse:  # fmt: skip
    chat = get_chat(session, chat_id)
    engine = request.app.state.services.engine
    ctx = {"chat": chat, "c": panel_context(session, chat, engine=engine, show_inactive=show_inactive), "editing": editing}
    return render(request, PANEL, ctx)


def _shown(request: Request, form=None) -> bool:
    raw = forms.text(form, "inactive") if form is not None else request.query_params.get("inactive", "")
    return raw != "0"


@router.get("/chats/{chat_id}/summaries")
def summary_panel(chat_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The Chat Summary panel (Show / Hide Inactive reloads it)."""
    return _panel(request, session, chat_id, show_inactive=_shown(request))


@router.post("/chats/{chat_id}/summaries/write")
def write_summary_page(chat_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Add the summary the user typed, for the Last N messages or a Range of message numbers."""
    service.write_entry(
        session, chat_id, content=forms.text(form, "summary_content"), title=forms.text(form, "summary_title"),
        scope=forms.text(form, "summary_scope") or "last", last=forms.optional_number(form, "summary_last", int),
        start=forms.optional_number(form, "summary_start", int), end=forms.optional_number(form, "summary_end", int),
    )  # fmt: skip
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/generate")
def generate_summary_page(chat_id: int, request: Request, form: FormDep, services: ServicesDep) -> HTMLResponse:
    """Have the model write a summary for the Last N messages or a Range; the panel shows it running."""
    generate.start(
        services, chat_id, scope=forms.text(form, "summary_scope") or "last",
        last=forms.optional_number(form, "summary_last", int), start=forms.optional_number(form, "summary_start", int),
        end=forms.optional_number(form, "summary_end", int),
    )  # fmt: skip
    with Session(services.engine) as session:
        return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/generate/retry")
def retry_summary_page(chat_id: int, request: Request, form: FormDep, services: ServicesDep) -> HTMLResponse:
    """Run the failed Generate again for the same scope."""
    generate.retry(services, chat_id)
    with Session(services.engine) as session:
        return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/backfill")
def start_backfill_page(chat_id: int, request: Request, form: FormDep, services: ServicesDep) -> HTMLResponse:
    """Start Backfill Summary (or Retry its failed step); the panel shows its progress."""
    runs.start_backfill(services, chat_id)
    with Session(services.engine) as session:
        return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/backfill/stop")
def stop_backfill_page(chat_id: int, request: Request, form: FormDep, services: ServicesDep) -> HTMLResponse:
    """Stop Backfill after the model call in hand."""
    runs.stop_backfill(services, chat_id)
    with Session(services.engine) as session:
        return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/automatic/retry")
def retry_automatic_page(chat_id: int, request: Request, form: FormDep, services: ServicesDep) -> HTMLResponse:
    """Try the failed automatic summary again now."""
    runs.retry_automatic(services, chat_id)
    with Session(services.engine) as session:
        return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/review")
def review_setting_page(chat_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Review outputs: model-written entries wait for Approve before they become active."""
    service.set_review(session, chat_id, forms.checkbox(form, "summary_review"))
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/{summary_id}/approve")
def approve_summary_page(chat_id: int, summary_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Accept an entry held for review: it becomes active."""
    service.approve_entry(session, chat_id, summary_id)
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/activation")
def activate_summaries_page(chat_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Activate All / Deactivate All, or Enable / Disable the selected entries."""
    ids = None
    if forms.text(form, "selected"):
        ids = [i for v in form.getlist("summary_ids") if isinstance(v, str) and (i := parse_row_id(v)) is not None]
    service.set_active(session, chat_id, forms.checkbox(form, "active"), ids)
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/{summary_id}/active")
def toggle_summary_page(chat_id: int, summary_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Turn one entry on or off."""
    service.update_entry(session, chat_id, summary_id, active=forms.checkbox(form, "active"))
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.get("/chats/{chat_id}/summaries/{summary_id}/edit")
def edit_summary_page(chat_id: int, summary_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The panel with this entry's title and text in a form."""
    service.get_entry(session, chat_id, summary_id)
    return _panel(request, session, chat_id, show_inactive=_shown(request), editing=summary_id)


@router.post("/chats/{chat_id}/summaries/{summary_id}/edit")
def save_summary_page(chat_id: int, summary_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Save an entry's new title and text."""
    service.update_entry(session, chat_id, summary_id, title=forms.text(form, "summary_edit_title"),
                         content=forms.text(form, "summary_edit_content"))  # fmt: skip
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/{summary_id}/delete")
def delete_summary_page(chat_id: int, summary_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Delete one entry; its messages stay."""
    service.delete_entry(session, chat_id, summary_id)
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))
