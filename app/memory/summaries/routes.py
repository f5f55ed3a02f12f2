"""Chat Settings → Chat Summary: the panel's HTMX actions, each answering the panel again; and the panel as
its own page."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app.chats.service import get_chat
from app.memory.days.routes import router as days_router
from app.memory.summaries import generate, runs, service, templates
from app.memory.summaries.source import panel_context, prompt_context
from app.platform import forms
from app.platform.core.errors import UserError
from app.platform.modelbase import parse_row_id
from app.web.deps import FormDep, ServicesDep, SessionDep
from app.web.templates import HxRequest, render

router = APIRouter(include_in_schema=False)
PANEL = "memory/_summary_panel.html"
PART = "memory/_summary_prompt.html"
PAGE = "memory/summaries.html"


def _panel(
    request: Request, session, chat_id: int, *, show_inactive: bool = True, editing: int | None = None
) -> HTMLResponse:
    chat = get_chat(session, chat_id)
    engine = request.app.state.services.engine
    # The Generate run the page was polling: its "written" line goes to the page that watched it run, once,
    # not to every later opening of the panel (a status that stays after it is news).
    watched = parse_row_id(request.query_params.get("watch", ""))
    ctx = {
        "chat": chat,
        "c": panel_context(session, chat, engine=engine, show_inactive=show_inactive),
        "editing": editing,
        "watched": watched,
        "watched_run": parse_row_id(request.query_params.get("watch_run", "")),
    }
    return render(request, PANEL, ctx)


def _shown(request: Request, form=None) -> bool:
    raw = forms.text(form, "inactive") if form is not None else request.query_params.get("inactive", "")
    return raw != "0"


@router.get("/chats/{chat_id}/summaries")
def summary_panel(chat_id: int, request: Request, session: SessionDep, hx: HxRequest) -> HTMLResponse:
    """The Chat Summary panel (Show / Hide Inactive reloads it); opened directly, its own page."""
    if hx:
        return _panel(request, session, chat_id, show_inactive=_shown(request))
    chat = get_chat(session, chat_id)
    if chat.mode != "roleplay":
        raise UserError(
            "Chat Summary entries are for Roleplay chats; Conversation chats are summarised by day."
        )
    engine = request.app.state.services.engine
    return render(request, PAGE, {"chat": chat, "c": panel_context(session, chat, engine=engine)})


@router.post("/chats/{chat_id}/summaries/write")
def write_summary_page(chat_id: int, request: Request, form: FormDep, session: SessionDep) -> HTMLResponse:
    """Add the summary the user typed, for the Last N messages or a Range of message numbers."""
    service.write_entry(
        session,
        chat_id,
        content=forms.text(form, "summary_content"),
        title=forms.text(form, "summary_title"),
        scope=forms.text(form, "summary_scope") or "last",
        last=forms.optional_number(form, "summary_last", int),
        start=forms.optional_number(form, "summary_start", int),
        end=forms.optional_number(form, "summary_end", int),
    )
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/generate")
def generate_summary_page(
    chat_id: int, request: Request, form: FormDep, services: ServicesDep
) -> HTMLResponse:
    """Have the model write a summary for the Last N messages or a Range; the panel shows it running."""
    generate.start(
        services,
        chat_id,
        scope=forms.text(form, "summary_scope") or "last",
        last=forms.optional_number(form, "summary_last", int),
        start=forms.optional_number(form, "summary_start", int),
        end=forms.optional_number(form, "summary_end", int),
    )
    with Session(services.engine) as session:
        return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/generate/cancel")
def cancel_waiting_summary_page(
    chat_id: int, request: Request, form: FormDep, services: ServicesDep
) -> HTMLResponse:
    """Cancel the Generate waiting for the chat's run in hand."""
    generate.cancel_waiting(services, chat_id)
    with Session(services.engine) as session:
        return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/uncovered")
def summarise_uncovered_page(
    chat_id: int, request: Request, form: FormDep, services: ServicesDep
) -> HTMLResponse:
    """Have the model summarise the oldest messages no summary covers (one batch)."""
    generate.start_uncovered(services, chat_id)
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
def retry_automatic_page(
    chat_id: int, request: Request, form: FormDep, services: ServicesDep
) -> HTMLResponse:
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
def approve_summary_page(
    chat_id: int, summary_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Accept an entry held for review: it becomes active."""
    service.approve_entry(session, chat_id, summary_id)
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/activation")
def activate_summaries_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Activate All / Deactivate All, or Enable / Disable the selected entries."""
    ids = None
    if forms.text(form, "selected"):
        ids = [
            i
            for v in form.getlist("summary_ids")
            if isinstance(v, str) and (i := parse_row_id(v)) is not None
        ]
    service.set_active(session, chat_id, forms.checkbox(form, "active"), ids)
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/{summary_id}/active")
def toggle_summary_page(
    chat_id: int, summary_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Turn one entry on or off."""
    service.update_entry(session, chat_id, summary_id, active=forms.checkbox(form, "active"))
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.get("/chats/{chat_id}/summaries/{summary_id}/edit")
def edit_summary_page(chat_id: int, summary_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    """The panel with this entry's title and text in a form."""
    service.get_entry(session, chat_id, summary_id)
    return _panel(request, session, chat_id, show_inactive=_shown(request), editing=summary_id)


@router.post("/chats/{chat_id}/summaries/{summary_id}/edit")
def save_summary_page(
    chat_id: int, summary_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Save an entry's new title and text."""
    service.update_entry(
        session,
        chat_id,
        summary_id,
        title=forms.text(form, "summary_edit_title"),
        content=forms.text(form, "summary_edit_content"),
    )
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


@router.post("/chats/{chat_id}/summaries/{summary_id}/delete")
def delete_summary_page(
    chat_id: int, summary_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Delete one entry; its messages stay."""
    service.delete_entry(session, chat_id, summary_id)
    return _panel(request, session, chat_id, show_inactive=_shown(request, form))


# Chat Summary → Templates: global templates; the chat in the URL is only whose Summary Prompt select is
# redrawn, keeping the value chosen there (saved later by Save settings, for every Roleplay chat).


def _select_choice(session: Session, form) -> templates.ChosenPrompt:
    """The select's value as the form sent it: the saved choice itself (with its "deleted" notice) when
    the select still shows it, else the template picked but not saved yet."""
    raw = forms.text(form, "summary_template_id").strip()
    picked = parse_row_id(raw) if raw else None
    saved = templates.chosen_prompt(session)
    if picked == (saved.template.id if saved.template is not None else None):
        return saved
    return templates.prompt_for(session, picked)


def _part(
    request: Request,
    session: Session,
    chat_id: int,
    form,
    *,
    editing: int | str | None = None,
    chosen: templates.ChosenPrompt | None = None,
) -> HTMLResponse:
    chat = get_chat(session, chat_id)
    if chosen is None:
        chosen = _select_choice(session, form)
    ctx = {
        "chat": chat,
        "p": prompt_context(session, chat, chosen=chosen),
        "manage": True,
        "editing": editing,
    }
    return render(request, PART, ctx)


@router.post("/chats/{chat_id}/summary-templates/show")
def show_summary_templates_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """The manager, open; `?edit=new` or `?edit=<id>` shows that template's form."""
    raw = request.query_params.get("edit", "")
    editing = "new" if raw == "new" else parse_row_id(raw)
    if isinstance(editing, int):
        templates.get_template(session, editing)
    return _part(request, session, chat_id, form, editing=editing)


@router.post("/chats/{chat_id}/summary-templates")
def create_summary_template_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Save a new template and choose it in the select."""
    new = templates.create_template(
        session, name=forms.text(form, "template_name"), text=forms.text(form, "template_text")
    )
    return _part(request, session, chat_id, form, chosen=templates.ChosenPrompt(new))


@router.post("/chats/{chat_id}/summary-templates/default/duplicate")
def duplicate_default_template_page(
    chat_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Copy the built-in Default into a template of the user's, opened for editing."""
    copy = templates.duplicate_template(session, None)
    return _part(request, session, chat_id, form, editing=copy.id)


@router.post("/chats/{chat_id}/summary-templates/{template_id}/duplicate")
def duplicate_summary_template_page(
    chat_id: int, template_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Copy a template, opened for editing."""
    copy = templates.duplicate_template(session, template_id)
    return _part(request, session, chat_id, form, editing=copy.id)


@router.post("/chats/{chat_id}/summary-templates/{template_id}/edit")
def save_summary_template_page(
    chat_id: int, template_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Save a template's new name and prompt."""
    templates.update_template(
        session, template_id, name=forms.text(form, "template_name"), text=forms.text(form, "template_text")
    )
    return _part(request, session, chat_id, form)


@router.post("/chats/{chat_id}/summary-templates/{template_id}/delete")
def delete_summary_template_page(
    chat_id: int, template_id: int, request: Request, form: FormDep, session: SessionDep
) -> HTMLResponse:
    """Delete a template; when it was the chosen one, every chat uses the Default."""
    was_chosen = templates.chosen_value(session) == str(template_id)
    templates.delete_template(session, template_id)
    raw = forms.text(form, "summary_template_id").strip()
    if raw and parse_row_id(raw) == template_id:
        # The saved choice deleted: every chat is told; an unsaved one just goes back to the Default.
        chosen = templates.chosen_prompt(session) if was_chosen else templates.ChosenPrompt(None)
        return _part(request, session, chat_id, form, chosen=chosen)
    return _part(request, session, chat_id, form)


router.include_router(days_router)
