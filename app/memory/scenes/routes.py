"""Chat Settings → Advanced Memory → Prepare existing history: the panel's HTMX actions, each answering
the panel again (settings_form.prepare_context); the panel polls itself every second while a run works."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app.chats.service import get_chat
from app.deps import ServicesDep
from app.memory.scenes import prepare
from app.memory.scenes.settings_form import PANEL, prepare_context
from app.services import Services
from app.web import render

router = APIRouter(include_in_schema=False)


def _panel(request: Request, services: Services, chat_id: int) -> HTMLResponse:
    # A fresh session: the run was written by prepare's own sessions (and its thread).
    with Session(services.engine) as session:
        chat = get_chat(session, chat_id)
        return render(request, PANEL, {"p": prepare_context(session, services, chat)})


@router.get("/chats/{chat_id}/scenes/prepare")
def prepare_panel(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """The Prepare existing history panel: the helper model, the run's step and progress."""
    return _panel(request, services, chat_id)


@router.post("/chats/{chat_id}/scenes/prepare")
def start_prepare_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Start Prepare existing history, or Resume / Retry the chat's stopped, failed or cut-short run."""
    prepare.start_prepare(services, chat_id)
    return _panel(request, services, chat_id)


@router.post("/chats/{chat_id}/scenes/prepare/cancel")
def cancel_prepare_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Cancel the running Prepare after the model call in hand; finished work stays."""
    prepare.stop_prepare(services, chat_id)
    return _panel(request, services, chat_id)
