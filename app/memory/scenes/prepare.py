"""Prepare existing history (issue 14): for a Roleplay chat that already has history, the helper model
walks it in two stages, with the run kept in the database (SceneRun) so Cancel, Resume and a restart
lose nothing finished.

1. Detecting: the messages after the newest closed scene are read oldest first, in consecutive windows
   of 2 × the scene check interval, each anchored on the previous window's last message
   (check.history_window); each answer closes scenes exactly as the check after a reply does
   (checks.close_ends). "Finding scenes: messages 41–50 of 600".
2. Recapping: every closed scene without a recap (waiting or failed, not edited by hand) gets one,
   oldest first, through writer.write_recap. "Writing recap 3 of 12".

    helper_model(session, chat)      -> the resolved helper connection and model (shown before starting)
    start_prepare(services, chat_id) -> SceneRun: start, or resume the stopped/failed/cut-short run
        (skip_unreadable=True: past the batch the helper's answer could not be read for)
    stop_prepare(services, chat_id)  -> SceneRun: Cancel after the model call in hand
    latest_run(session, chat_id)     -> the chat's newest run
    resume_cut_short(services)       -> at start (app/platform/jobs.py): resume the runs a restart left "running"

Decisions:
- A run starts after the newest closed scene (from the first message when there is none): scenes
  already closed are kept, and what the ongoing check skipped after them is read again. The newest
  messages after the last end found stay the open scene. When the recaps are written and a scene
  check's worth of messages (the interval) arrived meanwhile, the run reads them too before it is done.
- A window's scenes and the run's mark move in one transaction: a window whose answer was stored is
  never asked again; one cut short by Cancel's wait, a failure or a restart is asked again.
- Stop takes effect after the model call in hand: its answer (the window's scenes, the recap) is kept.
- A failed model call (no helper, provider error, unreadable answer) stops the run as "failed" with the
  reason; what was stored stays, a failed recap keeps the scene's earlier summary (writer.py). Resume
  retries the same window or scene at once (the recap's retry delay is for the background writer).
- A window whose answer cannot be read even when asked again (checks.ask_scene_ends; a helper that
  keeps to a shape of its own) fails the run with the window kept (`unreadable_through_id`), and the
  panel offers "Treat this batch as having no scene end" beside Retry (issue 21): a helper that never
  answers one batch usably must not stop the history for good. The skip and the run going on are one
  transaction; the batch's messages join the scene around them.
- A scene is recapped once: the writer's claim. Resume after a restart puts back the scenes the restart
  left "writing" (writer.release_stale) and writes each still without a recap; a scene another writer
  holds, or one written or edited meanwhile, is counted as done and not asked again.
- One run per chat in this process (an in-memory claim); starting while it works is a Conflict. Until
  the chat's newest run is done (running, cut short, cancelled or failed), the check and recaps after
  a reply and the sweep's recaps leave the chat alone (checks.preparing): the ongoing check would close
  a scene after a stretch Prepare has not read, and Cancel means no more helper calls. Resume reads the
  messages that arrived meanwhile too; the scenes then close as usual after each reply.
- Pause processing refuses to start (and a run finding the chat paused stops with that reason).
- A restart resumes the run (RunKind RESUME, settled at start before the first request): the user
  asked for it, and nothing finished is asked again. A Cancel asked for before the restart ends it as
  stopped instead; one that can no longer start (Advanced Memory off, paused, no helper) fails with the
  sentence saying why. A thread that finds its app shut down writes nothing more, leaving the run
  "running" for the next start.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.chats.models import SCENE_MODES, Chat
from app.chats.service import get_chat
from app.chats.settings import read_settings
from app.connections.providers.base import ProviderConfig
from app.memory.scenes.checks import ask_scene_ends, close_ends, last_scene_end
from app.memory.scenes.core.check import (
    NumberedMessage,
    SceneEnds,
    check_due,
    check_request,
    history_window,
    unreadable,
    windows_left,
)
from app.memory.scenes.messages import (
    ReadableMessage,
    helper_config,
    helper_connection,
    messages_and_streaming,
    readable_messages,
)
from app.memory.scenes.models import PREPARE_STAGES, Scene, SceneRun, SceneState
from app.memory.scenes.writer import release_stale, write_recap
from app.memory.summaries.core import answers
from app.platform.core.errors import Conflict, UserError
from app.platform.services import Services
from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)

BUSY = "Prepare existing history is already running in this chat; wait for it to finish or Cancel it."
INTERNAL = "Something went wrong on Sugo's side while preparing the history; the log has the details."
COLLIDED = "Another scene check closed a scene in these messages meanwhile; Resume to read them again."
PAUSED = "Advanced Memory processing is paused in this chat; Resume processing first."


@dataclass(frozen=True)
class HelperModel:
    connection_id: int | None
    connection_name: str
    model: str


def helper_model(session: Session, chat: Chat) -> HelperModel | None:
    """The helper model Prepare would call: Advanced Memory's chosen connection, else the chat's."""
    conn = helper_connection(session, chat)
    return None if conn is None else HelperModel(conn.id, conn.name, conn.model)


def working(services: Services, chat_id: int) -> bool:
    """Whether a thread of this app is working the chat's run now."""
    return services.claims.prepare.held(chat_id)


def latest_run(session: Session, chat_id: int) -> SceneRun | None:
    """The chat's newest Prepare run (Fix's and Re-scan's runs, their own stages, are fix.py's and rescans.py's)."""
    return session.exec(
        select(SceneRun)
        .where(SceneRun.chat_id == chat_id, col(SceneRun.stage).in_(PREPARE_STAGES))
        .order_by(col(SceneRun.id).desc())
        .limit(1)
    ).first()


def _stopped(services: Services) -> bool:
    """The app this run belongs to has shut down (its scheduler stopped)."""
    return services.scheduler is not None and not services.scheduler.running


# Starting and stopping -----------------------------------------------------------------------------


def start_prepare(services: Services, chat_id: int, *, skip_unreadable: bool = False) -> SceneRun:
    """Start Prepare existing history in the background, or resume the chat's stopped, failed or
    cut-short run from where it stopped. `skip_unreadable`: the run failed on a batch whose answer could
    not be read; that batch is treated as having no scene end (`_skip_window`) and the run goes on."""
    engine = services.engine
    with Session(engine) as session:
        chat = get_chat(session, chat_id)
        if chat.mode not in SCENE_MODES:
            raise UserError("Prepare existing history is for Roleplay chats.")
        if not read_settings(chat.settings).advanced_memory:
            raise UserError("Turn on Advanced Memory Recall in Chat Settings first.")
        if (state := session.get(SceneState, chat_id)) is not None and state.paused:
            raise UserError(PAUSED)
        if not readable_messages(session, chat_id):
            raise UserError("This chat has no messages to prepare yet.")
        helper_config(session, services, chat)  # a sentence now rather than a failed run
        if not services.claims.prepare.claim(chat_id):
            raise Conflict(BUSY)
        with services.claims.prepare.holding(chat_id):
            run = latest_run(session, chat_id)
            if skip_unreadable:
                _skip_window(session, run)
            if run is None or run.status == "done":
                run = SceneRun(chat_id=chat_id, checked_through_id=last_scene_end(session, chat_id))
            run.status, run.reason, run.stop_requested, run.updated_at = "running", "", False, utcnow()
            run.unreadable_through_id = None  # Retry asks the batch again; a new failure records it anew
            session.add(run)
            session.commit()
            session.refresh(run)
            services.claims.prepare.start(
                chat_id, _work, services, run.id, chat_id, name=f"scenes-prepare-{chat_id}"
            )
        return run


NOTHING_TO_SKIP = "Prepare has no batch it could not read; Retry or Resume it instead."


def _skip_window(session: Session, run: SceneRun | None) -> None:
    """The failed run's unreadable batch counts as read, with no scene end in it: its mark and the
    chat's move to the batch's last message in the transaction that sets the run going again, so a
    restart right after finds the run "running" past the batch (the sweep resumes it)."""
    if run is None or run.status != "failed" or run.unreadable_through_id is None:
        raise UserError(NOTHING_TO_SKIP)
    through = run.unreadable_through_id
    close_ends(session, run.chat_id, readable_messages(session, run.chat_id), [], checked_through=through)
    run.checked_through_id = max(through, run.checked_through_id or 0)
    run.done = run.done + 1
    log.info("Prepare in chat %s: a batch treated as having no scene end", run.chat_id)


def stop_prepare(services: Services, chat_id: int, *, if_running: bool = False) -> SceneRun | None:
    """Cancel the chat's run after the model call in hand; finished work stays. With `if_running`, a run
    that already ended is left as it is (None): the panel's Cancel can land just after the run failed or
    finished, and the failure it then shows is the one thing to say, not a second error."""
    with Session(services.engine) as session:
        get_chat(session, chat_id)
        run = latest_run(session, chat_id)
        if run is None or run.status != "running":
            if if_running:
                return None
            raise UserError("Prepare existing history is not running in this chat.")
        run.stop_requested, run.updated_at = True, utcnow()
        if not working(services, chat_id):  # cut short by a restart and not resumed yet
            run.status, run.current = "stopped", ""
        session.add(run)
        session.commit()
        session.refresh(run)
        return run


def resume_cut_short(services: Services) -> int:
    """Resume the runs a restart left "running" that no thread of this process works (a Cancel asked
    for meanwhile just ends them, one that cannot start fails with the reason); how many were settled."""
    engine = services.engine
    with Session(engine) as session:
        chats = session.exec(
            select(SceneRun.chat_id)
            .where(SceneRun.status == "running", col(SceneRun.stage).in_(PREPARE_STAGES))
            .distinct()
        ).all()
    settled = 0
    for chat_id in chats:
        if working(services, chat_id):
            continue
        with Session(engine) as session:
            run = latest_run(session, chat_id)
            if run is None or run.status != "running":
                continue
            settled += 1
            if run.stop_requested:
                run.status, run.current, run.updated_at = "stopped", "", utcnow()
                session.add(run)
                session.commit()
                continue
        try:
            start_prepare(services, chat_id)
        except Conflict:
            continue  # a Resume of the user's got there first
        except Exception as err:  # switched off, paused, no helper any more (a sentence), or a bug of ours
            if not isinstance(err, UserError):
                log.exception("resuming Prepare existing history in chat %s failed", chat_id)
            with Session(engine) as session:
                if (run := latest_run(session, chat_id)) is not None and run.status == "running":
                    _fail(session, run, str(err) if isinstance(err, UserError) else INTERNAL)
    return settled


# The work ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Window:
    config: ProviderConfig
    request: list[dict[str, str]]
    allowed: frozenset[int]
    messages: tuple[ReadableMessage, ...]
    last_id: int  # the window's last message: the run's mark once its answer is stored
    span: str


@dataclass(frozen=True)
class _Recap:
    scene_id: int
    label: str


def _work(services: Services, run_id: int, chat_id: int) -> None:
    engine = services.engine
    try:
        while not _stopped(services):
            step = _next_step(services, run_id, chat_id)
            if step is None:
                return
            if step is HELD:
                time.sleep(HELD_WAIT_S)
            elif isinstance(step, _Window):
                result = ask_scene_ends(step.config, step.request, step.allowed)
                if _stopped(services):
                    return  # the app stopped meanwhile: the next start asks again
                _store_window(engine, run_id, chat_id, step, result)
            else:
                outcome = write_recap(services, step.scene_id)
                _store_recap(engine, run_id, step, outcome)
    except Exception:
        log.exception("Prepare existing history failed in chat %s", chat_id)
        with Session(engine) as session:
            if (run := session.get(SceneRun, run_id)) is not None and run.status == "running":
                _fail(session, run, INTERNAL)


# Prepare's recaps wait for a scene another writer holds, looking again this often.
HELD_WAIT_S = 1.0
HELD = object()  # the step "wait for a held recap"


def _next_step(services: Services, run_id: int, chat_id: int) -> _Window | _Recap | object | None:
    """The next window to read or scene to recap, with the run's step text saved; None when the run
    ends here (stopped, failed or done)."""
    with Session(services.engine) as session:
        run = session.get(SceneRun, run_id)
        chat = session.get(Chat, chat_id)
        if run is None or chat is None or run.status != "running":
            return None
        if run.stop_requested:
            _end(session, run, "stopped")
            return None
        if (state := session.get(SceneState, chat_id)) is not None and state.paused:
            _end(session, run, "stopped", PAUSED)
            return None
        if run.stage == "detecting":
            window = _window(session, services, chat, run)
            if window is not None or run.status != "running":
                return window
            run.stage, run.done, run.total = "recapping", 0, 0
        recap = _recap(session, services, run)
        if recap is not None:
            return recap
        if _arrived_meanwhile(session, chat, run):  # read them too rather than leave a backlog
            run.stage, run.done, run.total = "detecting", 0, 0
            window = _window(session, services, chat, run)
            if window is not None or run.status != "running":
                return window
        _end(session, run, "done")
        return None


def _arrived_meanwhile(session: Session, chat: Chat, run: SceneRun) -> bool:
    """Whether a scene check's worth of messages arrived after the last window read (the chat went on
    while the recaps were written)."""
    after = [m for m in readable_messages(session, chat.id) if m.id > (run.checked_through_id or 0)]
    return check_due(len(after), read_settings(chat.settings).adv_check_interval)


def _window(session: Session, services: Services, chat: Chat, run: SceneRun) -> _Window | None:
    messages = readable_messages(session, chat.id)
    numbered = [NumberedMessage(m.number, m.name, m.text) for m in messages]
    after = [
        m.number for m in messages if run.checked_through_id is not None and m.id <= run.checked_through_id
    ]
    last = after[-1] if after else None
    interval = read_settings(chat.settings).adv_check_interval
    window = history_window(numbered, last, interval)
    if not window.messages:
        return None
    run.total = max(run.total, run.done + windows_left(numbered, last, interval))
    first, end = window.messages[0].number, window.messages[-1].number
    span = f"messages {first}–{end}" if first != end else f"message {first}"
    run.current, run.updated_at = f"Finding scenes: {span} of {messages[-1].number}", utcnow()
    session.add(run)
    session.commit()
    try:
        config = helper_config(session, services, chat)
    except UserError as err:
        _fail(session, run, str(err))
        return None
    by_number = {m.number: m for m in messages}
    return _Window(
        config,
        check_request(window.anchor, window.messages),
        window.allowed_ends,
        tuple(messages),
        by_number[end].id,
        span,
    )


def _recap(session: Session, services: Services, run: SceneRun) -> _Recap | object | None:
    release_stale(services, session)  # recaps a restart cut short go back to waiting
    rows = session.exec(
        select(Scene.id, Scene.first_message_id, Scene.last_message_id)
        .where(
            Scene.chat_id == run.chat_id,
            col(Scene.manual) == False,  # noqa: E712
            col(Scene.state).in_(("waiting", "failed")),
        )
        .order_by(col(Scene.first_message_id))
    ).all()
    # A scene whose reply is being swiped now waits for that reply's end (writer.STREAMING): asking for it
    # here again and again would spin; the after-reply work or the sweep writes it once the run is done.
    streaming = messages_and_streaming(session, run.chat_id)[1]
    pending = [sid for sid, first, last in rows if not any(first <= mid <= last for mid in streaming)]
    if not pending:
        # A recap another writer holds: its writer ends it, or, dead (another server killed), its claim
        # goes stale and release_stale gives the scene back to this run. Until then the run waits: ending
        # "done" here would leave the scene without a recap (a resumed run met it, issue 26's test).
        held = session.exec(
            select(func.count())
            .select_from(Scene)
            .where(Scene.chat_id == run.chat_id, col(Scene.manual) == False, Scene.state == "writing")  # noqa: E712
        ).one()
        if not held:
            return None
        run.total = max(run.total, run.done + held)
        run.current, run.updated_at = "Waiting for a recap another writer holds", utcnow()
        session.add(run)
        session.commit()
        return HELD
    return _pending_recap(session, run, pending)


def _pending_recap(session: Session, run: SceneRun, pending: list[int]) -> _Recap:
    run.total = max(run.total, run.done + len(pending))
    label = f"recap {run.done + 1} of {run.total}"
    run.current, run.updated_at = f"Writing {label}", utcnow()
    session.add(run)
    session.commit()
    return _Recap(pending[0], label)


def _store_window(
    engine: Engine, run_id: int, chat_id: int, step: _Window, result: SceneEnds | answers.Failure
) -> None:
    with Session(engine) as session:
        run = session.get(SceneRun, run_id)
        if run is None:
            return
        if isinstance(result, answers.Failure):
            run.unreadable_through_id = step.last_id if unreadable(result) else None
            _fail(session, run, f"Finding scenes in {step.span}: {result.reason}")
            return
        by_number = {m.number: m for m in step.messages}
        ends = [by_number[n].id for n in result.numbers]
        try:
            close_ends(session, chat_id, step.messages, ends, checked_through=step.last_id)
            run.checked_through_id = step.last_id
            run.done, run.updated_at = run.done + 1, utcnow()
            session.add(run)
            session.commit()
        except IntegrityError:
            session.rollback()
            run = session.get(SceneRun, run_id)
            if run is not None:
                _fail(session, run, COLLIDED)


def _store_recap(engine: Engine, run_id: int, step: _Recap, outcome: str) -> None:
    with Session(engine) as session:
        run = session.get(SceneRun, run_id)
        if run is None:
            return
        if outcome.startswith("failed"):
            _fail(session, run, f"Writing {step.label}: {outcome.removeprefix('failed: ')}")
        elif outcome == "skipped: paused":
            _end(session, run, "stopped", PAUSED)
        else:  # written, or written / being written / edited by someone else: not asked again
            run.done, run.updated_at = run.done + 1, utcnow()
            session.add(run)
            session.commit()


def _end(session: Session, run: SceneRun, status: str, reason: str = "") -> None:
    run.status, run.reason, run.current, run.updated_at = status, reason, "", utcnow()
    if status == "done":
        run.done = run.total
    session.add(run)
    session.commit()


def _fail(session: Session, run: SceneRun, reason: str) -> None:
    """The run stops as failed with the reason; `current` keeps the step that failed."""
    run.status, run.reason, run.updated_at = "failed", reason, utcnow()
    session.add(run)
    session.commit()
