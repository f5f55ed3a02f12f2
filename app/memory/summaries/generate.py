"""Generate: the chat's connection writes a Chat Summary entry for a scope, off the event loop.

Decisions:
- One run per chat at a time, whichever kind (Generate, Backfill, automatic: `Services.claims.summaries`):
  the same chat and range are never summarised twice at once. A Generate asked for while another run has the chat waits its turn:
  it is stored as "waiting" (the panel says "Waiting for Backfill to finish…", with Cancel) and starts
  the moment that run lets go of the chat (ChatClaims.start's `then`; the automatic run calls
  `start_waiting` itself). One waiting Generate per chat: a second is refused with a sentence, since the
  panel shows one run. Its messages are read when it starts, not when it was asked for.
- A restart (RunKind, settled at start: app/platform/jobs.py) closes a Generate whose answer was on its way as
  failed with INTERRUPTED, and Retry at hand (the user sees what happened and decides); a Generate that
  was waiting its turn had not begun, and starts (after the resumed Backfill, if one holds the chat).
- The model reads only the active swipe of each message in scope; hidden-from-AI messages are skipped.
- An answer that is only thinking or cut off is asked again once with a doubled budget; any failure
  writes no entry, changes none, and is kept on the job with its reason.
- The prompt is the Summary Prompt template chosen for every Roleplay chat (the Default when none is
  chosen or it was deleted), read when the run starts; the Summary Provider (else the chat's connection) writes it.
  Changing either later never rewrites entries already written.
- A generated entry that mentions none of the names, places or words of the messages it covers (a refusal
  such as "I would rather not say", or an answer about something else: overlap.py) is kept, inactive and
  waiting for review, with that reason in the panel, whatever Review outputs says: it never reaches the
  prompt unless the user approves it, and the messages stay covered, so automatic runs and Continuity do
  not ask again for them.
- A generated entry is titled by its first words (at most 8, "…" when cut): the panel already shows the
  messages it covers beside the title, and those numbers shift when messages are deleted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.chats.models import Chat, Message
from app.chats.service import chat_connection, get_chat
from app.chats.settings import read_settings
from app.connections.models import Connection
from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderConfig, ProviderError
from app.connections.service import provider_config
from app.memory.summaries import templates
from app.memory.summaries.core import answers, overlap
from app.memory.summaries.core.prompts import TranscriptLine, transcript
from app.memory.summaries.core.rules import scope_coverage
from app.memory.summaries.models import SummaryEntry, SummaryJob, SummaryRun
from app.memory.summaries.service import (
    MAX_ENTRIES,
    MAX_TITLE,
    entry_count,
    list_entries,
    message_ids,
    uncovered,
)
from app.platform.core.errors import Conflict, NotFound, UserError
from app.platform.services import Services
from app.platform.timeutil import utcnow
from app.prompt.core.tokens import count_tokens

log = logging.getLogger(__name__)

INTERRUPTED = "The run was interrupted (Sugo restarted) before the model answered."
WAITING_ALREADY = (
    "A summary is already waiting its turn in this chat: it is written when the run in hand ends. "
    "Cancel it to ask for another."
)
NOT_WAITING = "No summary is waiting its turn in this chat."
INTERNAL = "Something went wrong on Sugo's side while writing the summary; the log has the details."


@dataclass(frozen=True)
class Request:
    """What one run asks the model: the messages in the provider-neutral shape."""

    messages: list[dict]
    max_output_size: int


def running(services: Services, chat_id: int) -> bool:
    return services.claims.summaries.held(chat_id)


def running_chats(services: Services) -> list[int]:
    """The chats with a run going on now."""
    return services.claims.summaries.chats()


def claim(services: Services, chat_id: int) -> None:
    if not services.claims.summaries.claim(chat_id):
        raise UserError("A summary is already being written for this chat; wait for it to finish.")


def release(services: Services, chat_id: int) -> None:
    services.claims.summaries.release(chat_id)


def latest_job(session: Session, engine: Engine, chat_id: int) -> SummaryJob | None:
    """The chat's newest Generate run (one cancelled while it waited is passed over: the run it waited
    for is what the panel follows then)."""
    return session.exec(
        select(SummaryJob)
        .where(SummaryJob.chat_id == chat_id, SummaryJob.status != "cancelled")
        .order_by(SummaryJob.id.desc())
        .limit(1)  # type: ignore[union-attr]
    ).first()


def _waiting(session: Session, chat_id: int) -> SummaryJob | None:
    return session.exec(
        select(SummaryJob)
        .where(SummaryJob.chat_id == chat_id, SummaryJob.status == "waiting")
        .order_by(col(SummaryJob.id))
        .limit(1)
    ).first()


def waiting_for(session: Session, chat_id: int) -> str:
    """What a waiting Generate waits for, as the panel names it: "Backfill", "the automatic summary", or
    "the summary of messages 3–7"."""
    kinds = session.exec(
        select(SummaryRun.kind).where(SummaryRun.chat_id == chat_id, SummaryRun.status == "running")
    ).all()
    if "backfill" in kinds:
        return "Backfill"
    if "automatic" in kinds:
        return "the automatic summary"
    job = session.exec(
        select(SummaryJob).where(SummaryJob.chat_id == chat_id, SummaryJob.status == "running")
    ).first()
    return (
        f"the summary of messages {job.first_position}–{job.last_position}" if job else "the summary in hand"
    )


def summary_connection(session: Session, chat: Chat) -> tuple[Connection | None, bool]:
    """The connection that writes the chat's summaries: the Summary Provider, else the chat's own; and
    whether a chosen Summary Provider was deleted (so the chat's is used)."""
    chosen_id = read_settings(chat.settings).summary_connection_id
    if chosen_id is not None and (chosen := session.get(Connection, chosen_id)) is not None:
        return chosen, False
    return chat_connection(session, chat), chosen_id is not None


def summary_config(session: Session, services: Services, chat: Chat) -> ProviderConfig:
    """How to call the connection that writes the chat's summaries (Generate, Backfill, automatic)."""
    conn, _ = summary_connection(session, chat)
    if conn is None:
        raise UserError("No connection is set up yet. Add one under Connections.")
    try:
        return provider_config(conn, services.keybox, timeout_s=services.settings.model_timeout_s)
    except ValueError as err:
        raise UserError(str(err)) from None


def scope_transcript(session: Session, chat_id: int, first_id: int, last_id: int) -> str:
    """What the model reads of a range: the active swipe of each message in it, hidden ones skipped."""
    rows = session.exec(
        select(Message)
        .where(
            Message.chat_id == chat_id,
            Message.kind == "message",
            Message.hidden == False,  # noqa: E712
            Message.id >= first_id,
            Message.id <= last_id,
        )
        .order_by(Message.id)  # type: ignore[arg-type]
    ).all()
    return transcript([TranscriptLine(m.name or m.role, _active_text(m)) for m in rows])


def summary_request(session: Session, job: SummaryJob, max_output_size: int) -> Request:
    """The prompt for a job: the chat's Summary Prompt and the scope's active swipes."""
    text = scope_transcript(session, job.chat_id, job.first_message_id, job.last_message_id)
    if not text:
        raise UserError(
            "Every message in that scope is hidden from the AI or empty: there is nothing to summarise."
        )
    prompt = templates.chosen_prompt(session)
    return Request(
        [{"role": "system", "content": prompt.text}, {"role": "user", "content": text}], max_output_size
    )


def _active_text(msg: Message) -> str:
    swipes = msg.swipes or []
    if 0 <= msg.active_swipe < len(swipes) and isinstance(swipes[msg.active_swipe], dict):
        return str(swipes[msg.active_swipe].get("content") or "")
    return msg.content


def start(
    services: Services,
    chat_id: int,
    *,
    scope: str = "last",
    last: int | None = None,
    start: int | None = None,
    end: int | None = None,
) -> SummaryJob:
    """Check the scope and the connection, record the run and start it in a thread."""
    engine = services.engine
    with Session(engine) as session:
        chat = get_chat(session, chat_id)
        if chat.mode != "roleplay":
            raise UserError(
                "Chat Summary entries are for Roleplay chats; Conversation chats are summarised by day."
            )
        try:
            cov = scope_coverage(message_ids(session, chat_id), scope, last=last, start=start, end=end)
        except ValueError as err:
            raise UserError(str(err)) from None
        config = summary_config(session, services, chat)
        job = SummaryJob(
            chat_id=chat_id,
            scope=scope,
            last_n=last,
            start=start,
            end=end,
            first_message_id=cov.first_id,
            last_message_id=cov.last_id,
            first_position=cov.first_position,
            last_position=cov.last_position,
        )
        request = summary_request(session, job, read_settings(chat.settings).summary_max_tokens)
        if services.claims.summaries.claim(chat_id):
            with services.claims.summaries.holding(chat_id):
                session.add(job)
                session.commit()
                session.refresh(job)
                _launch(services, job.id or 0, chat_id, config, request)
            return job
        # Another run has the chat (Backfill, automatic, a Generate): this one waits its turn.
        if _waiting(session, chat_id) is not None:
            raise Conflict(WAITING_ALREADY)
        job.status = "waiting"
        session.add(job)
        session.commit()
        job_id = job.id
    start_waiting(services, chat_id)  # that run may have let go of the chat meanwhile
    with Session(engine) as session:
        waiting = session.get(SummaryJob, job_id)
        if waiting is None:
            raise NotFound(f"Chat {chat_id} was deleted meanwhile.")
        return waiting


def _launch(services: Services, job_id: int, chat_id: int, config: ProviderConfig, request: Request) -> None:
    """Write the job's entry in a thread holding the chat's claim (taken); a Generate waiting meanwhile
    starts when it lets go."""
    services.claims.summaries.start(
        chat_id,
        _run,
        services.engine,
        job_id,
        chat_id,
        config,
        request,
        name=f"summary-{chat_id}",
        then=partial(start_waiting, services, chat_id),
    )


def _stopped(services: Services) -> bool:
    """The app has shut down (its scheduler stopped): what waits is started by the next start."""
    return services.scheduler is not None and not services.scheduler.running


def start_waiting(services: Services, chat_id: int) -> bool:
    """Start the chat's Generate that waited its turn, if the chat is free now; whether one started. Its
    request is built now (from the messages as they are); one that can no longer run fails with why."""
    engine = services.engine
    if _stopped(services):
        return False
    with Session(engine) as session:
        job = _waiting(session, chat_id)
        if job is None or not services.claims.summaries.claim(chat_id):
            return False
        with services.claims.summaries.holding(chat_id):
            try:
                chat = get_chat(session, chat_id)
                config = summary_config(session, services, chat)
                request = summary_request(session, job, read_settings(chat.settings).summary_max_tokens)
                new_status, reason = "running", ""
            except UserError as err:  # the connection was removed, the messages hidden or deleted meanwhile
                new_status, reason = "failed", str(err)
            # Conditional: a Cancel that came meanwhile wins.
            moved = session.exec(
                update(SummaryJob)
                .where(col(SummaryJob.id) == job.id, col(SummaryJob.status) == "waiting")  # type: ignore[call-overload]
                .values(status=new_status, reason=reason, updated_at=utcnow())
            ).rowcount
            session.commit()
            if moved != 1 or new_status != "running":
                services.claims.summaries.release(chat_id)
                return False
            _launch(services, job.id or 0, chat_id, config, request)
        return True


def cancel_waiting(services: Services, chat_id: int) -> SummaryJob:
    """Cancel the chat's Generate waiting its turn (one already started goes on)."""
    with Session(services.engine) as session:
        get_chat(session, chat_id)
        job = _waiting(session, chat_id)
        moved = 0
        if job is not None:
            moved = session.exec(
                update(SummaryJob)
                .where(col(SummaryJob.id) == job.id, col(SummaryJob.status) == "waiting")  # type: ignore[call-overload]
                .values(status="cancelled", updated_at=utcnow())
            ).rowcount
            session.commit()
        if job is None or moved != 1:
            raise UserError(NOT_WAITING)
        session.refresh(job)
        return job


def close_interrupted(services: Services) -> int:
    """At start: the Generates a restart cut short while the model was asked, failed with INTERRUPTED
    (Retry at hand); how many."""
    engine = services.engine
    closed = 0
    with Session(engine) as session:
        for job in session.exec(select(SummaryJob).where(SummaryJob.status == "running")).all():
            if running(services, job.chat_id):
                continue  # a thread works the chat now (here or on another server)
            # Only while it still says running: a Generate that ended between the read and the claim's
            # check keeps its end (the live servers run this now and then).
            ended = session.connection().execute(
                update(SummaryJob)
                .where(col(SummaryJob.id) == job.id, col(SummaryJob.status) == "running")
                .values(status="failed", reason=INTERRUPTED, updated_at=utcnow())
            )
            closed += ended.rowcount
        session.commit()
    return closed


def start_all_waiting(services: Services) -> int:
    """The Generates waiting their turn whose chat is free, started (at start, after the resumed runs that
    go first, and by the summaries' sweep should a hand-over ever be missed); how many."""
    with Session(services.engine) as session:
        chats = session.exec(
            select(SummaryJob.chat_id).where(SummaryJob.status == "waiting").distinct()
        ).all()
    return sum(start_waiting(services, chat_id) for chat_id in chats)


def start_uncovered(services: Services, chat_id: int) -> SummaryJob:
    """Generate a summary of the oldest stretch of messages older than the recent tail that no summary
    covers (at most service.UNCOVERED_BATCH of them), as a Range, so failure, Retry and Review work as
    for any Generate."""
    with Session(services.engine) as session:
        chat = get_chat(session, chat_id)
        tail = read_settings(chat.settings).summary_recent_tail
        gap = uncovered(session, chat_id, list_entries(session, chat_id), tail=tail)
    if gap.next_positions is None:
        raise UserError("Every message older than the recent tail is covered by a summary already.")
    first, last = gap.next_positions
    return start(services, chat_id, scope="range", start=first, end=last)


def retry(services: Services, chat_id: int) -> SummaryJob:
    """Run the newest failed job's scope again. Its own sessions, one at a time: a request calls this
    before it uses its own session (holding that one's connection, it would wait for a second
    connection of the pool). NotFound for a chat that is not there."""
    with Session(services.engine) as session:
        get_chat(session, chat_id)
        job = latest_job(session, services.engine, chat_id)
        if job is None or job.status != "failed":
            raise UserError("There is no failed summary to retry.")
        scope, last_n, first, end = job.scope, job.last_n, job.start, job.end
    return start(services, chat_id, scope=scope, last=last_n, start=first, end=end)


def ask(config: ProviderConfig, request: Request) -> answers.ProseSummary | answers.Failure:
    """Ask the model, once more with a doubled budget when it ran out of room; the text or why not."""
    attempt = 0
    while (budget := answers.request_max_tokens(request.max_output_size, attempt)) is not None:
        try:
            done = complete_chat_blocking(config, request.messages, GenerationParams(max_tokens=budget))
        except ProviderError as err:
            return answers.Failure("provider", str(err))
        result = answers.read_prose_summary(
            done.text or "",
            max_tokens=budget,
            count_tokens=count_tokens,
            finish_reason=done.finish_reason,
            reasoning=done.reasoning,
        )
        if isinstance(result, answers.ProseSummary):
            return answers.prose_problem(result.text) or result
        if not result.retry_larger:
            return result
        attempt += 1
    return result


def first_words(text: str, count: int = 8) -> str:
    words = text.split()
    title = " ".join(words[:count]).rstrip(".,;:")
    return (title + "…" if len(words) > count else title)[:MAX_TITLE]


def _run(engine: Engine, job_id: int, chat_id: int, config: ProviderConfig, request: Request) -> None:
    try:
        result = ask(config, request)
        with Session(engine) as session:
            _finish(session, job_id, result)
            session.commit()
    except Exception:
        log.exception("writing a summary for chat %s failed", chat_id)
        with Session(engine) as session:
            _finish(session, job_id, answers.Failure("internal", INTERNAL))
            session.commit()


def _finish(session: Session, job_id: int, result: answers.ProseSummary | answers.Failure) -> None:
    job = session.get(SummaryJob, job_id)
    if job is None:  # the chat was deleted meanwhile
        return
    job.updated_at = utcnow()
    if isinstance(result, answers.Failure):
        job.status, job.reason = "failed", result.reason
        session.add(job)
        return
    written = write_model_entry(
        session,
        job.chat_id,
        result.text,
        first_id=job.first_message_id,
        last_id=job.last_message_id,
        first_position=job.first_position,
        last_position=job.last_position,
    )
    if isinstance(written, str):
        job.status, job.reason = "failed", written
    else:
        job.status, job.reason, job.entry_id = "done", "", written.id
    session.add(job)


def write_model_entry(
    session: Session,
    chat_id: int,
    text: str,
    *,
    first_id: int,
    last_id: int,
    first_position: int,
    last_position: int,
) -> SummaryEntry | str:
    """Add the entry the model wrote; why not, as a sentence. It is held for review, inactive, when the
    chat asks (Review outputs) and when it mentions nothing of the messages it covers (a refusal, an
    answer about something else: overlap.py), then with that reason."""
    chat = get_chat(session, chat_id)
    count = entry_count(session, chat_id)
    if count >= MAX_ENTRIES:
        return f"This chat already has {MAX_ENTRIES} summary entries, the limit."
    reason = overlap.unrelated(text, scope_transcript(session, chat_id, first_id, last_id)) or ""
    review = read_settings(chat.settings).summary_review or bool(reason)
    entry = SummaryEntry(
        chat_id=chat_id,
        title=first_words(text),
        content=text,
        first_message_id=first_id,
        last_message_id=last_id,
        first_position=first_position,
        last_position=last_position,
        tokens=count_tokens(text),
        origin="model",
        active=not review,
        awaiting_review=review,
        review_reason=reason,
    )
    session.add(entry)
    session.flush()
    return entry
