"""Conversation chats' day and week summaries: the always-on job and Backfill, which ask the model.

Decisions:
- The scheduled job ("summaries.conversation_days", every 15 minutes and at start, so a restart resumes)
  and a reply in the chat summarise at most JOB_DAYS missing days per chat per run, newest first, and
  skip a day whose last failure asks to wait (answers.retry_delay). Backfill ignores the wait: the user
  asked now. Either way a finished week whose message days all have summaries is then consolidated.
- Only one run per chat at a time in this app (`Services.claims.day_summaries`); the unique (chat, day)
  key keeps a run that another process, another app on the same data folder or a cut-short thread
  finishes late from ever writing a day twice: the later one is dropped.
- A failed answer writes nothing, keeps every summary, and records the reason on the day (its week's
  consolidation waits for it); saving the day's summary removes the failure. A provider error (down,
  refusing, timing out) ends the scheduled run for that chat, so a broken provider is not called once
  per missing day; Backfill goes on and reports each failed day.
- A day or week summary made only of the words refusals are made of (`{"summary": "I would rather not
  say."}`: overlap.says_nothing) is an unusable answer like any other: the day stays missing with that
  reason and is tried again later. Roleplay's overlap check (a summary must share a word with its
  messages) is not applied: the day prompt asks for mood-level field notes that may share none, and a
  day has no review state, so a false alarm would leave the day unsummarised for good.
- A day longer than 32,000 characters is summarised in parts (at most 12), then the parts are combined
  (Marinara's way), so a busy day does not overflow the model's context and fail for ever.
- Only the active swipe of each message is read; hidden-from-AI messages are skipped. The connection is
  the chat's at the time of the run; changing it later rewrites nothing.
- A Backfill is also a SummaryRun (kind "days"), written when it starts, when Stop is asked and when it
  ends: its progress lives in the app (`Services.day_backfills`), the row is what a restart finds. A
  restart resumes a Backfill it cut short (RunKind RESUME, at start: app/platform/jobs.py) as the same
  Backfill again: the newest missing days, up to the same number (those it summarised are no longer
  missing, and the unique day key means none is written twice); one whose Stop was asked for ends as
  stopped, one that cannot start (no connection) fails with why.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import date

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from app.chats.models import Chat, Message
from app.chats.service import chat_connection
from app.chats.settings import read_settings
from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderConfig, ProviderError
from app.connections.service import provider_config
from app.memory.days.core import days
from app.memory.days.models import DayFailure, DaySummary, WeekSummary
from app.memory.days.service import (
    conversation_chat,
    day_message_ids,
    day_rows,
    message_days,
    overview,
    today_of,
    week_rows,
)
from app.memory.summaries.core import answers, overlap
from app.memory.summaries.core.prompts import (
    CONVERSATION_DAY_PARTS_PROMPT,
    CONVERSATION_DAY_PROMPT,
    CONVERSATION_WEEK_PROMPT,
    TranscriptLine,
    day_label,
    parts_input,
    transcript_parts,
    week_input,
    week_label,
)
from app.memory.summaries.generate import INTERNAL
from app.memory.summaries.models import SummaryRun
from app.platform.core.errors import NotFound, UserError
from app.platform.services import Services
from app.platform.timeutil import as_utc, utcnow
from app.prompt.core.tokens import count_tokens

log = logging.getLogger(__name__)

JOB_DAYS = 7
TEMPERATURE = 0.3  # Marinara's: summaries should be steady, not creative
JOB_MINUTES = 15
EMPTY_DAY = "Every message of this day is empty: there is nothing to summarise."


def ask(
    config: ProviderConfig, messages: list[dict], max_output_size: int
) -> answers.DaySummary | answers.Failure:
    """Ask for `{summary, keyDetails}`, once more with a doubled budget when the model ran out of room; a
    summary made only of refusal words (a refusal in JSON) is a failure (overlap.says_nothing)."""
    attempt = 0
    result: answers.DaySummary | answers.Failure = answers.Failure("internal", INTERNAL)
    while (budget := answers.request_max_tokens(max_output_size, attempt)) is not None:
        try:
            params = GenerationParams(temperature=TEMPERATURE, max_tokens=budget)
            done = complete_chat_blocking(config, messages, params)
        except ProviderError as err:
            return answers.Failure("provider", str(err))
        result = answers.read_day_summary(
            done.text or "",
            max_tokens=budget,
            count_tokens=count_tokens,
            finish_reason=done.finish_reason,
            reasoning=done.reasoning,
        )
        if isinstance(result, answers.DaySummary):
            if overlap.says_nothing([result.summary, *result.key_details]):
                return answers.Failure("off_topic", overlap.SAYS_NOTHING)
            return result
        if not result.retry_larger:
            return result
        attempt += 1
    return result


@dataclass
class Progress:
    """A Backfill run (or the job's run), read by the panel's progress line; Stop sets `stop`."""

    total: int = 0
    done: int = 0
    added: int = 0
    failed: int = 0
    remaining: int = 0  # missing days older than this run's, when it started
    current: str = ""
    running: bool = True
    stopped: bool = False
    stop: threading.Event = field(default_factory=threading.Event)


class DayBackfills:
    """Each chat's latest day Backfill in this app (`Services.day_backfills`), by chat id. No lock: a
    chat's Backfill begins only under its claim, and one get or set of a dict is atomic."""

    def __init__(self) -> None:
        self._latest: dict[int, Progress] = {}

    def latest(self, chat_id: int) -> Progress | None:
        return self._latest.get(chat_id)

    def begin(self, chat_id: int) -> Progress:
        """A new Backfill's progress, the chat's latest from now on."""
        progress = self._latest[chat_id] = Progress()
        return progress


def _plan(session: Session, chat: Chat, limit: int) -> tuple[list[date], int]:
    assert chat.id is not None
    done_days = {r.day for r in day_rows(session, chat.id)}
    done_weeks = {r.week for r in week_rows(session, chat.id)}
    found = days.missing_days(
        [d.day for d in message_days(session, chat)], done_days, done_weeks, today_of(chat), limit=limit
    )
    return list(found.days), found.total


def _day_parts(session: Session, chat: Chat, day: date) -> list[str]:
    """The day's transcript (active swipes, hidden messages left out), in parts when it is long."""
    ids = day_message_ids(session, chat, day)
    rows = {m.id: m for m in session.exec(select(Message).where(col(Message.id).in_(ids)))}
    return transcript_parts(
        [TranscriptLine(rows[i].name or rows[i].role, _active_text(rows[i])) for i in ids if i in rows]
    )


def _day_messages(day: date, text: str, part: tuple[int, int] | None = None) -> list[dict]:
    label = day_label(day) if part is None else f"{day_label(day)}, part {part[0]} of {part[1]}"
    return [
        {"role": "system", "content": CONVERSATION_DAY_PROMPT},
        {"role": "user", "content": f"[{label}]\n\n{text}"},
    ]


def _summarise_day(
    engine: Engine, config: ProviderConfig, chat_id: int, day: date, parts: list[str], max_output: int
) -> tuple[bool, answers.Failure | None]:
    """One request for a day, or one per part and one combining them; any failure fails the whole day."""
    if len(parts) == 1:
        return _one(engine, config, chat_id, "day", day, _day_messages(day, parts[0]), max_output)
    summaries: list[tuple[str, tuple[str, ...]]] = []
    for n, text in enumerate(parts, 1):
        try:
            result = ask(config, _day_messages(day, text, (n, len(parts))), max_output)
        except Exception:
            log.exception("summarising part %s of day %s of chat %s failed", n, day, chat_id)
            result = answers.Failure("internal", INTERNAL)
        if isinstance(result, answers.Failure):
            failure = answers.Failure(result.kind, f"Part {n} of {len(parts)}: {result.reason}")
            _save(engine, chat_id, "day", day, failure)
            return False, failure
        summaries.append((result.summary, result.key_details))
    combine = [
        {"role": "system", "content": CONVERSATION_DAY_PARTS_PROMPT},
        {"role": "user", "content": parts_input(summaries)},
    ]
    return _one(engine, config, chat_id, "day", day, combine, max_output)


def _active_text(msg: Message) -> str:
    swipes = msg.swipes or []
    if 0 <= msg.active_swipe < len(swipes) and isinstance(swipes[msg.active_swipe], dict):
        return str(swipes[msg.active_swipe].get("content") or "")
    return msg.content


def _record_failure(session: Session, chat_id: int, kind: str, day: date, reason: str) -> None:
    row = session.exec(
        select(DayFailure).where(
            DayFailure.chat_id == chat_id, DayFailure.kind == kind, DayFailure.day == day
        )
    ).first()
    now = utcnow()
    if row is None:
        row = DayFailure(chat_id=chat_id, kind=kind, day=day, reason=reason, next_attempt_at=now)
    else:
        row.attempts += 1
        row.reason = reason
    row.next_attempt_at, row.updated_at = now + answers.retry_delay(row.attempts), now
    session.add(row)


def _clear_failure(session: Session, chat_id: int, kind: str, day: date) -> None:
    row = session.exec(
        select(DayFailure).where(
            DayFailure.chat_id == chat_id, DayFailure.kind == kind, DayFailure.day == day
        )
    ).first()
    if row is not None:
        session.delete(row)


def _waiting(session: Session, chat_id: int, kind: str, day: date) -> bool:
    row = session.exec(
        select(DayFailure).where(
            DayFailure.chat_id == chat_id, DayFailure.kind == kind, DayFailure.day == day
        )
    ).first()
    return row is not None and as_utc(row.next_attempt_at) > utcnow()


def _save(
    engine: Engine, chat_id: int, kind: str, day: date, result: answers.DaySummary | answers.Failure
) -> bool:
    """Keep the summary (or the failure); False when it failed or another run saved the same day first."""
    table = DaySummary if kind == "day" else WeekSummary
    with Session(engine) as session:
        if session.get(Chat, chat_id) is None:
            return False
        if isinstance(result, answers.Failure):
            _record_failure(session, chat_id, kind, day, result.reason)
            session.commit()
            return False
        values = {"day": day} if kind == "day" else {"week": day}
        session.add(
            table(chat_id=chat_id, summary=result.summary, key_details=list(result.key_details), **values)
        )
        _clear_failure(session, chat_id, kind, day)
        try:
            session.commit()
        except IntegrityError:  # saved meanwhile by another run: the first one stays
            session.rollback()
            return False
        return True


def _one(
    engine: Engine,
    config: ProviderConfig,
    chat_id: int,
    kind: str,
    day: date,
    messages: list[dict],
    max_output_size: int,
) -> tuple[bool, answers.Failure | None]:
    """Whether a summary was saved, and the failure if the model's answer was unusable."""
    try:
        result = ask(config, messages, max_output_size)
    except Exception:
        log.exception("summarising %s %s of chat %s failed", kind, day, chat_id)
        result = answers.Failure("internal", INTERNAL)
    return _save(engine, chat_id, kind, day, result), result if isinstance(result, answers.Failure) else None


def _connection(session: Session, chat: Chat, services: Services) -> ProviderConfig:
    conn = chat_connection(session, chat)
    if conn is None:
        raise UserError("No connection is set up yet. Add one under Connections.")
    try:
        return provider_config(conn, services.keybox)
    except ValueError as err:
        raise UserError(str(err)) from None


def _run(services: Services, chat_id: int, progress: Progress, *, limit: int, wait_for_backoff: bool) -> None:
    engine = services.engine
    with Session(engine) as session:
        chat = session.get(Chat, chat_id)
        if chat is None or chat.mode != "conversation":
            return
        config = _connection(session, chat, services)
        max_output = read_settings(chat.settings).summary_max_tokens
        todo, total = _plan(session, chat, limit)
        if wait_for_backoff:
            todo = [d for d in todo if not _waiting(session, chat_id, "day", d)]
    progress.total, progress.remaining = len(todo), max(total - len(todo), 0)
    for day in todo:
        if progress.stop.is_set():
            progress.stopped = True
            return
        progress.current = f"Summarising {day_label(day)}"
        with Session(engine) as session:
            chat = session.get(Chat, chat_id)
            parts = _day_parts(session, chat, day) if chat is not None else []
        if not parts:  # only empty messages: nothing to ask, but the day must not look forgotten
            _save(engine, chat_id, "day", day, answers.Failure("empty", EMPTY_DAY))
            progress.done, progress.failed = progress.done + 1, progress.failed + 1
            continue
        saved, failure = _summarise_day(engine, config, chat_id, day, parts, max_output)
        progress.done += 1
        progress.added, progress.failed = progress.added + saved, progress.failed + (failure is not None)
        if failure is not None and failure.kind == "provider" and wait_for_backoff:
            return  # the provider is down or refusing: the scheduled run does not call it for every day
    if not progress.stop.is_set():
        _consolidate(
            services, chat_id, config, max_output, wait_for_backoff=wait_for_backoff, progress=progress
        )


def _consolidate(
    services: Services,
    chat_id: int,
    config: ProviderConfig,
    max_output: int,
    *,
    wait_for_backoff: bool,
    progress: Progress,
) -> None:
    engine = services.engine
    with Session(engine) as session:
        chat = session.get(Chat, chat_id)
        if chat is None:
            return
        dayrows = {r.day: r for r in day_rows(session, chat_id)}
        ready = days.weeks_ready(
            [d.day for d in message_days(session, chat)],
            dayrows,
            {r.week for r in week_rows(session, chat_id)},
            today_of(chat),
        )
        if wait_for_backoff:
            ready = [w for w in ready if not _waiting(session, chat_id, "week", w)]
        inputs = [
            (
                w,
                [
                    (d, dayrows[d].summary, dayrows[d].key_details)
                    for d in days.days_of_week(w, list(dayrows))
                ],
            )
            for w in ready[:JOB_DAYS]
        ]
    for monday, week_days in inputs:
        if progress.stop.is_set():
            progress.stopped = True
            return
        progress.current = f"Consolidating the week of {week_label(monday)}"
        messages = [
            {"role": "system", "content": CONVERSATION_WEEK_PROMPT},
            {"role": "user", "content": week_input(week_days)},
        ]
        _saved, failure = _one(engine, config, chat_id, "week", monday, messages, max_output)
        if failure is not None and failure.kind == "provider" and wait_for_backoff:
            return


def summarize_chat(services: Services, chat_id: int) -> None:
    """Summarise a few of the chat's missing days whose backoff has passed, then ready weeks."""
    if not services.claims.day_summaries.claim(chat_id):
        return  # a Backfill or another run has the chat; the next run picks up what is left
    try:
        _run(services, chat_id, Progress(), limit=JOB_DAYS, wait_for_backoff=True)
    except UserError:
        pass  # no connection: nothing to do until one is set up
    finally:
        services.claims.day_summaries.release(chat_id)


def summarize_conversations(services: Services) -> None:
    """ "summaries.conversation_days": every Conversation chat's finished days, a few per run."""
    with Session(services.engine) as session:
        ids = list(session.exec(select(Chat.id).where(Chat.mode == "conversation")))
    for chat_id in ids:
        try:
            summarize_chat(services, chat_id)
        except Exception:  # one broken chat must not stop the others
            log.exception("day summaries failed for chat %s", chat_id)


def start_backfill(
    services: Services, chat_id: int, *, limit: int = days.BACKFILL_DAYS, run_id: int | None = None
) -> Progress:
    """Summarise up to `limit` of the newest missing days now, in a thread (`run_id`: the run a restart
    cut short, resumed)."""
    engine = services.engine
    with Session(engine) as session:
        chat = conversation_chat(session, chat_id)
        _connection(session, chat, services)
    if not services.claims.day_summaries.claim(chat_id):
        raise UserError("Summaries are already being written for this chat; wait for them to finish.")
    with services.claims.day_summaries.holding(chat_id):
        run_id = _record_start(engine, chat_id, limit, run_id)
        progress = services.day_backfills.begin(chat_id)

        def work() -> None:
            try:
                _run(services, chat_id, progress, limit=limit, wait_for_backoff=False)
            except Exception:
                log.exception("Backfill failed for chat %s", chat_id)
            finally:
                progress.running, progress.current = False, ""
                _record_end(engine, run_id, progress)

        services.claims.day_summaries.start(chat_id, work, name=f"backfill-{chat_id}")
    return progress


def stop_backfill(services: Services, chat_id: int) -> Progress:
    progress = services.day_backfills.latest(chat_id)
    if progress is None or not progress.running:
        raise UserError("No Backfill is running for this chat.")
    progress.stop.set()
    with Session(services.engine) as session:  # a restart before it ends must not resume it
        if (run := _latest(session, chat_id)) is not None and run.status == "running":
            run.stop_requested, run.updated_at = True, utcnow()
            session.add(run)
            session.commit()
    return progress


def _latest(session: Session, chat_id: int) -> SummaryRun | None:
    return session.exec(
        select(SummaryRun)
        .where(SummaryRun.chat_id == chat_id, SummaryRun.kind == "days")
        .order_by(col(SummaryRun.id).desc())
        .limit(1)
    ).first()


def _record_start(engine: Engine, chat_id: int, limit: int, run_id: int | None) -> int:
    with Session(engine) as session:
        run = session.get(SummaryRun, run_id) if run_id is not None else None
        run = run or SummaryRun(chat_id=chat_id, kind="days", total=limit)
        run.status, run.stop_requested, run.reason, run.updated_at = "running", False, "", utcnow()
        session.add(run)
        session.commit()
        return run.id or 0


def _record_end(engine: Engine, run_id: int, progress: Progress) -> None:
    with Session(engine) as session:
        if (run := session.get(SummaryRun, run_id)) is not None:
            run.status = "stopped" if progress.stopped else "done"
            run.total, run.done, run.updated_at = progress.total, progress.done, utcnow()
            session.add(run)
            session.commit()


def resume_backfills(services: Services) -> int:
    """At start: resume the Backfills a restart left "running" that no thread of this process works (a
    Stop asked for ends them instead; one that cannot start fails with why); how many."""
    engine = services.engine
    settled = 0
    with Session(engine) as session:
        rows = [
            (r.id or 0, r.chat_id, r.total, r.stop_requested)
            for r in session.exec(
                select(SummaryRun).where(SummaryRun.kind == "days", SummaryRun.status == "running")
            )
        ]
    for run_id, chat_id, total, stop_asked in rows:
        if services.claims.day_summaries.held(chat_id):
            continue  # a thread works the chat's days now, and ends the run when it is done
        settled += 1
        if not stop_asked:
            try:
                start_backfill(services, chat_id, limit=total or days.BACKFILL_DAYS, run_id=run_id)
                continue
            except UserError as err:  # no connection any more, not a Conversation chat
                status, reason = "failed", str(err)
            except NotFound:
                continue
            except Exception:  # a bug of ours: said on the run rather than left "running"
                log.exception("resuming the day Backfill of chat %s failed", chat_id)
                status, reason = "failed", INTERNAL
        else:
            status, reason = "stopped", ""
        with Session(engine) as session:
            if (run := session.get(SummaryRun, run_id)) is not None:
                run.status, run.reason, run.updated_at = status, reason, utcnow()
                session.add(run)
                session.commit()
    return settled


def result_sentence(progress: Progress) -> str:
    """Marinara's "Added N summaries · K older days remain · F failed"."""
    if not (progress.total or progress.added or progress.failed or progress.stopped):
        return "No missing summaries found."
    parts = [f"Added {progress.added} {'summary' if progress.added == 1 else 'summaries'}"]
    if progress.remaining:
        parts.append(
            f"{progress.remaining} older {'day remains' if progress.remaining == 1 else 'days remain'}"
        )
    if progress.failed:
        parts.append(f"{progress.failed} failed")
    if progress.stopped:
        parts.append("stopped")
    return " · ".join(parts)


def panel_context(session: Session, chat: Chat, *, services: Services, watch: bool = False) -> dict:
    """What the Missing Summaries panel shows. The finished Backfill's sentence only with `watch` (the panel
    that polled the run, or the answer to its own click): "Added 10 summaries" said again at every later
    opening of Chat Settings, hours on, reads as news that is no longer true."""
    assert chat.id is not None
    progress = services.day_backfills.latest(chat.id)
    ended = progress is not None and not progress.running
    return {
        "overview": overview(session, chat),
        "backfill": progress,
        "result": result_sentence(progress) if ended and watch else "",
    }
