"""Prepare existing history over JSON (issue 14): its status with the helper model it would call, Start
or Resume, and Cancel. The work goes on in the background (prepare.py); the panel polls the status."""

from dataclasses import asdict
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel

from app.chats.service import get_chat
from app.memory.scenes import prepare
from app.memory.scenes.messages import helper_config
from app.platform.core.errors import UserError
from app.web.deps import ServicesDep, SessionDep

router = APIRouter(prefix="/api/chats", tags=["scenes"])


class HelperRead(BaseModel):
    connection_id: int | None
    connection_name: str
    model: str


class PrepareStatus(BaseModel):
    """The chat's newest Prepare run: its stage, `done` of `total` steps of that stage, the step in hand,
    why it stopped; and the helper model it calls (None, with `helper_problem`, when there is none)."""

    run_id: int | None
    status: Literal["none", "running", "stopped", "failed", "done"]
    stage: Literal["detecting", "recapping"] | None = None
    total: int = 0
    done: int = 0
    current: str = ""
    reason: str = ""
    stop_requested: bool = False
    # Failed on a batch whose answer could not be read even when asked again: POST .../prepare/skip
    # treats it as having no scene end and goes on.
    can_skip_batch: bool = False
    working: bool = False  # a thread works it now (False while "running": a restart cut it short)
    helper: HelperRead | None = None
    helper_problem: str = ""


def _status(session, services, chat_id: int, run=None) -> PrepareStatus:
    chat = get_chat(session, chat_id)
    run = run or prepare.latest_run(session, chat_id)
    helper = prepare.helper_model(session, chat)
    problem = ""
    try:
        helper_config(session, services, chat)
    except UserError as err:
        problem = str(err)
    base = (
        PrepareStatus(run_id=None, status="none")
        if run is None
        else PrepareStatus(
            run_id=run.id,
            status=run.status,
            stage=run.stage,
            total=run.total,
            done=run.done,
            current=run.current,
            reason=run.reason,
            stop_requested=run.stop_requested,
            working=prepare.working(services, chat_id),
            can_skip_batch=run.status == "failed" and run.unreadable_through_id is not None,
        )
    )
    base.helper = None if helper is None else HelperRead(**asdict(helper))
    base.helper_problem = problem
    return base


@router.get("/{chat_id}/scenes/prepare", response_model=PrepareStatus)
def prepare_status(chat_id: int, session: SessionDep, services: ServicesDep) -> PrepareStatus:
    """The newest Prepare existing history run of the chat, and the helper model it calls (shown before
    starting)."""
    return _status(session, services, chat_id)


@router.post("/{chat_id}/scenes/prepare", response_model=PrepareStatus, status_code=202)
def start_prepare(chat_id: int, session: SessionDep, services: ServicesDep) -> PrepareStatus:
    """Start Prepare existing history in the background, or Resume the stopped, failed or cut-short run
    (409 while it runs)."""
    run = prepare.start_prepare(services, chat_id)
    return _status(session, services, chat_id, run)


@router.post("/{chat_id}/scenes/prepare/skip", response_model=PrepareStatus, status_code=202)
def skip_prepare_batch(chat_id: int, session: SessionDep, services: ServicesDep) -> PrepareStatus:
    """Treat the batch whose answer could not be read as having no scene end, and go on with the failed
    run (400 when the run did not fail on an unreadable answer)."""
    run = prepare.start_prepare(services, chat_id, skip_unreadable=True)
    return _status(session, services, chat_id, run)


@router.post("/{chat_id}/scenes/prepare/stop", response_model=PrepareStatus)
def stop_prepare(chat_id: int, session: SessionDep, services: ServicesDep) -> PrepareStatus:
    """Cancel the running Prepare after the model call in hand; finished work stays."""
    run = prepare.stop_prepare(services, chat_id)
    return _status(session, services, chat_id, run)
