"""Backfill Summary and automatic summaries: the model writes Chat Summary entries in the background,
through the same request and answer checks as Generate (generate.py), with the run kept in the database.

Decisions:
- Backfill works through the readable messages older than the Recent message tail that no entry covers
  (coverage.uncovered_batches), BATCH messages per model call, oldest first. The work list is read again
  before every step, so a step finished before a restart, or an entry written meanwhile, is never redone.
- Stop takes effect after the model call in hand: its entry is kept, no further call is made.
- A failed Backfill step stops the run with its reason; Retry (or Backfill again) resumes the same run
  from that step. Finished entries stay.
- A restart resumes a Backfill it cut short (RunKind RESUME, settled at start before the first request:
  app/platform/jobs.py): the user asked for it and no finished batch is redone. One whose Stop was asked for ends
  as stopped, one with nothing left as done, one that cannot start (no connection) fails with why. A
  thread that finds its app stopped writes nothing more (as if the process had died).
- An automatic run a restart cut short is resumed through its own retry schedule: it is marked failed
  with INTERRUPTED (an attempt) and due at once, so the sweep (at start, then every minute) asks again,
  never while another run has the chat.
- Automatic: after a reply, when the chat has `summary_every` user messages after the newest entry's end,
  the messages after that end (the tail too, at most BATCH) get one entry. Nothing is written for a range
  an entry already reaches (checked in the transaction that writes, under the chat's run claim).
- A failed automatic run is tried again by the scheduler after answers.retry_delay (1, 5, 30 minutes),
  MAX_AUTO_ATTEMPTS in all, then it waits for Retry. While it waits, new replies do not start another
  run: a broken provider is not called every N messages.
- One run per chat at a time, whichever kind (Generate, Backfill, automatic): generate.claim. A Generate
  asked for meanwhile waits its turn and starts when the run lets go of the chat (generate.start_waiting).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from functools import partial

from sqlalchemy import text, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.chats.models import Chat
from app.chats.service import get_chat
from app.chats.settings import read_settings
from app.connections.providers.base import ProviderConfig
from app.memory.summaries.core import answers
from app.memory.summaries.core.coverage import (
    DEFAULT_BATCH,
    ChatMessage,
    SummaryRange,
    automatic_due,
    automatic_scope,
    uncovered_batches,
)
from app.memory.summaries.generate import (
    INTERNAL,
    INTERRUPTED,
    ask,
    claim,
    close_interrupted,
    release,
    running,
    start_all_waiting,
    start_waiting,
    summary_config,
    summary_request,
    write_model_entry,
)
from app.memory.summaries.models import SummaryJob, SummaryRun
from app.platform.core.errors import Conflict, UserError
from app.platform.jobs import CLOSE, RESUME, Job, RunKind
from app.platform.services import Services
from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)

BATCH = DEFAULT_BATCH  # messages per Backfill call: Marinara's summaryContextSize
MAX_AUTO_ATTEMPTS = 4  # the first try and three retries (after 1, 5 and 30 minutes)
SWEEP_MINUTES = 1  # how often due retries are looked for: the shortest retry delay
BUSY = "A summary is already being written for this chat; wait for it to finish or Stop it."
_MESSAGES_SQL = text(
    "SELECT id, hidden, role FROM message WHERE chat_id = :chat_id AND kind = 'message' AND id > :after"
    " ORDER BY id"
)
_ENTRY_RANGES_SQL = text(
    "SELECT first_message_id, last_message_id FROM summary_entry WHERE chat_id = :chat_id"
)
_NEWEST_ENTRY_SQL = text(
    "SELECT first_message_id, last_message_id FROM summary_entry WHERE chat_id = :chat_id"
    " ORDER BY last_message_id DESC LIMIT 1"
)
_REACHED_SQL = text(
    "SELECT 1 FROM summary_entry WHERE chat_id = :chat_id AND first_message_id <= :last_id"
    " AND last_message_id >= :first_id LIMIT 1"
)


def user_messages_after(messages: Sequence[tuple[int, bool, str]], after_id: int | None) -> int:
    """How many readable user messages come after `after_id` (all of them when None)."""
    return sum(
        1
        for mid, hidden, role in messages
        if role == "user" and not hidden and (after_id is None or mid > after_id)
    )


def _messages(session: Session, chat_id: int, *, after: int | None = None) -> list[tuple[int, bool, str]]:
    """The chat's messages (id, hidden, role) in order; with `after`, only those with a greater id."""
    params = {"chat_id": chat_id, "after": -1 if after is None else after}
    rows = session.connection().execute(_MESSAGES_SQL, params).all()
    return [(int(r[0]), bool(r[1]), str(r[2])) for r in rows]


def _entry_ranges(session: Session, chat_id: int) -> list[SummaryRange]:
    rows = session.connection().execute(_ENTRY_RANGES_SQL, {"chat_id": chat_id}).all()
    return [SummaryRange(int(a), int(b)) for a, b in rows]


def _newest_entry(session: Session, chat_id: int) -> list[SummaryRange]:
    """The entry that ends last (active or not), as a one-range list; empty when the chat has none."""
    rows = session.connection().execute(_NEWEST_ENTRY_SQL, {"chat_id": chat_id}).all()
    return [SummaryRange(int(a), int(b)) for a, b in rows]


def _reached(session: Session, chat_id: int, first_id: int, last_id: int) -> bool:
    """Whether an entry already covers any message of first_id..last_id."""
    params = {"chat_id": chat_id, "first_id": first_id, "last_id": last_id}
    return session.connection().execute(_REACHED_SQL, params).first() is not None


def latest_run(session: Session, chat_id: int, kind: str) -> SummaryRun | None:
    return session.exec(
        select(SummaryRun)
        .where(SummaryRun.chat_id == chat_id, SummaryRun.kind == kind)
        .order_by(SummaryRun.id.desc())
        .limit(1)  # type: ignore[union-attr]
    ).first()


def _job(session: Session, chat_id: int, first_id: int, last_id: int) -> SummaryJob:
    """An unsaved Generate job for the range: what summary_request reads."""
    ids = [mid for mid, _, _ in _messages(session, chat_id)]
    at = {mid: n for n, mid in enumerate(ids, 1)}
    return SummaryJob(
        chat_id=chat_id,
        scope="range",
        first_message_id=first_id,
        last_message_id=last_id,
        first_position=at.get(first_id, 0),
        last_position=at.get(last_id, 0),
    )


def _stopped(services: Services) -> bool:
    """The app this run belongs to has shut down (its scheduler stopped)."""
    return services.scheduler is not None and not services.scheduler.running


def _batches(session: Session, chat: Chat) -> list[tuple[int, int]]:
    msgs = [ChatMessage(mid, hidden) for mid, hidden, _ in _messages(session, chat.id)]
    tail = read_settings(chat.settings).summary_recent_tail
    return uncovered_batches(msgs, _entry_ranges(session, chat.id), tail=tail, batch=BATCH)


# Backfill


def start_backfill(services: Services, chat_id: int) -> SummaryRun:
    """Start Backfill for the chat's uncovered older messages, or resume its failed or cut-short run."""
    engine = services.engine
    with Session(engine) as session:
        chat = get_chat(session, chat_id)
        if chat.mode != "roleplay":
            raise UserError(
                "Backfill Summary is for Roleplay chats; Conversation chats are summarised by day."
            )
        if running(services, chat_id):
            raise Conflict(BUSY)
        config = summary_config(session, services, chat)
        batches = _batches(session, chat)
        if not batches:
            tail = read_settings(chat.settings).summary_recent_tail
            raise UserError(
                f"Every message older than the recent tail ({tail}) is covered by a summary already: "
                "there is nothing to backfill."
            )
        run = latest_run(session, chat_id, "backfill")
        if run is None or run.status not in ("failed", "running"):
            run = SummaryRun(chat_id=chat_id, kind="backfill", total=len(batches))
        run.status, run.reason, run.stop_requested = "running", "", False
        run.total, run.updated_at = run.done + len(batches), utcnow()
        try:
            claim(services, chat_id)
        except UserError:
            raise Conflict(BUSY) from None
        with services.claims.summaries.holding(chat_id):
            session.add(run)
            session.commit()
            session.refresh(run)
            services.claims.summaries.start(
                chat_id,
                _backfill,
                services,
                run.id,
                chat_id,
                config,
                name=f"backfill-{chat_id}",
                then=partial(start_waiting, services, chat_id),
            )
        return run


def stop_backfill(services: Services, chat_id: int) -> SummaryRun:
    """Ask the chat's Backfill to stop after the model call in hand."""
    with Session(services.engine) as session:
        get_chat(session, chat_id)
        run = latest_run(session, chat_id, "backfill")
        if run is None or run.status != "running":
            raise UserError("No Backfill is running in this chat.")
        run.stop_requested, run.updated_at = True, utcnow()
        if not running(services, chat_id):  # cut short by a restart and not resumed yet
            run.status, run.current = "stopped", ""
        session.add(run)
        session.commit()
        session.refresh(run)
        return run


def _backfill(services: Services, run_id: int, chat_id: int, config: ProviderConfig) -> None:
    engine = services.engine
    try:
        while not _stopped(services):
            step = _next_step(engine, run_id, chat_id)
            if step is None:
                return
            first_id, last_id, request = step
            result = ask(config, request)
            if _stopped(services):
                return  # the app stopped meanwhile: the next start asks again
            with Session(engine) as session:
                run = session.get(SummaryRun, run_id)
                if run is None:
                    return
                if (reason := _store_answer(session, chat_id, first_id, last_id, result)) is not None:
                    _fail(session, run, reason)
                    return
                run.done, run.updated_at = min(run.done + 1, run.total), utcnow()
                session.add(run)
                session.commit()
    except Exception:
        log.exception("Backfill failed in chat %s", chat_id)
        with Session(engine) as session:
            run = session.get(SummaryRun, run_id)
            if run is not None:
                _fail(session, run, INTERNAL)


def _next_step(engine: Engine, run_id: int, chat_id: int):
    """The next batch and its request, with the run's step text saved; None when the run ends here."""
    with Session(engine) as session:
        run = session.get(SummaryRun, run_id)
        chat = session.get(Chat, chat_id)
        if run is None or chat is None:
            return None
        if run.stop_requested:
            run.status, run.current, run.updated_at = "stopped", "", utcnow()
            session.add(run)
            session.commit()
            return None
        batches = _batches(session, chat)
        if not batches:
            run.status, run.current, run.done, run.updated_at = "done", "", run.total, utcnow()
            session.add(run)
            session.commit()
            return None
        first_id, last_id = batches[0]
        job = _job(session, chat_id, first_id, last_id)
        run.total = max(run.total, run.done + len(batches))  # messages that aged out of the tail meanwhile
        run.current, run.updated_at = f"messages {job.first_position}–{job.last_position}", utcnow()
        session.add(run)
        session.commit()
        try:
            request = summary_request(session, job, read_settings(chat.settings).summary_max_tokens)
        except UserError as err:
            _fail(session, run, str(err))
            return None
        return first_id, last_id, request


def _store_answer(
    session: Session,
    chat_id: int,
    first_id: int,
    last_id: int,
    result: answers.ProseSummary | answers.Failure,
) -> str | None:
    """Write the model's entry for the range, unless an entry already reaches it (a run that a restart
    repeated); why the answer could not be used, else None."""
    if isinstance(result, answers.Failure):
        return result.reason
    if _reached(session, chat_id, first_id, last_id):
        return None
    job = _job(session, chat_id, first_id, last_id)
    written = write_model_entry(
        session,
        chat_id,
        result.text,
        first_id=first_id,
        last_id=last_id,
        first_position=job.first_position,
        last_position=job.last_position,
    )
    return written if isinstance(written, str) else None


def _fail(session: Session, run: SummaryRun, reason: str) -> None:
    run.status, run.reason, run.updated_at = "failed", reason, utcnow()
    session.add(run)
    session.commit()


# Automatic


AUTOMATIC = "summaries.automatic"


def schedule_automatic(services: Services, chat_id: int) -> None:
    """After a reply: see in the background whether the chat is due an automatic summary (one such
    job waiting per chat)."""
    if services.queue is not None:
        services.queue.defer(AUTOMATIC, chat_id=chat_id)


def run_automatic(services: Services, chat_id: int, *, retry: bool = False) -> None:
    """Write the automatic entry when the chat is due one (or, with `retry`, try its failed run again)."""
    engine = services.engine
    with Session(engine) as session:
        chat = session.get(Chat, chat_id)
        if chat is None or chat.mode != "roleplay":
            return
        settings = read_settings(chat.settings)
        if settings.advanced_memory_on(chat.mode):
            return  # Advanced Memory replaces the automatic schedule while it is on (the manual)
        latest = latest_run(session, chat_id, "automatic")
        # A failed run waits for its retry time or the user's Retry; a "running" one nobody holds was
        # cut short by a shutdown and is the sweep's to try again.
        waiting = latest is not None and latest.status in ("failed", "running")
        if not settings.summary_auto and waiting and retry:  # switched off meanwhile: no more attempts
            latest.status, latest.next_attempt_at, latest.updated_at = "stopped", None, utcnow()
            session.add(latest)
            session.commit()
        if not settings.summary_auto or waiting != retry:
            return
        # Only the newest entry and the messages after its end: what the rule counts and what a run
        # covers; a reply that is not due reads a few rows, however long the chat.
        entries = _newest_entry(session, chat_id)
        after = max((e.last_id for e in entries), default=None)
        msgs = _messages(session, chat_id, after=after)
        if not retry and not automatic_due(user_messages_after(msgs, after), settings.summary_every):
            return
        scope = automatic_scope([ChatMessage(mid, hidden) for mid, hidden, _ in msgs], entries, batch=BATCH)
        if scope is None:
            if retry and latest is not None:  # covered meanwhile (a Backfill, an entry written by hand)
                latest.status, latest.next_attempt_at, latest.updated_at = "done", None, utcnow()
                session.add(latest)
                session.commit()
            return
        try:
            claim(services, chat_id)
        except UserError:
            return  # another run is going; the next reply looks again
    try:
        _automatic(services, chat_id, scope, retry=retry)
    except Exception:
        log.exception("automatic summary failed in chat %s", chat_id)
        with Session(engine) as session:
            run = latest_run(session, chat_id, "automatic")
            if run is not None and run.status == "running":
                _automatic_failed(session, run, INTERNAL)
    finally:
        release(services, chat_id)
        start_waiting(services, chat_id)  # a Generate that waited for this run


def _automatic(services: Services, chat_id: int, scope: tuple[int, int], *, retry: bool) -> None:
    engine = services.engine
    first_id, last_id = scope
    with Session(engine) as session:
        chat = get_chat(session, chat_id)
        run = latest_run(session, chat_id, "automatic") if retry else None
        run = run or SummaryRun(chat_id=chat_id, kind="automatic", total=1)
        job = _job(session, chat_id, first_id, last_id)
        run.status, run.next_attempt_at, run.updated_at = "running", None, utcnow()
        run.current = f"messages {job.first_position}–{job.last_position}"
        session.add(run)
        session.commit()
        session.refresh(run)
        run_id = run.id
        try:
            config = summary_config(session, services, chat)
            request = summary_request(session, job, read_settings(chat.settings).summary_max_tokens)
        except UserError as err:
            _automatic_failed(session, run, str(err))
            return
    result = ask(config, request)
    if _stopped(services):
        return
    with Session(engine) as session:
        run = session.get(SummaryRun, run_id)
        if run is None:
            return
        if (reason := _store_answer(session, chat_id, first_id, last_id, result)) is not None:
            _automatic_failed(session, run, reason)
            return
        run.status, run.done, run.attempts, run.reason, run.updated_at = "done", 1, 0, "", utcnow()
        session.add(run)
        session.commit()


def _automatic_failed(session: Session, run: SummaryRun, reason: str) -> None:
    run.attempts += 1
    again = run.attempts < MAX_AUTO_ATTEMPTS
    run.next_attempt_at = utcnow() + answers.retry_delay(run.attempts) if again else None
    _fail(session, run, reason)


def retry_automatic(services: Services, chat_id: int) -> SummaryRun:
    """The user's Retry of a failed automatic run: now, with a fresh count of attempts."""
    with Session(services.engine) as session:
        get_chat(session, chat_id)
        run = latest_run(session, chat_id, "automatic")
        if run is None or run.status != "failed":
            raise UserError("There is no failed automatic summary to retry.")
        if running(services, chat_id):
            raise Conflict(BUSY)
        # Shown as running at once, so the panel answering this Retry polls until the entry is there.
        run.status, run.attempts, run.next_attempt_at, run.updated_at = "running", 0, None, utcnow()
        session.add(run)
        session.commit()
        session.refresh(run)
    threading.Thread(
        target=run_automatic,
        args=(services, chat_id),
        kwargs={"retry": True},
        name=f"summary-auto-{chat_id}",
        daemon=True,
    ).start()
    return run


# The scheduler's sweep, and what a restart left


def sweep(services: Services) -> None:
    """Try failed automatic runs whose time has come (a run a restart cut short among them), and start a
    Generate still waiting while its chat is free (should a hand-over ever have been missed)."""
    engine = services.engine
    now = utcnow()
    with Session(engine) as session:
        runs = session.exec(
            select(SummaryRun).where(
                SummaryRun.kind == "automatic",
                SummaryRun.status == "failed",
                col(SummaryRun.next_attempt_at) <= now,
            )
        ).all()
        todo = [r.chat_id for r in runs]
    for chat_id in todo:
        if running(services, chat_id):
            continue
        try:
            run_automatic(services, chat_id, retry=True)
        except Exception:  # one broken chat must not stop the others
            log.exception("summary sweep failed for chat %s", chat_id)
    start_all_waiting(services)


def resume_backfills(services: Services) -> int:
    """At start: resume the Backfill runs a restart left "running" that no thread of this process works
    (ended instead when Stop was asked for or nothing is left; failed with why when they cannot start);
    how many."""
    engine = services.engine
    with Session(engine) as session:
        chats = session.exec(
            select(SummaryRun.chat_id)
            .where(SummaryRun.kind == "backfill", SummaryRun.status == "running")
            .distinct()
        ).all()
    settled = 0
    for chat_id in chats:
        if running(services, chat_id):
            continue
        settled += 1
        try:
            if not _settle_backfill(engine, chat_id):
                start_backfill(services, chat_id)
        except Exception as err:  # the connection is gone (a sentence), or a bug of ours: said on the run
            if not isinstance(err, UserError):
                log.exception("resuming the Backfill of chat %s failed", chat_id)
            with Session(engine) as session:
                run = latest_run(session, chat_id, "backfill")
                if run is not None and run.status == "running":
                    _fail(session, run, str(err) if isinstance(err, UserError) else INTERNAL)
    return settled


def requeue_automatic(services: Services) -> int:
    """At start: the automatic runs a restart left "running" become due at once for the sweep (failed with
    INTERRUPTED); how many."""
    engine = services.engine
    requeued = 0
    with Session(engine) as session:
        for run in session.exec(
            select(SummaryRun).where(SummaryRun.kind == "automatic", SummaryRun.status == "running")
        ).all():
            if running(services, run.chat_id):
                continue
            # Only while it still says running (one that ended between the read and the claim's check
            # keeps its end); attempts + 1: the model was asked; due at once all the same (a restart is
            # no reason to wait).
            ended = session.connection().execute(
                update(SummaryRun)
                .where(col(SummaryRun.id) == run.id, col(SummaryRun.status) == "running")
                .values(
                    status="failed",
                    reason=INTERRUPTED,
                    next_attempt_at=utcnow(),
                    updated_at=utcnow(),
                    attempts=SummaryRun.attempts + 1,
                )
            )
            requeued += ended.rowcount
        session.commit()
    return requeued


def _settle_backfill(engine: Engine, chat_id: int) -> bool:
    """End a cut-short Backfill that has nothing left to resume: Stop was asked for, or its work is done."""
    with Session(engine) as session:
        run = latest_run(session, chat_id, "backfill")
        chat = session.get(Chat, chat_id)
        if run is None or chat is None or run.status != "running":
            return True
        if run.stop_requested:
            run.status = "stopped"
        elif not _batches(session, chat):
            run.status, run.done = "done", run.total
        else:
            return False
        run.current, run.updated_at = "", utcnow()
        session.add(run)
        session.commit()
        return True


JOBS = (
    Job("summaries.sweep", sweep, every_minutes=SWEEP_MINUTES, at_start=True),
    Job(AUTOMATIC, run_automatic, every_minutes=None),
)

# Settled at start in this order (app/platform/jobs.py): the Generate and automatic runs cut short are closed while
# no thread holds a chat (after the Backfills resume, a held chat would look busy); the Backfills then
# resume and take their chats; a Generate waiting its turn starts last, at once or when its chat's
# Backfill ends.
RUNS = (
    RunKind("Generate", "summary_job", CLOSE, close_interrupted, reason=INTERRUPTED),
    RunKind("Automatic summary", "summary_run", RESUME, requeue_automatic),
    RunKind("Backfill Summary", "summary_run", RESUME, resume_backfills),
    RunKind("Generate waiting its turn", "summary_job", RESUME, start_all_waiting),
)
