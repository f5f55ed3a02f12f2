"""Write now: one finished day or week of a Conversation chat summarised at once, from Edit Summaries
or the JSON API. Without it a deleted week (or a day a week speaks for) waits for the next background
run, or is never written again.

Decisions:
- Only what has no summary is written: a summary is rewritten by deleting it first, so a click never
  replaces the user's edits.
- A week's message days that lack a summary are written first, oldest first, then the week from its
  day summaries (the background run's order: a week is consolidated from its days). A day that fails
  stops the run with its reason, and the week waits for it, as it does in the background run.
- The wait after a failure is ignored (the user asked now), as Backfill does; a failure is recorded on
  the day or week as any run's is, so Missing Summaries shows it too.
- One writer per chat: Write now takes the claim Backfill and the background run take
  (`Services.claims.day_summaries`), and says so when one of them has the chat. The unique (chat, day)
  key guards the rest: a summary saved meanwhile by another process stays, and the run says it was
  already written.
- The run lives in this process (`Services.summary_writes`, the chat's latest), for the window's poll
  and the API. Nothing of it is persisted: a restart forgets it, while what it wrote is saved and what
  failed is in the failure row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date

from sqlmodel import Session

from app.chats.models import Chat
from app.chats.settings import read_settings
from app.connections.providers.base import ProviderConfig
from app.memory.days import runs as day_runs
from app.memory.days.core import days
from app.memory.days.service import (
    conversation_chat,
    day_rows,
    item_key,
    message_days,
    today_of,
    week_rows,
)
from app.memory.summaries.core import answers
from app.memory.summaries.core.prompts import CONVERSATION_WEEK_PROMPT, day_label, week_input, week_label
from app.memory.summaries.generate import INTERNAL
from app.platform.core.errors import UserError
from app.platform.services import Services

log = logging.getLogger(__name__)


@dataclass
class WriteRun:
    """One Write now: what it writes, where it is, and how it ended."""

    kind: str  # "days" or "weeks", as in the window's keys and the API's paths
    on: date  # the day, or the week's Monday
    todo: tuple[date, ...] = ()  # the days it writes first (a week's missing days; a day itself)
    running: bool = True
    current: str = ""
    days_written: int = 0
    week_written: bool = False
    already: bool = False  # another run saved it first
    failure: str = ""

    @property
    def key(self) -> str:
        return item_key(self.kind, self.on)

    @property
    def week(self) -> date:
        return days.week_start(self.on)

    @property
    def ok(self) -> bool:
        return not self.running and not self.failure

    def result(self) -> str:
        """What the window and the API say once it ended."""
        if self.running:
            return ""
        if self.failure:
            return self.failure
        if self.already:
            return "Already written by another run; it is shown here."
        if self.kind == "days":
            return f"Wrote the summary of {day_label(self.on)}."
        extra = (
            f" and {self.days_written} day {'summary' if self.days_written == 1 else 'summaries'}"
            if self.days_written
            else ""
        )
        return f"Wrote the summary of the week of {week_label(self.on)}{extra}."


def _plan(session: Session, chat: Chat, kind: str, on: date) -> tuple[date, ...]:
    """The days to write before the target (the target itself for a day); UserError when there is
    nothing Write now may write."""
    assert chat.id is not None
    item_key(kind, on)
    today = today_of(chat)
    with_messages = {d.day for d in message_days(session, chat)}
    summarised = {r.day for r in day_rows(session, chat.id)}
    if kind == "days":
        if on >= today:
            raise UserError(f"{day_label(on)} is not over yet: a day is summarised once it has ended.")
        if on in summarised:
            raise UserError(
                f"{day_label(on)} already has a summary; delete it first to have it written again."
            )
        if on not in with_messages:
            raise UserError(f"{day_label(on)} has no messages to summarise.")
        return (on,)
    if on != days.week_start(on):
        raise UserError(f"A week is named by its Monday; {on.isoformat()} is not one.")
    if not days.week_finished(on, today):
        raise UserError(
            f"The week of {week_label(on)} is not over yet: a week is summarised once it has ended."
        )
    if on in {r.week for r in week_rows(session, chat.id)}:
        raise UserError(
            f"The week of {week_label(on)} already has a summary; delete it first to have it written again."
        )
    todo = tuple(days.days_of_week(on, sorted(with_messages - summarised)))
    if not todo and not days.days_of_week(on, sorted(summarised)):
        raise UserError(f"The week of {week_label(on)} has no messages to summarise.")
    return todo


def write_status(services: Services, chat_id: int) -> WriteRun | None:
    """The chat's latest Write now in this process, if any."""
    return services.summary_writes.get(chat_id)


def start_write(services: Services, chat_id: int, kind: str, on: date) -> WriteRun:
    """Write the day or week now, in a thread; the run reports its progress and result."""
    engine = services.engine
    with Session(engine) as session:
        chat = conversation_chat(session, chat_id)
        todo = _plan(session, chat, kind, on)
        config = day_runs._connection(session, chat, services)
        max_output = read_settings(chat.settings).summary_max_tokens
    if not services.claims.day_summaries.claim(chat_id):
        raise UserError(
            "Summaries are being written for this chat right now (Backfill or the background run); "
            "try again once they are done."
        )
    run = WriteRun(kind, on, todo)
    services.summary_writes[chat_id] = run
    services.claims.day_summaries.start(
        chat_id, _work, services, chat_id, run, config, max_output, name=f"write-now-{chat_id}"
    )
    return run


def _name(run: WriteRun) -> str:
    return day_label(run.on) if run.kind == "days" else f"the week of {week_label(run.on)}"


def _work(services: Services, chat_id: int, run: WriteRun, config: ProviderConfig, max_output: int) -> None:
    try:
        _write(services, chat_id, run, config, max_output)
    except Exception:
        log.exception("Write now failed for %s %s of chat %s", run.kind, run.on, chat_id)
        run.failure = f"Could not write {_name(run)}: {INTERNAL}"
    finally:
        run.running, run.current = False, ""


def _write(services: Services, chat_id: int, run: WriteRun, config: ProviderConfig, max_output: int) -> None:
    engine = services.engine
    for day in run.todo:
        run.current = f"Summarising {day_label(day)}"
        with Session(engine) as session:
            chat = session.get(Chat, chat_id)
            parts = day_runs._day_parts(session, chat, day) if chat is not None else []
        if not parts:  # only empty messages: said as the background run says it
            day_runs._save(engine, chat_id, "day", day, answers.Failure("empty", day_runs.EMPTY_DAY))
            run.failure = f"Could not write {day_label(day)}: {day_runs.EMPTY_DAY}"
            return
        saved, failure = day_runs._summarise_day(engine, config, chat_id, day, parts, max_output)
        if failure is not None:
            waits = " The week waits for it." if run.kind == "weeks" else ""
            run.failure = f"Could not write {day_label(day)}: {failure.reason}{waits}"
            return
        run.days_written += saved
        run.already = run.already or (not saved and run.kind == "days")
    if run.kind == "days":
        return
    run.current = f"Consolidating the week of {week_label(run.on)}"
    with Session(engine) as session:
        rows = {r.day: r for r in day_rows(session, chat_id)}
    week_days = [(d, rows[d].summary, rows[d].key_details) for d in days.days_of_week(run.on, list(rows))]
    if not week_days:  # its day summaries were deleted meanwhile
        run.failure = f"Could not write {_name(run)}: none of its days has a summary any more."
        return
    messages = [
        {"role": "system", "content": CONVERSATION_WEEK_PROMPT},
        {"role": "user", "content": week_input(week_days)},
    ]
    saved, failure = day_runs._one(engine, config, chat_id, "week", run.on, messages, max_output)
    if failure is not None:
        run.failure = f"Could not write {_name(run)}: {failure.reason}"
        return
    run.week_written, run.already = saved, not saved
