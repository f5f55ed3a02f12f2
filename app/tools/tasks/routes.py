"""The Tasks page (Tools → Tasks): open and recent reminders across chats; edit, cancel."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.platform import forms
from app.tools.tasks import service
from app.web.deps import ServicesDep, SessionDep
from app.web.templates import HxRequest, render, render_blocks

router = APIRouter(include_in_schema=False)
PAGE = "tools/tasks.html"


def _page(request: Request, session, services, *, hx: bool = False, **extra) -> HTMLResponse:
    opened, recent = service.list_tasks(session, now=services.clock.now())
    ctx = {"open_tasks": opened, "recent_tasks": recent, **extra}
    if hx:
        return render_blocks(request, PAGE, ctx, ["task_list"])
    return render(request, PAGE, ctx)


@router.get("/tasks")
def list_tasks_page(request: Request, session: SessionDep, services: ServicesDep) -> HTMLResponse:
    """Open and recent tasks across chats."""
    return _page(request, session, services)


@router.post("/tasks/{task_id}")
async def edit_task_page(
    task_id: int, request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    """Save a task's purpose, time and interval."""
    form = await request.form()
    service.edit_task(
        session,
        task_id,
        now=services.clock.now(),
        purpose=forms.text(form, "purpose"),
        at=forms.text(form, "at"),
        interval_hours=forms.optional_number(form, "interval_hours", int),
    )
    return _page(request, session, services, hx=hx, saved_id=task_id)


@router.post("/tasks/{task_id}/cancel")
def cancel_task_page(
    task_id: int, request: Request, session: SessionDep, services: ServicesDep, hx: HxRequest
) -> HTMLResponse:
    """Cancel an open task."""
    service.cancel_task(session, task_id, now=services.clock.now())
    return _page(request, session, services, hx=hx, cancelled_id=task_id)
