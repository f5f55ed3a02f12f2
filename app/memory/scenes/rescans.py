"""Re-scan scenes (issue 14): the helper reads the messages the user chose again, in the windows Prepare
uses (check.history_window, checks.ask_scene_ends), and the scenes inside the range whose bounds changed
are replaced in one transaction (rescan.plan decides), then recapped (writer.write_recap).

    default_range(session, chat_id)             -> (first, last): the open scene, as message numbers
    start_rescan(services, chat_id, first, last) -> RescanStatus: checked now, the work in a thread
    rescan_status(services, chat_id)            -> the chat's last re-scan, or None
    close_cut_short(services)                   -> at start (app/platform/jobs.py): close the re-scans a restart cut short

Decisions:
- A re-scan changes nothing until every window is read, then changes the scenes in ONE transaction: a
  restart during the reading loses only the helper's answers, never half the scenes. Its progress lives
  in the app's memory (`Services.rescan_statuses`), polled by the panel like Prepare's. It is also a
  SceneRun (stage "rescanning", which Prepare's queries leave out; `current` holds the range read,
  "41–60"), written when it starts and when it ends, and marked (`checked_through_id`) in the
  transaction that changes the scenes.
- A restart closes a re-scan it cut short (RunKind CLOSE, at start): "stopped" with RESTARTED (nothing was
  changed: Re-scan again), or, past the change, RESTARTED_CHANGED (the new scenes' recaps are ordinary
  waiting scenes, which the sweep writes). Not resumed: the helper's answers were in memory, and the
  user may not want the same range read again after what made them restart. The panel and the API then
  show that outcome until the next re-scan.
- One re-scan per chat at a time (Conflict); none while the chat's Prepare run is unfinished, while
  processing is paused, or with Advanced Memory off; Roleplay chats only.
- A scene check after a reply may close a scene in the range while the helper reads it: the scenes
  touching the range are compared with those at the start, and any change refuses the re-scan
  ("Re-scan again") rather than mixing two answers. A scene of the range being recapped at that moment
  refuses it too.
- The chat's "last checked" mark moves to the range's last message when it was behind it: those
  messages have just been read.
- Recaps: the new scenes oldest first; the first failed one stops the run (a broken helper is not asked
  once per scene) with its reason; the scenes stay waiting/failed for the sweep and Fix.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, delete, select

from app.chats.history import message_count, message_numbers
from app.chats.models import SCENE_MODES, Chat
from app.chats.service import get_chat
from app.chats.settings import read_settings
from app.memory.scenes.checks import ask_scene_ends, last_scene_end, preparing
from app.memory.scenes.core import rescan
from app.memory.scenes.core.check import NumberedMessage, check_request, history_window, windows_left
from app.memory.scenes.messages import ReadableMessage, helper_config, readable_messages
from app.memory.scenes.models import Scene, SceneRecapPart, SceneRun, SceneState
from app.memory.scenes.service import chat_messages
from app.memory.scenes.writer import write_recap
from app.memory.summaries.core import answers
from app.platform.core.errors import Conflict, UserError
from app.platform.services import Services
from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)

BUSY = "A re-scan is already running in this chat; wait for it to finish."
PREPARING = "Prepare existing history is unfinished in this chat; let it finish (Resume) before re-scanning."
PAUSED = "Advanced Memory processing is paused in this chat; Resume processing first."
RESTARTED = "Sugo restarted while the helper read these messages; nothing was changed. Re-scan again."
RESTARTED_CHANGED = (
    "Sugo restarted after the scenes in these messages changed; the new scenes' recaps are "
    "written in the background (or by Fix)."
)
STAGE = "rescanning"
COLLIDED = "A scene check changed the scenes in these messages while the helper read them; nothing was changed. Re-scan again."
INTERNAL = (
    "Something went wrong on Sugo's side while re-scanning; nothing was changed. The log has the details."
)


@dataclass
class RescanStatus:
    status: str  # running, done, stopped (a hand-edited scene), failed
    first: int  # the range read, as message numbers (widened to whole scenes)
    last: int
    stage: str = "detecting"  # detecting, recapping
    total: int = 0
    done: int = 0
    current: str = ""
    message: str = ""  # how it ended, a sentence for the panel
    changed: tuple[int, ...] = ()  # the new scenes' numbers


class RescanStatuses:
    """The last re-scan of each chat in this app (`Services.rescan_statuses`), by chat id. Read as a
    copy: the panel never sees one half updated by the re-scan's thread."""

    def __init__(self) -> None:
        self._runs: dict[int, RescanStatus] = {}
        self._lock = threading.Lock()

    def get(self, chat_id: int) -> RescanStatus | None:
        with self._lock:
            run = self._runs.get(chat_id)
            return dataclasses.replace(run) if run is not None else None

    def begin(self, chat_id: int, first: int, last: int) -> RescanStatus:
        """A running re-scan of messages first–last, the chat's last from now on."""
        with self._lock:
            run = self._runs[chat_id] = RescanStatus("running", first, last)
            return dataclasses.replace(run)

    def update(self, chat_id: int, **fields: Any) -> None:
        with self._lock:
            run = self._runs.get(chat_id)
            if run is not None:
                for key, value in fields.items():
                    setattr(run, key, value)


def rescan_status(services: Services, chat_id: int, session: Session | None = None) -> RescanStatus | None:
    """The chat's re-scan in this app; else how the newest one before the last start ended. `session`:
    the caller's (a request's), so it never waits for a second connection of the pool."""
    if (run := services.rescan_statuses.get(chat_id)) is not None:
        return run
    if session is None:
        with Session(services.engine) as own:
            return rescan_status(services, chat_id, own)
    row = _latest(session, chat_id)
    if row is None or row.status == "running" or (bounds := _bounds(row)) is None:
        return None
    return RescanStatus(row.status, *bounds, message=row.reason)


def _latest(session: Session, chat_id: int) -> SceneRun | None:
    return session.exec(
        select(SceneRun)
        .where(SceneRun.chat_id == chat_id, SceneRun.stage == STAGE)
        .order_by(col(SceneRun.id).desc())
        .limit(1)
    ).first()


def _bounds(row: SceneRun) -> tuple[int, int] | None:
    first, _, last = row.current.partition("–")
    return (int(first), int(last)) if first.isdigit() and last.isdigit() else None


def close_cut_short(services: Services) -> int:
    """Close the re-scans a restart left "running" that no thread of this process works; how many."""
    engine = services.engine
    closed = 0
    with Session(engine) as session:
        rows = session.exec(
            select(SceneRun).where(SceneRun.stage == STAGE, SceneRun.status == "running")
        ).all()
        for row in rows:
            newest = _latest(session, row.chat_id)
            if services.claims.rescans.held(row.chat_id) and newest is not None and newest.id == row.id:
                continue  # the re-scan a thread works now
            # Only while it still says running: one that ended between the read and the claim's check
            # keeps its end (the live servers run this now and then).
            reason = RESTARTED if row.checked_through_id is None else RESTARTED_CHANGED
            ended = session.connection().execute(
                update(SceneRun)
                .where(col(SceneRun.id) == row.id, col(SceneRun.status) == "running")
                .values(status="stopped", reason=reason, updated_at=utcnow())
            )
            closed += ended.rowcount
        session.commit()
    return closed


def _record_end(services: Services, job: _Job) -> None:
    """Keep how the re-scan ended on its row (left "running" when the app shut down: the next start closes it)."""
    run = rescan_status(services, job.chat_id)
    if run is None or run.status == "running":
        return
    with Session(services.engine) as session:
        row = session.get(SceneRun, job.run_id)
        if row is not None:
            row.status, row.reason, row.updated_at = run.status, run.message, utcnow()
            session.add(row)
            session.commit()


def default_range(session: Session, chat_id: int) -> tuple[int, int] | None:
    """The open scene (the messages after the newest closed scene) as message numbers; the newest closed
    scene when no message follows it; None for a chat without messages. Counted on the index: the
    panel shows on Chat Settings, whose cost must not grow with the chat."""
    total = message_count(session, chat_id, None)
    if not total:
        return None
    end = last_scene_end(session, chat_id)
    before = 0 if end is None else message_numbers(session, chat_id, [end])[end]
    if before < total:
        return before + 1, total
    newest = session.exec(
        select(Scene).where(Scene.chat_id == chat_id).order_by(col(Scene.first_message_id).desc()).limit(1)
    ).first()
    if newest is not None:
        first, last = newest.first_message_id - 1, newest.last_message_id
        upto = message_numbers(session, chat_id, [first, last])
        if upto[last] > upto[first]:
            return upto[first] + 1, upto[last]
    return total, total


MAX_DIGITS = 9


def read_range(first: str, last: str) -> tuple[int, int]:
    """The form's First message / Last message as numbers, each a sentence when it is not one."""
    values = []
    for label, raw in (("First message", first), ("Last message", last)):
        raw = raw.strip()
        if not (raw.isascii() and raw.isdigit()) or len(raw) > MAX_DIGITS:
            shown = f"“{raw[:MAX_DIGITS]}{'…' if len(raw) > MAX_DIGITS else ''}”" if raw else "Empty"
            raise UserError(f"Re-scan: {label}: {shown} is not a message number (1, 2, 3…).")
        values.append(int(raw))
    return values[0], values[1]


def rescan_context(session: Session, services: Services, chat: Chat) -> dict[str, Any]:
    """What the Re-scan scenes panel shows: the default range, the last re-scan, whether one can start."""
    default = default_range(session, chat.id or 0)
    problem = ""
    try:
        helper_config(session, services, chat)
    except UserError as err:
        problem = str(err)
    run = rescan_status(services, chat.id or 0, session)
    return {
        "chat": chat,
        "run": run,
        "default": default,
        "helper_problem": problem,
        "enabled": read_settings(chat.settings).advanced_memory,
        "preparing": preparing(session, chat.id or 0),
        "max_range": rescan.MAX_RANGE,
        "total": message_count(session, chat.id or 0, None),
        "closed": last_scene_end(session, chat.id or 0) is not None,
    }


def _old_scenes(session: Session, chat_id: int) -> list[rescan.OldScene]:
    rows = session.exec(
        select(Scene).where(Scene.chat_id == chat_id).order_by(col(Scene.first_message_id))
    ).all()
    return [
        rescan.OldScene(r.id or 0, n, r.first_message_id, r.last_message_id, r.manual, r.summary)
        for n, r in enumerate(rows, 1)
    ]


def _touching(session: Session, chat_id: int, first: int, last: int) -> set[tuple[int, int, int]]:
    """The scenes with a message in the range (id, first, last): a change during the reading refuses it."""
    return {
        (s.id, s.first, s.last) for s in _old_scenes(session, chat_id) if s.first <= last and s.last >= first
    }


@dataclass(frozen=True)
class _Job:
    chat_id: int
    first_id: int  # the widened range, message ids
    last_id: int
    anchor: ReadableMessage | None  # the readable message before the range (context of the first window)
    messages: tuple[ReadableMessage, ...]  # the readable messages of the range
    interval: int
    touching: frozenset[tuple[int, int, int]]
    run_id: int = 0  # its SceneRun


def start_rescan(services: Services, chat_id: int, first: int | None, last: int | None) -> RescanStatus:
    """Check the range (message numbers; an edge left out is the open scene's, `default_range`) and start
    the re-scan in the background. Its own sessions, one at a time: a request calls this before it uses
    its own session (holding that one's connection, it would wait for a second connection of the pool)."""
    engine = services.engine
    with Session(engine) as session:
        chat = get_chat(session, chat_id)
        if first is None or last is None:
            default = default_range(session, chat_id) or (1, 1)
            first, last = first or default[0], last or default[1]
        if chat.mode not in SCENE_MODES:
            raise UserError("Re-scan scenes is for Roleplay chats.")
        settings = read_settings(chat.settings)
        if not settings.advanced_memory:
            raise UserError("Turn on Advanced Memory Recall in Chat Settings first.")
        if (state := session.get(SceneState, chat_id)) is not None and state.paused:
            raise UserError(PAUSED)
        if preparing(session, chat_id):
            raise UserError(PREPARING)
        numbered = chat_messages(session, chat_id)
        if (refused := rescan.check_range(first, last, len(numbered))) is not None:
            raise UserError(refused)
        scenes = _old_scenes(session, chat_id)
        first_id, last_id = rescan.widen(scenes, numbered[first - 1].id, numbered[last - 1].id)
        number = {m.id: m.number for m in numbered}
        wide = number[first_id], number[last_id]
        if wide != (first, last) and (refused := rescan.check_range(*wide, len(numbered))) is not None:
            raise UserError(
                f"A scene crosses the edge of messages {first:,}–{last:,}, so the re-scan must read "
                f"messages {wide[0]:,}–{wide[1]:,}. {refused}"
            )
        readable = readable_messages(session, chat_id)
        inside = tuple(m for m in readable if first_id <= m.id <= last_id)
        if not inside:
            raise UserError(
                f"Messages {wide[0]:,}–{wide[1]:,} are all hidden from the AI or empty: nothing to re-scan."
            )
        before = [m for m in readable if m.id < first_id]
        helper_config(session, services, chat)  # a sentence now rather than a failed run
        job = _Job(
            chat_id,
            first_id,
            last_id,
            before[-1] if before else None,
            inside,
            settings.adv_check_interval,
            frozenset(_touching(session, chat_id, first_id, last_id)),
        )
    if not services.claims.rescans.claim(chat_id):
        raise Conflict(BUSY)
    with services.claims.rescans.holding(chat_id):
        with Session(engine) as session:
            row = SceneRun(chat_id=chat_id, stage=STAGE, current=f"{wide[0]}–{wide[1]}")
            session.add(row)
            session.commit()
            job = dataclasses.replace(job, run_id=row.id or 0)
        shown = services.rescan_statuses.begin(chat_id, *wide)
        services.claims.rescans.start(chat_id, _work, services, job, name=f"scenes-rescan-{chat_id}")
    return shown


def _stopped(services: Services) -> bool:
    return services.scheduler is not None and not services.scheduler.running


def _work(services: Services, job: _Job) -> None:
    chat_id, statuses = job.chat_id, services.rescan_statuses
    try:
        ends = _detect(services, job)
        if ends is None or _stopped(services):
            return
        new = _change(services, job, ends)
        if new is None:
            return
        _recap(services, job, new)
    except UserError as err:  # the helper's connection went away meanwhile
        statuses.update(chat_id, status="failed", current="", message=str(err))
    except Exception:
        log.exception("Re-scan scenes failed in chat %s", chat_id)
        statuses.update(chat_id, status="failed", message=INTERNAL)
    finally:
        _record_end(services, job)


def _detect(services: Services, job: _Job) -> list[int] | None:
    """The scene ends the helper names in the range (message ids); None when a window failed."""
    engine, statuses = services.engine, services.rescan_statuses
    numbered = [
        NumberedMessage(m.number, m.name, m.text)
        for m in ((job.anchor,) if job.anchor else ()) + job.messages
    ]
    by_number = {m.number: m for m in job.messages}
    last = job.anchor.number if job.anchor else None
    total = windows_left(numbered, last, job.interval)
    statuses.update(job.chat_id, total=total, done=0)
    with Session(engine) as session:
        chat = session.get(Chat, job.chat_id)
        if chat is None:
            return None
        config = helper_config(session, services, chat)
    ends: list[int] = []
    done = 0
    while (window := history_window(numbered, last, job.interval)).messages:
        a, b = window.messages[0].number, window.messages[-1].number
        span = f"messages {a}–{b}" if a != b else f"message {a}"
        statuses.update(
            job.chat_id,
            current=f"Finding scenes: {span} of {job.messages[0].number}–{job.messages[-1].number}",
        )
        result = ask_scene_ends(config, check_request(window.anchor, window.messages), window.allowed_ends)
        if isinstance(result, answers.Failure):
            statuses.update(
                job.chat_id,
                status="failed",
                current="",
                message=f"Finding scenes in {span}: {result.reason} Nothing was changed; Re-scan again.",
            )
            return None
        ends += [by_number[n].id for n in result.numbers if n in by_number]
        done += 1
        last = b
        statuses.update(job.chat_id, done=done)
        if _stopped(services):
            return None
    return ends


def _change(services: Services, job: _Job, ends: list[int]) -> list[int] | None:
    """Replace the changed scenes in one transaction; the new scenes' ids (None: stopped or refused)."""
    statuses = services.rescan_statuses
    with Session(services.engine) as session:
        if frozenset(_touching(session, job.chat_id, job.first_id, job.last_id)) != job.touching:
            statuses.update(job.chat_id, status="failed", current="", message=COLLIDED)
            return None
        scenes = _old_scenes(session, job.chat_id)
        readable = [m.id for m in readable_messages(session, job.chat_id)]
        outcome = rescan.plan(scenes, readable, ends, job.first_id, job.last_id)
        if isinstance(outcome, rescan.Stop):
            statuses.update(job.chat_id, status="stopped", current="", message=outcome.sentence)
            return None
        removed = [s.id for s in outcome.remove]
        busy = [
            s
            for s in outcome.remove
            if (row := session.get(Scene, s.id)) is not None and row.state == "writing"
        ]
        if busy:
            statuses.update(
                job.chat_id,
                status="failed",
                current="",
                message=f"The recap of scene {busy[0].number} is being written right now; nothing was changed. "
                "Re-scan again in a moment.",
            )
            return None
        try:
            if removed:
                session.exec(delete(SceneRecapPart).where(col(SceneRecapPart.scene_id).in_(removed)))  # type: ignore[call-overload]
                session.exec(delete(Scene).where(col(Scene.id).in_(removed)))  # type: ignore[call-overload]
                session.flush()
            created = [
                Scene(chat_id=job.chat_id, first_message_id=a, last_message_id=b) for a, b in outcome.create
            ]
            session.add_all(created)
            state = session.get(SceneState, job.chat_id) or SceneState(chat_id=job.chat_id)
            end = job.messages[-1].id
            if (state.checked_through_id or 0) < end:
                state.checked_through_id, state.updated_at = end, utcnow()
                session.add(state)
            if (
                row := session.get(SceneRun, job.run_id)
            ) is not None:  # past the change: a restart now says so
                row.checked_through_id, row.updated_at = end, utcnow()
                session.add(row)
            session.commit()
        except IntegrityError:
            session.rollback()
            statuses.update(job.chat_id, status="failed", current="", message=COLLIDED)
            return None
        ids = [s.id for s in created if s.id is not None]
        numbers = {s.id: s.number for s in _old_scenes(session, job.chat_id)}
    statuses.update(job.chat_id, changed=tuple(numbers[i] for i in ids))
    if not outcome.changed:
        statuses.update(
            job.chat_id,
            status="done",
            current="",
            message="The helper found the same scenes in these messages: nothing changed.",
        )
        return None
    return ids


def _recap(services: Services, job: _Job, ids: list[int]) -> None:
    statuses = services.rescan_statuses
    run = rescan_status(services, job.chat_id)
    changed = run.changed if run else ()
    statuses.update(job.chat_id, stage="recapping", total=len(ids), done=0)
    written = 0
    for k, scene_id in enumerate(ids):
        label = f"scene {changed[k]}" if k < len(changed) else "a scene"
        statuses.update(job.chat_id, current=f"Writing recap {k + 1} of {len(ids)}")
        outcome = write_recap(services, scene_id)
        if outcome.startswith("failed"):
            statuses.update(
                job.chat_id,
                status="failed",
                current="",
                message=f"{_scenes_sentence(changed)} Writing the recap of {label} failed: "
                f"{outcome.removeprefix('failed: ')} It is tried again later, or run Fix.",
            )
            return
        if outcome == "skipped: paused":
            statuses.update(
                job.chat_id,
                status="done",
                current="",
                message=f"{_scenes_sentence(changed)} Processing was paused: their recaps are written after Resume.",
            )
            return
        written += outcome in ("written", "skipped: already being written", "skipped: already written")
        statuses.update(job.chat_id, done=k + 1)
    statuses.update(
        job.chat_id,
        status="done",
        current="",
        message=f"{_scenes_sentence(changed)} {written} {'recap' if written == 1 else 'recaps'} written.",
    )


def _scenes_sentence(numbers: tuple[int, ...]) -> str:
    if not numbers:
        return "The changed scenes were merged into the open scene."
    listed = ", ".join(str(n) for n in numbers)
    return f"New {'scene' if len(numbers) == 1 else 'scenes'}: {listed}."
