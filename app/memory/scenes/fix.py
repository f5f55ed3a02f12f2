"""Advanced Memory → Problems, Fix, Pause processing / Resume processing (issue 14; the manual's
"Corrigir problemas de memória"). The pure decisions are problems.py's; this module reads the chat and
does the work.

    problems(session, chat_id)       -> Problems: the list, the count and the set key
    fix_status(session, services, chat_id) -> FixStatus: the problems, the newest Fix run, paused
    start_fix(services, chat_id)     -> SceneRun: Fix every flagged scene in the background
    close_cut_short(services)        -> at start (app/platform/jobs.py): close the Fix runs a restart cut short
    pause(services, chat_id) / resume(services, chat_id): Pause processing / Resume processing

Decisions:
- A Fix run is a SceneRun with stage "fixing" (no new table): its progress, end sentence and failure
  survive a reload and are polled like Prepare's. Prepare's run queries (prepare.latest_run,
  checks.preparing, prepare.resume_cut_short) take only Prepare's stages, so a Fix never looks like an
  unfinished Prepare, never blocks the checks after a reply, and is never resumed as Prepare.
- A restart closes a Fix it cut short (RunKind CLOSE, at start): "stopped" with RESTARTED, which the
  panel and the API show. Not resumed: its plan is the list of problems when the user pressed Fix, and
  after a restart that list is read again (recaps written meanwhile, scenes edited, the helper changed);
  what it fixed is kept, and the panel offers Fix for what is left.
- What Fix does per problem (problems.py names the kinds): failed and unsummarised scenes get their
  recap (writer.write_recap); changed, check_who and unchecked scenes are written again
  (write_recap(rewrite=True): a failure leaves the saved recap written and recalled); a failed scene
  check is run again at once (its wait cleared). Hand-edited scenes are never claimed (the writer's
  claim refuses them) and are listed under "need your review"; a check_who scene still undecided after
  Fix keeps problems.UNDECIDED as its reason, so the next Fix does not ask again.
- The first failed helper call stops the run as "failed" with the reason (a broken helper is not called
  once per scene); what was fixed stays; Fix again retries.
- It ends with problems.end_sentence ("Advanced Memory fixed N scenes; need your review: scenes 3, 7."),
  kept in the run's `current`.
- Pause processing (SceneState.paused): the checks and recaps after a reply, the sweep, Prepare and Fix
  all stop before their next helper call. Resume processing clears it, restarts a Fix or a Prepare
  the pause stopped, and schedules the chat's usual processing.
- A chat with Advanced Memory off (or not Roleplay) has no problems: nothing runs there to repair them.
- The notice's "announced once per set" is remembered in the browser (localStorage, per chat, the set
  key): no schema change, and each device announces a new set once.
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import update
from sqlmodel import Session, col, select

from app.chats.models import SCENE_MODES, Chat
from app.chats.service import chat_characters, get_chat
from app.chats.settings import read_settings
from app.memory.scenes import prepare
from app.memory.scenes.checks import check_scenes
from app.memory.scenes.core import problems as pb
from app.memory.scenes.core.recap import SceneMessage
from app.memory.scenes.jobs import schedule_processing
from app.memory.scenes.messages import helper_config, readable_messages
from app.memory.scenes.models import Scene, SceneRun, SceneState
from app.memory.scenes.writer import fingerprint, write_recap
from app.platform.core.errors import Conflict, UserError
from app.platform.services import Services
from app.platform.timeutil import as_utc, utcnow

log = logging.getLogger(__name__)

FIXING = "fixing"
BUSY = "Fix is already running in this chat; wait for it to finish."
PREPARING = "Prepare existing history is running in this chat; wait for it to finish or Cancel it, then Fix."
PAUSED = "Advanced Memory processing is paused in this chat; Resume processing first."
INTERNAL = "Something went wrong on Sugo's side while fixing; the log has the details."
RESTARTED = "Sugo restarted while it worked; what it fixed is kept. Run Fix again for the rest."


# Reading ---------------------------------------------------------------------------------------------


def _on(chat: Chat) -> bool:
    return chat.mode in SCENE_MODES and read_settings(chat.settings).advanced_memory


def problems(session: Session, chat_id: int) -> pb.Problems:
    """The chat's problems (none while Advanced Memory is off)."""
    chat = get_chat(session, chat_id)
    if not _on(chat):
        return pb.Problems(())
    readable = readable_messages(session, chat_id)
    ids = [m.id for m in readable]
    scenes = session.exec(
        select(Scene).where(Scene.chat_id == chat_id).order_by(col(Scene.first_message_id))
    ).all()
    group = len(chat_characters(session, chat_id)) > 1
    facts = []
    for number, s in enumerate(scenes, 1):
        inside = readable[bisect_left(ids, s.first_message_id) : bisect_right(ids, s.last_message_id)]
        current = (
            fingerprint([SceneMessage(m.number, m.name, m.text, seen_by=m.seen_by) for m in inside])
            if inside
            else None
        )
        facts.append(
            pb.SceneFacts(
                id=s.id or 0,
                number=number,
                state=s.state,
                manual=s.manual,
                check_who=s.check_who,
                enabled=s.enabled,
                fingerprint=s.fingerprint,
                current=current,
                reason=s.reason,
                updated_at=as_utc(s.updated_at),
                unchecked=group and not s.participants_checked,
            )
        )
    state = session.get(SceneState, chat_id)
    check = (
        pb.CheckFacts(state.reason, state.failures, state.unreadable_through_id is not None)
        if state is not None
        else pb.CheckFacts()
    )
    return pb.classify(facts, check, now=utcnow())


def latest_fix(session: Session, chat_id: int) -> SceneRun | None:
    return session.exec(
        select(SceneRun)
        .where(SceneRun.chat_id == chat_id, SceneRun.stage == FIXING)
        .order_by(col(SceneRun.id).desc())
        .limit(1)
    ).first()


def paused(session: Session, chat_id: int) -> bool:
    state = session.get(SceneState, chat_id)
    return state is not None and state.paused


def working(services: Services, chat_id: int) -> bool:
    """Whether a Fix thread of this app works the chat now."""
    return services.claims.fix.held(chat_id)


RECENT_END = timedelta(minutes=10)  # a Fix that ended longer ago is not announced on the chat page


def recent_end(session: Session, services: Services, chat_id: int) -> SceneRun | None:
    """The chat's Fix run that ended (done or failed) within RECENT_END: the chat page announces its end
    once (with Show) when the Chat Settings panel was closed."""
    run = latest_fix(session, chat_id)
    if run is None or run.status not in ("done", "failed") or utcnow() - as_utc(run.updated_at) > RECENT_END:
        return None
    return run


@dataclass(frozen=True)
class FixStatus:
    chat: Chat
    on: bool
    problems: pb.Problems
    run: SceneRun | None
    working: bool  # a thread works the run now ("running" without it: a restart cut it short)
    paused: bool
    helper_problem: str


def fix_status(session: Session, services: Services, chat_id: int) -> FixStatus:
    chat = get_chat(session, chat_id)
    problem = ""
    try:
        helper_config(session, services, chat)
    except UserError as err:
        problem = str(err)
    return FixStatus(
        chat,
        _on(chat),
        problems(session, chat_id),
        latest_fix(session, chat_id),
        working(services, chat_id),
        paused(session, chat_id),
        problem,
    )


# Starting --------------------------------------------------------------------------------------------


def start_fix(services: Services, chat_id: int) -> SceneRun:
    """Fix every flagged scene of the chat in the background (409 while a Fix or Prepare works)."""
    engine = services.engine
    with Session(engine) as session:
        chat = get_chat(session, chat_id)
        if chat.mode not in SCENE_MODES:
            raise UserError("Fix is for Roleplay chats with Advanced Memory Recall.")
        if not read_settings(chat.settings).advanced_memory:
            raise UserError("Turn on Advanced Memory Recall in Chat Settings first.")
        if paused(session, chat_id):
            raise UserError(PAUSED)
        if prepare.working(services, chat_id):
            raise Conflict(PREPARING)
        helper_config(session, services, chat)  # a sentence now rather than a failed run
        todo = problems(session, chat_id).fixable
        if not services.claims.fix.claim(chat_id):
            raise Conflict(BUSY)
        with services.claims.fix.holding(chat_id):
            run = SceneRun(chat_id=chat_id, stage=FIXING, total=len(todo), current="Starting Fix…")
            session.add(run)
            session.commit()
            session.refresh(run)
            plan = [(p.scene_id, p.number, p.kind) for p in todo]
            services.claims.fix.start(
                chat_id, _work, services, run.id, chat_id, plan, name=f"scenes-fix-{chat_id}"
            )
        return run


def close_cut_short(services: Services) -> int:
    """Close the Fix runs a restart left "running" that no thread of this process works: "stopped" with
    RESTARTED; how many."""
    engine = services.engine
    closed = 0
    with Session(engine) as session:
        runs = session.exec(
            select(SceneRun).where(SceneRun.stage == FIXING, SceneRun.status == "running")
        ).all()
        for run in runs:
            newest = latest_fix(session, run.chat_id)
            if working(services, run.chat_id) and newest is not None and newest.id == run.id:
                continue  # the Fix a thread works now
            # Only while it still says running: a Fix that ended (and gave its claim back) between the
            # read above and the claim's check keeps its end (the live servers run this now and then).
            ended = session.connection().execute(
                update(SceneRun)
                .where(col(SceneRun.id) == run.id, col(SceneRun.status) == "running")
                .values(
                    status="stopped", reason=RESTARTED, current="", stop_requested=False, updated_at=utcnow()
                )
            )
            session.commit()
            closed += ended.rowcount
    return closed


# Pause / Resume --------------------------------------------------------------------------------------


def _set_paused(session: Session, chat_id: int, value: bool) -> None:
    state = session.get(SceneState, chat_id) or SceneState(chat_id=chat_id)
    state.paused, state.updated_at = value, utcnow()
    session.add(state)
    session.commit()


def pause(services: Services, chat_id: int) -> None:
    """Pause processing: no scene check, recap, Prepare or Fix step starts until Resume processing."""
    with Session(services.engine) as session:
        get_chat(session, chat_id)
        _set_paused(session, chat_id, True)


def resume(services: Services, chat_id: int) -> None:
    """Resume processing: the Fix or Prepare the pause stopped goes on, and the chat's checks and
    recaps are scheduled."""
    with Session(services.engine) as session:
        chat = get_chat(session, chat_id)
        _set_paused(session, chat_id, False)
        fix_run, prep_run = latest_fix(session, chat_id), prepare.latest_run(session, chat_id)
        again_fix = fix_run is not None and fix_run.status == "stopped" and fix_run.reason == PAUSED
        again_prep = (
            prep_run is not None and prep_run.status == "stopped" and prep_run.reason == prepare.PAUSED
        )
        on = _on(chat)
    if not on:
        return
    try:
        if again_prep:
            prepare.start_prepare(services, chat_id)
        elif again_fix:
            start_fix(services, chat_id)
    except UserError as err:  # no helper any more, or busy: the panel shows the state
        log.info("resuming work in chat %s: %s", chat_id, err)
    if not again_prep:
        schedule_processing(services, chat_id)


# The work --------------------------------------------------------------------------------------------


def _stopped(services: Services) -> bool:
    return services.scheduler is not None and not services.scheduler.running


def _work(services: Services, run_id: int, chat_id: int, plan: list[tuple[int, int, str]]) -> None:
    engine = services.engine

    def _end(session: Session, run: SceneRun, status: str, reason: str = "", *, current: str = "") -> None:
        services.claims.fix.release(
            chat_id
        )  # first: a Fix (or Resume processing) asked for once the end shows may start
        _end_run(session, run, status, reason, current=current)

    try:
        fixed, review = 0, []
        for k, (scene_id, number, kind) in enumerate(plan, 1):
            if _stopped(services):
                return  # the app shut down: the next Fix reads the problems again
            with Session(engine) as session:
                run = session.get(SceneRun, run_id)
                if run is None:
                    return
                if paused(session, chat_id):
                    _end(session, run, "stopped", PAUSED)
                    return
                what = "the scene check" if scene_id == pb.CHECK else f"scene {number}"
                run.current, run.updated_at = f"Fixing {what} ({k} of {len(plan)})", utcnow()
                session.add(run)
                session.commit()
            outcome = _fix_one(services, chat_id, scene_id, kind)
            with Session(engine) as session:
                run = session.get(SceneRun, run_id)
                if run is None:
                    return
                if outcome.startswith("failed"):
                    _end(session, run, "failed", f"Fixing {what}: {outcome.removeprefix('failed: ')}")
                    return
                if outcome == "paused":
                    _end(session, run, "stopped", PAUSED)
                    return
                if outcome == "fixed" and scene_id != pb.CHECK:
                    fixed += 1
                if outcome == "review":
                    review.append(number)
                run.done, run.updated_at = k, utcnow()
                session.add(run)
                session.commit()
        with Session(engine) as session:
            run = session.get(SceneRun, run_id)
            if run is not None:
                review += [p.number for p in problems(session, chat_id).review if p.number]
                _end(session, run, "done", current=pb.end_sentence(fixed, review))
    except Exception:
        log.exception("Fix failed in chat %s", chat_id)
        with Session(engine) as session:
            if (run := session.get(SceneRun, run_id)) is not None and run.status == "running":
                _end(session, run, "failed", INTERNAL)


def _fix_one(services: Services, chat_id: int, scene_id: int, kind: str) -> str:
    """fixed, review, skipped, paused, or failed: <reason>."""
    if kind == "check_failed":
        return _check_again(services, chat_id)
    outcome = write_recap(services, scene_id, rewrite=kind in ("changed", "check_who", "unchecked"))
    if outcome == "skipped: paused":
        return "paused"
    if outcome.startswith("failed"):
        return outcome
    if outcome != "written":
        return "skipped"
    if kind == "check_who":
        with Session(services.engine) as session:
            scene = session.get(Scene, scene_id)
            if scene is not None and scene.check_who:  # still undecided: not asked again by the next Fix
                scene.reason, scene.updated_at = pb.UNDECIDED, utcnow()
                session.add(scene)
                session.commit()
                return "review"
    return "fixed"


def _check_again(services: Services, chat_id: int) -> str:
    """Run the failed scene check now (its wait cleared); a check no longer due clears the failure."""
    with Session(services.engine) as session:
        state = session.get(SceneState, chat_id)
        if state is None:
            return "skipped"
        state.next_check_at = None
        session.add(state)
        session.commit()
    outcome = check_scenes(services, chat_id)
    if outcome.status == "paused":
        return "paused"
    if outcome.status == "failed":
        return f"failed: {outcome.reason}"
    if outcome.status == "not_due":
        with Session(services.engine) as session:
            if (state := session.get(SceneState, chat_id)) is not None:
                state.reason, state.failures, state.updated_at = "", 0, utcnow()
                session.add(state)
                session.commit()
    for closed in outcome.closed:  # the scenes the check closed get their recaps too
        write_recap(services, closed)
    return "fixed" if outcome.status in ("checked", "not_due") else "skipped"


def _end_run(session: Session, run: SceneRun, status: str, reason: str = "", *, current: str = "") -> None:
    run.status, run.reason, run.current, run.updated_at = status, reason, current, utcnow()
    if status == "done":
        run.done = run.total
    run.stop_requested = False
    session.add(run)
    session.commit()
