"""Advanced Memory's background work: after a reply, the scene check and then the recaps of the scenes
it closed; every few minutes (and at start) a sweep that writes the recaps still waiting and tries failed
ones whose time has come. What a restart cut short (Prepare, Fix, Re-scan, recaps being written) is
settled once at start, before this sweep (source.py's RUNS, app/platform/jobs.py).
Nothing runs for a chat with Advanced Memory off or paused; a chat whose Prepare existing history run is
unfinished (running, cancelled, failed) is Prepare's alone until Resume finishes it: it checks the
history in order and writes the recaps itself, and Cancel stops the helper's calls for the chat."""

from __future__ import annotations

import logging

from sqlmodel import Session, col, select

from app.chats.models import SCENE_MODES, Chat
from app.chats.settings import read_settings
from app.memory.scenes.checks import check_scenes, preparing
from app.memory.scenes.continuity import update_continuity
from app.memory.scenes.models import Scene
from app.memory.scenes.recollections import more_due, write_recollections
from app.memory.scenes.recollections import on as recollections_on
from app.memory.scenes.writer import write_waiting_recaps
from app.platform.jobs import Job
from app.platform.services import Services

log = logging.getLogger(__name__)


def _on(session: Session, chat_id: int) -> bool:
    chat = session.get(Chat, chat_id)
    return chat is not None and chat.mode in SCENE_MODES and read_settings(chat.settings).advanced_memory


def process_chat(services: Services, chat_id: int) -> None:
    """Check for scene ends when due, then write the recaps waiting (those just closed among them)."""
    with Session(services.engine) as session:
        if not _on(session, chat_id) or preparing(session, chat_id):
            return
    try:
        check_scenes(services, chat_id)
        write_waiting_recaps(services, chat_id)
        update_continuity(services, chat_id)
        # Recollections a few scenes a run; a run that got somewhere and left more asks for the next,
        # so a chat whose option was just turned on gets them scene by scene.
        if write_recollections(services, chat_id) and more_due(services, chat_id):
            schedule_processing(services, chat_id)
    except Exception:  # background work: the log has it, the next reply or sweep tries again
        log.exception("Advanced Memory processing failed in chat %s", chat_id)


PROCESS_CHAT = "scenes.process"


def schedule_processing(services: Services, chat_id: int) -> None:
    """The chat's scene check, recaps and continuity in the background, soon (one such job waiting per chat)."""
    if services.queue is not None:
        services.queue.defer(PROCESS_CHAT, chat_id=chat_id)


def sweep(services: Services) -> None:
    """Chats with recaps waiting or due again get them (except those with an unfinished Prepare run)."""
    with Session(services.engine) as session:
        chats = session.exec(
            select(Scene.chat_id).where(col(Scene.state).in_(("waiting", "failed"))).distinct()
        ).all()
        todo = [chat_id for chat_id in chats if _on(session, chat_id) and not preparing(session, chat_id)]
        remembering = [
            chat.id
            for chat in session.exec(select(Chat).where(col(Chat.mode).in_(SCENE_MODES)))
            if recollections_on(chat) and chat.id not in todo
        ]
    for chat_id in todo:
        try:
            write_waiting_recaps(services, chat_id)
        except Exception:  # one broken chat must not stop the others
            log.exception("Advanced Memory sweep failed in chat %s", chat_id)
    for chat_id in remembering:  # recollections a restart or a failed helper left unwritten
        try:
            write_recollections(services, chat_id)
        except Exception:
            log.exception("Advanced Memory sweep (recollections) failed in chat %s", chat_id)


JOBS = (
    Job("scenes.sweep", sweep, every_minutes=5, at_start=True),
    Job(PROCESS_CHAT, process_chat, every_minutes=None),
)
