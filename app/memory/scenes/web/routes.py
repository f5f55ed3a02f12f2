"""Chat Settings → Advanced Memory → Prepare existing history: the panel's HTMX actions, each answering
the panel again (settings_form.prepare_context); the panel polls itself every second while a run works.
Then Re-scan scenes' panel, and the problems panel with Fix and Pause / Resume processing."""

from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlmodel import Session

from app.chats.service import get_chat
from app.memory.scenes import fix, prepare, rescans
from app.memory.scenes.checks import skip_unreadable
from app.memory.scenes.jobs import schedule_processing
from app.memory.scenes.settings_form import PANEL, prepare_context
from app.platform import forms
from app.platform.services import Services
from app.web.deps import FormDep, ServicesDep
from app.web.templates import render

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


@router.post("/chats/{chat_id}/scenes/prepare/skip")
def skip_prepare_batch_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Treat the batch Prepare could not read as having no scene end, and go on."""
    prepare.start_prepare(services, chat_id, skip_unreadable=True)
    return _panel(request, services, chat_id)


@router.post("/chats/{chat_id}/scenes/prepare/cancel")
def cancel_prepare_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Cancel the running Prepare after the model call in hand; finished work stays. A Cancel that lands
    after the run ended answers the panel as the run left it (its failure shown once, no second error)."""
    prepare.stop_prepare(services, chat_id, if_running=True)
    return _panel(request, services, chat_id)


# Re-scan scenes: its own panel (templates/scenes/_rescan.html), polled every second while it runs.

RESCAN_PANEL = "scenes/_rescan.html"


def _rescan_panel(request: Request, services: Services, chat_id: int) -> HTMLResponse:
    with Session(services.engine) as session:
        chat = get_chat(session, chat_id)
        return render(request, RESCAN_PANEL, {"r": rescans.rescan_context(session, services, chat)})


@router.get("/chats/{chat_id}/scenes/rescan")
def rescan_panel(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """The Re-scan scenes panel: the range fields (the open scene by default), the run's step and outcome."""
    return _rescan_panel(request, services, chat_id)


@router.post("/chats/{chat_id}/scenes/rescan")
def start_rescan_page(chat_id: int, request: Request, form: FormDep, services: ServicesDep) -> HTMLResponse:
    """Re-scan scenes in the messages the form names; the panel shows its progress."""
    first, last = rescans.read_range(forms.text(form, "rescan_first"), forms.text(form, "rescan_last"))
    rescans.start_rescan(services, chat_id, first, last)
    return _rescan_panel(request, services, chat_id)


# Problems, Fix, Pause / Resume processing (app/memory/scenes/fix.py): the panel at the top of the
# Advanced Memory section (scenes/_problems.html, polled every second while Fix works) and the dot on
# the Chat Settings buttons (scenes/_problems_dot.html).


PROBLEMS = "scenes/_problems.html"
DOT = "scenes/_problems_dot.html"


def _problems_panel(request: Request, services: Services, chat_id: int) -> HTMLResponse:
    with Session(services.engine) as session:  # fresh: Fix's thread writes with its own sessions
        fx = fix.fix_status(session, services, chat_id)
        response = render(request, PROBLEMS, {"fx": fx})
    if not (fx.run is not None and fx.run.status == "running" and fx.working):
        response.headers["HX-Trigger"] = "scene-problems-changed"  # the dots load again (not every poll)
    return response


@router.get("/chats/{chat_id}/scenes/problems")
def problems_panel(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """The chat's memory problems with Fix, its progress or end sentence, and Pause / Resume processing."""
    return _problems_panel(request, services, chat_id)


@router.get("/chats/{chat_id}/scenes/problems/dot")
def problems_dot(
    chat_id: int,
    request: Request,
    services: ServicesDep,
    slot: Literal["settings-problems-dot", "access-problems-dot"] = "settings-problems-dot",
    announce: bool = False,
) -> HTMLResponse:
    """The accent dot for a Chat Settings button (empty without problems); `announce`: the page shows the
    notice once per set of problems."""
    with Session(services.engine) as session:
        chat = get_chat(session, chat_id)
        found = fix.problems(session, chat_id)
        ended = fix.recent_end(session, services, chat_id)
        return render(
            request,
            DOT,
            {
                "chat": chat,
                "problems": found,
                "slot": slot,
                "announce": announce,
                "fix_end": ended,
                "fixing": fix.working(services, chat_id),
            },
        )


@router.post("/chats/{chat_id}/scenes/fix")
def fix_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Fix every flagged scene in the background; the panel then polls its progress."""
    fix.start_fix(services, chat_id)
    return _problems_panel(request, services, chat_id)


@router.post("/chats/{chat_id}/scenes/check/skip")
def skip_check_batch_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Treat the batch the failed scene check could not read as having no scene end; the checks read on."""
    skip_unreadable(services, chat_id)
    schedule_processing(services, chat_id)
    return _problems_panel(request, services, chat_id)


@router.post("/chats/{chat_id}/scenes/pause")
def pause_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Pause processing in this chat."""
    fix.pause(services, chat_id)
    return _problems_panel(request, services, chat_id)


@router.post("/chats/{chat_id}/scenes/resume")
def resume_page(chat_id: int, request: Request, services: ServicesDep) -> HTMLResponse:
    """Resume processing in this chat: what the pause stopped goes on."""
    fix.resume(services, chat_id)
    return _problems_panel(request, services, chat_id)
