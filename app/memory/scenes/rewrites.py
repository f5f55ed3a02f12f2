"""A closed scene whose messages changed after its recap was written (a swipe of its last reply, an
edit, a hide, a delete) gets its recap written again in the background once the change has settled,
without waiting for Fix (issue 21: a swipe left the recap describing the discarded version).

    schedule_rewrites(services, chat_id) -> the rewrite job, SETTLE_S after the chat's newest change
    rewrite_changed(services, chat_id)   -> how many changed recaps were written again

Decisions:
- "Changed" is Fix's word (fix.problems, problems.scene_problem): the messages as the helper reads them
  now differ from those the recap was written from (the fingerprint). A hand-edited recap
  ("changed_manual") is never rewritten: it stays under Memory problems as "needs your review", as Fix
  leaves it. Disabled and deleted recaps, and scenes with nothing left to read, are left as Fix leaves
  them.
- Settling: every change (an edit, hide, delete or another version picked: the `messages_changed` hook;
  a new version, a Continue or a new reply ended: `after_reply`) schedules the job SETTLE_S later and
  replaces the one pending, so paging through five versions or editing twice costs one helper call,
  for the text the user stopped at. A scene with a message still streaming (the user swiped again)
  waits for that reply (writer.STREAMING), whose end schedules the job again.
- Newest scene first (a swipe changes the newest), at most MAX_REWRITES per run, stopping at the first
  failure. A failed rewrite keeps the saved recap (still written and recalled) and waits the writer's
  retry delay (next_attempt_at) before this job tries it again; Fix retries it at once.
- Nothing while Advanced Memory is off or paused, while the chat's Prepare is unfinished, or while a
  re-scan or a Fix works the chat: each of them recaps the scenes it touches (a Fix would otherwise
  write a scene this job just wrote once more).
- The pending job lives in the scheduler: a restart loses it. The next change or reply schedules it
  again, and Fix lists the scene as changed meanwhile.
"""

from __future__ import annotations

import logging

from sqlmodel import Session, col, select

from app.chats.models import SCENE_MODES, Chat
from app.chats.settings import read_settings
from app.memory.scenes import fix
from app.memory.scenes.checks import preparing
from app.memory.scenes.models import Scene, SceneState
from app.memory.scenes.writer import write_recap
from app.platform.jobs import Job
from app.platform.services import Services
from app.platform.timeutil import as_utc, utcnow

log = logging.getLogger(__name__)

SETTLE_S = 10.0  # quiet seconds after the chat's last change before a changed recap is written again
MAX_REWRITES = 5  # changed recaps one run writes again (a long edit session catches up over a few runs)


REWRITE = "scenes.rewrite"


def schedule_rewrites(services: Services, chat_id: int) -> None:
    """Write the chat's changed recaps again once its messages have not changed for SETTLE_S."""
    if services.queue is not None:
        services.queue.defer_later(REWRITE, SETTLE_S, chat_id=chat_id)


def changed_scenes(session: Session, chat_id: int) -> list[int]:
    """The chat's scenes whose recap no longer matches their messages and that this job may write again
    now (not hand-edited, no failed rewrite waiting for its retry time), newest first."""
    ids = [p.scene_id for p in fix.problems(session, chat_id).items if p.kind == "changed"]
    if not ids:
        return []
    now = utcnow()
    rows = session.exec(
        select(Scene.id, Scene.next_attempt_at)
        .where(col(Scene.id).in_(ids))
        .order_by(col(Scene.first_message_id).desc())
    ).all()
    return [sid for sid, due in rows if due is None or as_utc(due) <= now]


def _busy(session: Session, services: Services, chat_id: int) -> bool:
    chat = session.get(Chat, chat_id)
    if chat is None or chat.mode not in SCENE_MODES or not read_settings(chat.settings).advanced_memory:
        return True
    state = session.get(SceneState, chat_id)
    if state is not None and state.paused:
        return True
    return (
        preparing(session, chat_id) or services.claims.rescans.held(chat_id) or fix.working(services, chat_id)
    )


def rewrite_changed(services: Services, chat_id: int) -> int:
    """Write the chat's changed recaps again (see the module docstring); how many were written."""
    try:
        with Session(services.engine) as session:
            if _busy(session, services, chat_id):
                return 0
            todo = changed_scenes(session, chat_id)
        written = 0
        for scene_id in todo[:MAX_REWRITES]:
            outcome = write_recap(services, scene_id, rewrite=True)
            if outcome == "written":
                written += 1
            elif outcome.startswith("failed"):
                break
        if written:
            log.info("chat %s: %d changed scene recap(s) written again", chat_id, written)
        return written
    except Exception:  # background work: the log has it; the next change, reply or Fix tries again
        log.exception("rewriting the changed recaps of chat %s failed", chat_id)
        return 0


REWRITE_JOB = Job(REWRITE, rewrite_changed, every_minutes=None)
