"""Conversation chats' day and week summaries: where they are kept, which days a chat has, and the
edits of Chat Settings' Edit Summaries window and the JSON API. day_runs.py has the runs that write them.

Decisions:
- The day a message belongs to is read in the server's local timezone (the one Time Awareness tells
  the model), with the chat's Day Rollover Hour (days.py has the rules). The database computes it
  (core/shifts.py) and counts a chat's days on the (chat, kind, hidden, created_at) index: the pages and
  the prompt fetch one row per day, and only the messages they show (`chat_days`, every message grouped
  in Python, is left to branching).
- An edited summary is marked as the user's ("origin"); a save that changes nothing changes nothing (it
  stays the model's), as Marinara saves only what changed. A summary needs text; line breaks are kept as LF
  whatever the browser sent (CRLF), so a multi-line Key Detail (one form field each) saves back as it was.
- A deleted day goes back to Missing Summaries unless a week summary speaks for it (then only Write now,
  day_write.py, writes it again).
- Edit Summaries shows each week with its days under it (days.edit_groups): a week's summary never hides
  its days, which a user checks and fixes one by one.
- In a chat file (day_transfer.py says how) an imported summary is kept as it is: its date is taken, so no
  run summarises that day (or consolidates that week) again, and a week's days count as summarised.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, col, select

from app.chats.models import Chat, Message
from app.chats.service import get_chat
from app.chats.settings import read_settings
from app.memory.days.core import days, shifts
from app.memory.days.core import transfer as day_transfer
from app.memory.days.models import DayFailure, DaySummary, WeekSummary
from app.memory.summaries.core import answers
from app.memory.summaries.core.prompts import day_label, week_label
from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import as_utc, utcnow

MAX_SUMMARY_CHARS = 20_000
MAX_DETAILS = answers.MAX_KEY_DETAILS
FILE_LIMITS = day_transfer.Limits(
    days=day_transfer.MAX_FILE_DAYS,
    weeks=day_transfer.MAX_FILE_WEEKS,
    chars=MAX_SUMMARY_CHARS,
    details=MAX_DETAILS,
    detail_chars=answers.MAX_KEY_DETAIL_CHARS,
)
WEEK_SPAN = timedelta(days=6)  # a week's Monday to its Sunday, for the window's labels
ONLY_CONVERSATION = (
    "Day and week summaries are for Conversation chats; Roleplay chats use Chat Summary entries."
)


def local_zone() -> tzinfo:
    zone = datetime.now().astimezone().tzinfo
    assert zone is not None
    return zone


def conversation_chat(session: Session, chat_id: int) -> Chat:
    chat = get_chat(session, chat_id)
    if chat.mode != "conversation":
        raise UserError(ONLY_CONVERSATION)
    return chat


def _rollover(chat: Chat) -> int:
    return read_settings(chat.settings).summary_rollover_hour


def today_of(chat: Chat, now: datetime | None = None) -> date:
    return days.chat_day(now or utcnow(), local_zone(), _rollover(chat))


def chat_days(session: Session, chat: Chat) -> list[days.ChatDay]:
    """The chat's days with messages the AI reads (hidden ones are never summarised)."""
    rows = session.exec(
        select(Message.id, Message.created_at).where(
            Message.chat_id == chat.id,
            Message.kind == "message",
            Message.hidden == False,  # noqa: E712
        )
    ).all()
    timed = [days.TimedMessage(i, as_utc(at)) for i, at in rows]
    return days.group_days(timed, local_zone(), _rollover(chat))


# A chat's days, counted by the database: each message's summary day is computed in SQL
# (core/shifts.py says how), so a page or a prompt fetches one row per day, never one per message.
# SQLite stores a time as text and computes the day with date(); PostgreSQL stores a timestamp (UTC)
# and adds an interval: each spelling beside the other in _DAY, both answering an ISO date as text,
# so the statements around them and the Python reading them are the same on both.
_READ = "chat_id = :chat_id AND kind = 'message' AND hidden = false"
_SPAN_SQL = text(f"SELECT min(created_at), max(created_at) FROM message WHERE {_READ}")
_HAS_SUMMARIES_SQL = text(
    "SELECT EXISTS (SELECT 1 FROM summary_day WHERE chat_id = :chat_id)"
    " OR EXISTS (SELECT 1 FROM summary_week WHERE chat_id = :chat_id)"
)
_DAY = {  # a row's summary day given its shift (an SQL expression); the form the shift is bound in
    "sqlite": ("date(substr(created_at, 1, 19), {shift})", lambda seconds: f"{seconds:+d} seconds"),
    "postgresql": ("to_char(created_at + make_interval(secs => {shift}), 'YYYY-MM-DD')", int),
}
# A JSON list of ids or ISO dates, unpacked as rows of a subquery.
_IDS_IN = {
    "sqlite": "SELECT value FROM json_each(:ids)",
    "postgresql": "SELECT CAST(value AS bigint) FROM json_array_elements_text(CAST(:ids AS json))",
}
_DAYS_IN = {
    "sqlite": "SELECT value FROM json_each(:days)",
    "postgresql": "SELECT value FROM json_array_elements_text(CAST(:days AS json))",
}


def _stored_time(session: Session, at: datetime) -> datetime | str:
    """A naive UTC moment as the database compares it with created_at: SQLite's stored text, or the
    timestamp itself."""
    if session.connection().dialect.name == "sqlite":
        return at.strftime("%Y-%m-%d %H:%M:%S")
    return at


def _read_time(at: datetime | str) -> datetime:
    return at if isinstance(at, datetime) else datetime.fromisoformat(at)


def _day_sql(session: Session, chat: Chat, tz: tzinfo | None) -> tuple[str, dict, tuple[shifts.Shift, ...]]:
    """An SQL expression for a message row's summary day (an ISO date as text), its named parameters,
    and the stretches it was made from."""
    tz = tz or local_zone()
    first = last = None
    if tz.utcoffset(None) is None:  # a zone whose offset changes: the stretches of the chat's span
        low, high = session.connection().execute(_SPAN_SQL, {"chat_id": chat.id}).one()
        first, last = (_read_time(at) if at else utcnow() for at in (low, high))
    stretches = shifts.day_shifts(tz, _rollover(chat), first, last)
    expr, bound = _DAY[session.connection().dialect.name]
    params: dict = {f"shift{n}": bound(s.seconds) for n, s in enumerate(stretches)}
    if len(stretches) == 1:
        return expr.format(shift=":shift0"), params, stretches
    for n, s in enumerate(stretches[1:], start=1):  # before each change, the shift till then
        assert s.since is not None
        params[f"since{n}"] = _stored_time(session, s.since)
    whens = " ".join(f"WHEN created_at < :since{n} THEN :shift{n - 1}" for n in range(1, len(stretches)))
    return expr.format(shift=f"CASE {whens} ELSE :shift{len(stretches) - 1} END"), params, stretches


def _between(session: Session, stretches: Sequence[shifts.Shift], first: date, last: date) -> dict:
    """UTC bounds (as stored) holding every moment whose summary day lies from `first` to `last`: a
    range the (chat, kind, hidden, created_at) index reads instead of the whole chat."""
    seconds = [s.seconds for s in stretches]
    low = datetime.combine(first, datetime.min.time()) - timedelta(seconds=max(seconds))
    high = datetime.combine(last, datetime.min.time()) + timedelta(days=1, seconds=1 - min(seconds))
    return {"low": _stored_time(session, low), "high": _stored_time(session, high)}


def has_summaries(session: Session, chat_id: int) -> bool:
    """Whether the chat has a day or week summary: one index seek each, in plain SQL, as the prompt
    source asks it on every turn of every Conversation chat."""
    return bool(session.connection().execute(_HAS_SUMMARIES_SQL, {"chat_id": chat_id}).scalar_one())


def message_days(session: Session, chat: Chat, *, tz: tzinfo | None = None) -> list[days.DayCount]:
    """The chat's days with messages the AI reads (hidden ones are never summarised), oldest first, with
    how many: the days `chat_days` groups, counted by the database on the index."""
    day, params, _ = _day_sql(session, chat, tz)
    sql = text(f"SELECT {day} AS day, count(*) FROM message WHERE {_READ} GROUP BY day ORDER BY day")
    rows = session.connection().execute(sql, {**params, "chat_id": chat.id}).all()
    return [days.DayCount(date.fromisoformat(d), n) for d, n in rows]


def day_message_ids(session: Session, chat: Chat, day: date, *, tz: tzinfo | None = None) -> list[int]:
    """The ids of one day's messages the AI reads, in time order (`chat_days`' order)."""
    expr, params, stretches = _day_sql(session, chat, tz)
    sql = text(
        f"SELECT id FROM message WHERE {_READ} AND created_at >= :low AND created_at < :high AND {expr} = :day"
        " ORDER BY created_at, id"
    )
    bounds = _between(session, stretches, day, day)
    params = {**params, **bounds, "chat_id": chat.id, "day": day.isoformat()}
    return [i for (i,) in session.connection().execute(sql, params).all()]


def newest_ids(
    session: Session, chat: Chat, taken: Sequence[tuple[date, int]], *, tz: tzinfo | None = None
) -> list[int]:
    """The ids of the newest messages of the given days (newest first, each with how many), as
    `summary_plan` gives the Recent Message Tail: read from those days' stretch of the index."""
    if not taken:
        return []
    expr, params, stretches = _day_sql(session, chat, tz)
    sql = text(
        f"SELECT id FROM (SELECT id, created_at, {expr} AS day FROM message"
        f" WHERE {_READ} AND created_at >= :low AND created_at < :high) AS shifted"
        f" WHERE day IN ({_DAYS_IN[session.connection().dialect.name]})"
        " ORDER BY day DESC, created_at DESC, id DESC LIMIT :limit"
    )
    bounds = _between(session, stretches, min(d for d, _ in taken), max(d for d, _ in taken))
    wanted = json.dumps([d.isoformat() for d, _ in taken])
    limit = sum(n for _, n in taken)
    params = {**params, **bounds, "chat_id": chat.id, "days": wanted, "limit": limit}
    return [i for (i,) in session.connection().execute(sql, params).all()]


def days_of(session: Session, chat: Chat, ids: Sequence[int], *, tz: tzinfo | None = None) -> dict[int, date]:
    """The summary day of each of the given messages the AI reads (a prompt's window)."""
    if not ids:
        return {}
    expr, params, _ = _day_sql(session, chat, tz)
    ids_in = _IDS_IN[session.connection().dialect.name]
    sql = text(f"SELECT id, {expr} FROM message WHERE {_READ} AND id IN ({ids_in})")
    params = {**params, "chat_id": chat.id, "ids": json.dumps(list(ids))}
    return {i: date.fromisoformat(d) for i, d in session.connection().execute(sql, params).all()}


def day_rows(session: Session, chat_id: int) -> list[DaySummary]:
    return list(
        session.exec(select(DaySummary).where(DaySummary.chat_id == chat_id).order_by(col(DaySummary.day)))
    )


def week_rows(session: Session, chat_id: int) -> list[WeekSummary]:
    return list(
        session.exec(
            select(WeekSummary).where(WeekSummary.chat_id == chat_id).order_by(col(WeekSummary.week))
        )
    )


def failures(session: Session, chat_id: int) -> list[DayFailure]:
    return list(
        session.exec(select(DayFailure).where(DayFailure.chat_id == chat_id).order_by(col(DayFailure.day)))
    )


def list_days(session: Session, chat_id: int) -> list[DaySummary]:
    conversation_chat(session, chat_id)
    return day_rows(session, chat_id)


def list_weeks(session: Session, chat_id: int) -> list[WeekSummary]:
    conversation_chat(session, chat_id)
    return week_rows(session, chat_id)


def _newlines(text: str) -> str:
    # A browser sends a textarea's line breaks as CRLF: stored as they were written, a summary or a
    # key detail saved unchanged comes back byte for byte.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _summary_text(summary: str | None) -> str | None:
    if summary is None:
        return None
    summary = _newlines(summary).strip()
    if not summary:
        raise UserError("A summary needs some text; delete it instead to have the day summarised again.")
    if len(summary) > MAX_SUMMARY_CHARS:
        raise UserError(f"A summary can be at most {MAX_SUMMARY_CHARS:,} characters.")
    return summary


def _details(details: Sequence[str] | None) -> list[str] | None:
    if details is None:
        return None
    kept = [_newlines(d).strip() for d in details if d.strip()]  # a detail may run over several lines
    if len(kept) > MAX_DETAILS:
        raise UserError(f"At most {MAX_DETAILS} key details per summary.")
    if any(len(d) > answers.MAX_KEY_DETAIL_CHARS for d in kept):
        raise UserError(f"A key detail can be at most {answers.MAX_KEY_DETAIL_CHARS} characters.")
    return kept


def _edit(row: DaySummary | WeekSummary, summary: str | None, key_details: Sequence[str] | None) -> bool:
    """Apply an edit; False (and the row untouched, still the model's) when it changes nothing, as
    Marinara saves only what changed."""
    text, details = _summary_text(summary), _details(key_details)
    changed = (text is not None and text != row.summary) or (
        details is not None and details != list(row.key_details)
    )
    if not changed:
        return False
    if text is not None:
        row.summary = text
    if details is not None:
        row.key_details = details
    row.origin, row.updated_at = "user", utcnow()
    return True


def _day_row(session: Session, chat_id: int, day: date) -> DaySummary:
    row = session.exec(select(DaySummary).where(DaySummary.chat_id == chat_id, DaySummary.day == day)).first()
    if row is None:
        raise NotFound(f"There is no summary for {day_label(day)}.")
    return row


def _week_row(session: Session, chat_id: int, monday: date) -> WeekSummary:
    row = session.exec(
        select(WeekSummary).where(WeekSummary.chat_id == chat_id, WeekSummary.week == monday)
    ).first()
    if row is None:
        raise NotFound(f"There is no summary for the week of {week_label(monday)}.")
    return row


def _update(
    session: Session, row: DaySummary | WeekSummary, summary: str | None, key_details: Sequence[str] | None
) -> bool:
    changed = _edit(row, summary, key_details)
    if changed:
        session.add(row)
        session.flush()
    return changed


def update_day(
    session: Session,
    chat_id: int,
    day: date,
    *,
    summary: str | None = None,
    key_details: Sequence[str] | None = None,
) -> DaySummary:
    conversation_chat(session, chat_id)
    row = _day_row(session, chat_id, day)
    _update(session, row, summary, key_details)
    return row


def update_week(
    session: Session,
    chat_id: int,
    monday: date,
    *,
    summary: str | None = None,
    key_details: Sequence[str] | None = None,
) -> WeekSummary:
    conversation_chat(session, chat_id)
    row = _week_row(session, chat_id, monday)
    _update(session, row, summary, key_details)
    return row


def delete_day(session: Session, chat_id: int, day: date) -> None:
    """The day goes back to Missing Summaries (and is summarised again by the next run), unless a week
    summary speaks for it: then only Write now writes it again."""
    conversation_chat(session, chat_id)
    session.delete(_day_row(session, chat_id, day))
    session.flush()


def delete_week(session: Session, chat_id: int, monday: date) -> None:
    """Its days' summaries stay; the week is consolidated again by the next run, or by Write now."""
    conversation_chat(session, chat_id)
    session.delete(_week_row(session, chat_id, monday))
    session.flush()


@dataclass(frozen=True)
class Overview:
    """What the Missing Summaries panel says."""

    missing: int
    failures: list[DayFailure]
    has_summaries: bool


def overview(session: Session, chat: Chat) -> Overview:
    assert chat.id is not None
    done_days = {r.day for r in day_rows(session, chat.id)}
    done_weeks = {r.week for r in week_rows(session, chat.id)}
    found = days.missing_days(
        [d.day for d in message_days(session, chat)], done_days, done_weeks, today_of(chat)
    )
    return Overview(found.total, failures(session, chat.id), bool(done_days or done_weeks))


# Chat Settings ------------------------------------------------------------------------------------------

KINDS = ("days", "weeks")


def item_key(kind: str, on: date) -> str:
    """The form-field suffix of one item of the Edit Summaries window (the window sits in the settings form)."""
    if kind not in KINDS:
        raise NotFound("There is no such summary.")
    return f"{kind[:-1]}-{on.isoformat()}"


def save_item(
    session: Session, chat_id: int, kind: str, on: date, *, summary: str, key_details: Sequence[str]
) -> bool:
    """Save one item of the window; False when nothing changed (the item stays as it was)."""
    item_key(kind, on)
    conversation_chat(session, chat_id)
    row = _day_row(session, chat_id, on) if kind == "days" else _week_row(session, chat_id, on)
    return _update(session, row, summary, key_details)


def delete_item(session: Session, chat_id: int, kind: str, on: date) -> None:
    item_key(kind, on)
    (delete_day if kind == "days" else delete_week)(session, chat_id, on)


@dataclass(frozen=True)
class DayItem:
    day: date
    row: DaySummary | None  # None: a finished day with messages and no summary yet
    failure: DayFailure | None  # why the last try to write it failed


@dataclass(frozen=True)
class WeekItem:
    monday: date
    finished: bool
    row: WeekSummary | None
    failure: DayFailure | None
    days: list[DayItem]


def week_items(session: Session, chat: Chat, *, only: date | None = None) -> list[WeekItem]:
    """The Edit Summaries window's weeks (days.edit_groups), each with its rows and failures; `only`: the
    week starting that Monday alone (an answer that redraws one week)."""
    assert chat.id is not None
    dayrows = {r.day: r for r in day_rows(session, chat.id)}
    weekrows = {r.week: r for r in week_rows(session, chat.id)}
    failed = {(f.kind, f.day): f for f in failures(session, chat.id)}
    groups = days.edit_groups([d.day for d in message_days(session, chat)], dayrows, weekrows, today_of(chat))
    return [
        WeekItem(
            g.monday,
            g.finished,
            weekrows.get(g.monday),
            failed.get(("week", g.monday)),
            [DayItem(d, dayrows.get(d), failed.get(("day", d))) for d in g.days],
        )
        for g in groups
        if only is None or g.monday == only
    ]


def edit_context(session: Session, chat_id: int) -> dict:
    """The Edit Summaries window: every week with its days under it."""
    return {"weeks": week_items(session, conversation_chat(session, chat_id)), "week_span": WEEK_SPAN}


# Chat files ---------------------------------------------------------------------------------------------


def _file_summary(row: DaySummary | WeekSummary) -> day_transfer.FileSummary:
    on = row.day if isinstance(row, DaySummary) else row.week
    return day_transfer.FileSummary(on, row.summary, tuple(row.key_details), row.origin)


def file_metadata(session: Session, chat: Chat) -> dict[str, Any]:
    """The chat_metadata keys an exported chat file carries: the day and week summaries and the Day
    Rollover Hour, and a Conversation chat's Recent Message Tail."""
    assert chat.id is not None
    settings = read_settings(chat.settings)
    meta: dict[str, Any] = {
        day_transfer.DAYS_KEY: day_transfer.write_summaries(
            [_file_summary(r) for r in day_rows(session, chat.id)]
        ),
        day_transfer.WEEKS_KEY: day_transfer.write_summaries(
            [_file_summary(r) for r in week_rows(session, chat.id)]
        ),
        day_transfer.ROLLOVER_KEY: settings.summary_rollover_hour,
    }
    if chat.mode == "conversation":
        meta[day_transfer.TAIL_KEY] = min(settings.summary_recent_tail, days.MAX_TAIL)
    return meta


def import_file_summaries(
    session: Session, chat: Chat, meta: Mapping[str, Any], *, read_tail: bool
) -> list[str]:
    """Give an imported Conversation chat the file's Day Rollover Hour (first: it decides which day is
    today), Recent Message Tail (when `read_tail`) and day and week summaries; what was left out, as
    notes. A bad summary never fails the import."""
    assert chat.id is not None
    hour, notes = day_transfer.read_rollover_hour(meta)
    tail, tail_notes = day_transfer.read_tail(meta) if read_tail else (None, [])
    values = {"summary_rollover_hour": hour, "summary_recent_tail": tail}
    chat.settings = {**(chat.settings or {}), **{k: v for k, v in values.items() if v is not None}}
    session.add(chat)
    found = day_transfer.read_summaries(meta, today=today_of(chat), limits=FILE_LIMITS)
    for s in found.days:
        session.add(
            DaySummary(
                chat_id=chat.id, day=s.on, summary=s.summary, key_details=list(s.key_details), origin=s.origin
            )
        )
    for s in found.weeks:
        session.add(
            WeekSummary(
                chat_id=chat.id,
                week=s.on,
                summary=s.summary,
                key_details=list(s.key_details),
                origin=s.origin,
            )
        )
    session.flush()
    return [*notes, *tail_notes, *found.notes]


def copy_to_branch(session: Session, source: Chat, branch: Chat) -> None:
    """Copy the summaries of the days that end before the branch point, and of the weeks all of whose
    days do (days.kept_by_branch): the branch holds copies of the source's first messages, by id."""
    assert source.id is not None
    ids = session.exec(select(Message.id).where(Message.chat_id == source.id).order_by(col(Message.id))).all()
    copied = len(session.exec(select(Message.id).where(Message.chat_id == branch.id)).all())
    dayrows, weekrows = day_rows(session, source.id), week_rows(session, source.id)
    kept_days, kept_weeks = days.kept_by_branch(
        chat_days(session, source),
        ids[copied - 1] if copied else None,
        [r.day for r in dayrows],
        [r.week for r in weekrows],
    )
    for r in dayrows:
        if r.day in kept_days:
            session.add(DaySummary(**r.model_dump(exclude={"id", "chat_id"}), chat_id=branch.id))
    for w in weekrows:
        if w.week in kept_weeks:
            session.add(WeekSummary(**w.model_dump(exclude={"id", "chat_id"}), chat_id=branch.id))
    session.flush()
