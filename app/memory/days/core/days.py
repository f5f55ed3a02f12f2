"""Conversation chat days and weeks for the automatic summaries. Pure functions.

Decisions:
- A message's day is its local wall-clock time, in the user's timezone, minus the Day Rollover Hour
  (Marinara: logical time = ts - rolloverHour·3600s): with the default 4, a message at 03:59 belongs to
  the day before. Wall-clock arithmetic keeps that true across DST changes.
- "Today" follows the same rule, and today is never finished, so never summarised.
- Weeks start on Monday (Marinara keys a week by its Monday's date) and are finished once today is the
  next Monday or later. A finished week is ready to consolidate only when every day of it that has
  messages has a day summary: a failed day blocks its week instead of vanishing from it.
- A missing day is a finished day with messages, no day summary and no week summary covering it (an
  imported week summary already speaks for its days). Failed days are not remembered here: a day stays
  missing until a summary for it is saved. Backfill takes the newest first, 14 per run by default
  (the spec), never more than 60 (Marinara's clamp).
- The prompt (`conversation_plan`) carries the week summaries, then the day summaries of days whose
  week has none (the current week, or a past week whose consolidation has not happened yet), then, word
  for word, the messages of past days no summary speaks for (a failed day is never dropped), the Recent
  Message Tail (the newest messages of summarised days, 10 by default, 0..50 as in Marinara), and today.
- Timestamps without a zone are UTC (the database stores UTC).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DEFAULT_ROLLOVER_HOUR = 4
MAX_ROLLOVER_HOUR = 11  # the choices are 12 AM to 11 AM
BACKFILL_DAYS = 14
MAX_BACKFILL_DAYS = 60
MAX_TIMEZONE_CHARS = 64
DEFAULT_TAIL = 10
MAX_TAIL = 50


@dataclass(frozen=True)
class TimedMessage:
    id: int
    created_at: datetime


@dataclass(frozen=True)
class ChatDay:
    day: date
    message_ids: tuple[int, ...]


@dataclass(frozen=True)
class Missing:
    days: tuple[date, ...]  # this run's, newest first
    total: int  # all missing days, so the panel can say how many remain after this run


_OFFSET = re.compile(r"(?:UTC|GMT)?\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?", re.IGNORECASE)


def parse_timezone(text: str) -> tzinfo:
    """An IANA name ("Europe/Lisbon") or a UTC offset ("+03:00", "-0530", "UTC+3"); ValueError otherwise."""
    text = text.strip()
    if not text or len(text) > MAX_TIMEZONE_CHARS:
        raise ValueError("Choose a timezone, e.g. Europe/Lisbon or +03:00.")
    if text.upper() in ("UTC", "GMT", "Z"):
        return UTC
    m = _OFFSET.fullmatch(text)
    if m:
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours > 14 or minutes >= 60 or (hours == 14 and minutes):
            raise ValueError(f"{text} is not a UTC offset: offsets run from -14:00 to +14:00.")
        sign = -1 if m.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"Unknown timezone {text!r}: use a name like Europe/Lisbon or an offset like +03:00."
        ) from None


def check_rollover_hour(hour: int) -> int:
    if isinstance(hour, bool) or not isinstance(hour, int) or not 0 <= hour <= MAX_ROLLOVER_HOUR:
        raise ValueError("The Day Rollover Hour must be a whole hour from 12 AM (0) to 11 AM (11).")
    return hour


def chat_day(at: datetime, tz: tzinfo, rollover_hour: int = DEFAULT_ROLLOVER_HOUR) -> date:
    """The calendar day a moment belongs to for summaries."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    local = at.astimezone(tz).replace(tzinfo=None)  # wall clock, so DST days keep the rollover at 4:00
    return (local - timedelta(hours=rollover_hour)).date()


def group_days(
    messages: Iterable[TimedMessage], tz: tzinfo, rollover_hour: int = DEFAULT_ROLLOVER_HOUR
) -> list[ChatDay]:
    """The days that have messages, oldest first, each with its messages in time order."""
    by_day: dict[date, list[TimedMessage]] = {}
    for msg in messages:
        by_day.setdefault(chat_day(msg.created_at, tz, rollover_hour), []).append(msg)
    return [
        ChatDay(day, tuple(m.id for m in sorted(msgs, key=lambda m: (_utc(m.created_at), m.id))))
        for day, msgs in sorted(by_day.items())
    ]


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def finished_days(days: Iterable[date], today: date) -> list[date]:
    return sorted(d for d in set(days) if d < today)


def week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def week_finished(monday: date, today: date) -> bool:
    return today >= monday + timedelta(days=7)


def weeks_ready(
    days_with_messages: Iterable[date],
    summarised_days: Iterable[date],
    summarised_weeks: Iterable[date],
    today: date,
) -> list[date]:
    """Mondays of the finished weeks with no week summary whose every message day has a day summary,
    oldest first."""
    done_days, done_weeks = set(summarised_days), set(summarised_weeks)
    weeks: dict[date, list[date]] = {}
    for day in set(days_with_messages):
        weeks.setdefault(week_start(day), []).append(day)
    return sorted(
        monday
        for monday, days in weeks.items()
        if monday not in done_weeks and week_finished(monday, today) and all(d in done_days for d in days)
    )


def missing_days(
    days_with_messages: Iterable[date],
    summarised_days: Iterable[date],
    summarised_weeks: Iterable[date],
    today: date,
    *,
    limit: int = BACKFILL_DAYS,
) -> Missing:
    """The finished days that still need a day summary, newest first, at most `limit` of them."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BACKFILL_DAYS:
        raise ValueError(f"Backfill takes 1 to {MAX_BACKFILL_DAYS} days per run.")
    done_days, done_weeks = set(summarised_days), set(summarised_weeks)
    missing = sorted(
        (
            d
            for d in set(days_with_messages)
            if d < today and d not in done_days and week_start(d) not in done_weeks
        ),
        reverse=True,
    )
    return Missing(tuple(missing[:limit]), len(missing))


def days_of_week(monday: date, days: Sequence[date]) -> list[date]:
    """The given days that fall in the week starting `monday`, oldest first."""
    return sorted(d for d in days if week_start(d) == monday)


@dataclass(frozen=True)
class ConversationPlan:
    weeks: tuple[date, ...]  # Mondays whose week summary goes in, oldest first
    days: tuple[date, ...]  # days whose day summary goes in, oldest first
    verbatim_ids: tuple[int, ...]  # messages of past days no summary speaks for, in time order
    tail_ids: tuple[int, ...]  # the newest messages of summarised days, word for word
    today_ids: tuple[int, ...]


def conversation_plan(
    days: Sequence[ChatDay],
    summarised_days: Iterable[date],
    summarised_weeks: Iterable[date],
    today: date,
    *,
    tail: int = DEFAULT_TAIL,
) -> ConversationPlan:
    """What a Conversation prompt carries, from `group_days` output and the dates that have summaries."""
    if isinstance(tail, bool) or not isinstance(tail, int) or not 0 <= tail <= MAX_TAIL:
        raise ValueError(f"The Recent Message Tail must be a whole number from 0 to {MAX_TAIL}.")
    done_days, done_weeks = set(summarised_days), set(summarised_weeks)
    weeks: set[date] = set()
    day_summaries: list[date] = []
    verbatim: list[int] = []
    summarised_ids: list[int] = []
    today_ids: list[int] = []
    for entry in sorted(days, key=lambda d: d.day):
        day, monday = entry.day, week_start(entry.day)
        if day >= today:
            today_ids.extend(entry.message_ids)  # a clock set back can put messages "after" today
        elif monday in done_weeks:
            weeks.add(monday)
            summarised_ids.extend(entry.message_ids)
        elif day in done_days:
            day_summaries.append(day)
            summarised_ids.extend(entry.message_ids)
        else:
            verbatim.extend(entry.message_ids)
    tail_ids = tuple(summarised_ids[-tail:]) if tail else ()
    return ConversationPlan(
        tuple(sorted(weeks)), tuple(day_summaries), tuple(verbatim), tail_ids, tuple(today_ids)
    )


@dataclass(frozen=True)
class DayCount:
    """A day with messages the AI reads, and how many (the database counts them)."""

    day: date
    messages: int


@dataclass(frozen=True)
class SummaryPlan:
    """`conversation_plan` as the prompt source needs it, from counts rather than every message id."""

    weeks: tuple[date, ...]  # Mondays whose week summary goes in, oldest first
    days: tuple[date, ...]  # days whose day summary goes in, oldest first
    covered: frozenset[date]  # days whose messages leave the history (but for the tail)
    tail: tuple[tuple[date, int], ...]  # the days the Recent Message Tail comes from, newest first,
    # each with how many of its newest messages it keeps


def summary_plan(
    counts: Sequence[DayCount],
    summarised_days: Iterable[date],
    summarised_weeks: Iterable[date],
    today: date,
    *,
    tail: int = DEFAULT_TAIL,
) -> SummaryPlan:
    """The summaries that go in and the days they speak for, as `conversation_plan` decides them (the
    same weeks and days; `covered` holds the days of the messages it leaves out, `tail` the days of its
    tail_ids)."""
    if isinstance(tail, bool) or not isinstance(tail, int) or not 0 <= tail <= MAX_TAIL:
        raise ValueError(f"The Recent Message Tail must be a whole number from 0 to {MAX_TAIL}.")
    done_days, done_weeks = set(summarised_days), set(summarised_weeks)
    ordered = sorted(counts, key=lambda c: c.day)
    past = [c for c in ordered if c.day < today]
    weeks = tuple(sorted({week_start(c.day) for c in past if week_start(c.day) in done_weeks}))
    day_summaries = tuple(c.day for c in past if week_start(c.day) not in done_weeks and c.day in done_days)
    summarised = [c for c in past if week_start(c.day) in done_weeks or c.day in done_days]
    # As the source always read it: a day whose week summary goes in is covered even if it is today.
    speaking = set(day_summaries)
    covered = frozenset(c.day for c in ordered if c.day in speaking or week_start(c.day) in weeks)
    kept: list[tuple[date, int]] = []
    left = tail
    for c in reversed(summarised):
        if not left:
            break
        take = min(left, c.messages)
        kept.append((c.day, take))
        left -= take
    return SummaryPlan(weeks, day_summaries, covered, tuple(kept))


def kept_by_branch(
    days: Sequence[ChatDay],
    last_id: int | None,
    summarised_days: Iterable[date],
    summarised_weeks: Iterable[date],
) -> tuple[list[date], list[date]]:
    """The day and week summaries a branch holding the messages up to id `last_id` keeps, oldest first.

    A day is kept when none of its messages lies past the branch point (a summary of a day that goes on
    tells of messages the branch does not have); a day without messages, when it comes before the first
    day that has such a message. A week is kept when all seven of its days are. `None`: an empty branch."""
    if last_id is None:
        return [], []
    past = {d.day for d in days if any(i > last_id for i in d.message_ids)}
    first_past = min(past, default=None)
    with_messages = {d.day for d in days}

    def kept(day: date) -> bool:
        if day in past:
            return False
        return day in with_messages or first_past is None or day < first_past

    kept_days = sorted(d for d in set(summarised_days) if kept(d))
    kept_weeks = sorted(
        w for w in set(summarised_weeks) if all(kept(w + timedelta(days=n)) for n in range(7))
    )
    return kept_days, kept_weeks


@dataclass(frozen=True)
class WeekGroup:
    """One week of the Edit Summaries window: its days listed under it."""

    monday: date
    finished: bool
    days: tuple[date, ...]  # oldest first: the days with a summary and the finished days with messages


def edit_groups(
    days_with_messages: Iterable[date],
    summarised_days: Iterable[date],
    summarised_weeks: Iterable[date],
    today: date,
) -> list[WeekGroup]:
    """The weeks Edit Summaries shows, oldest first, each with its days: every day that has a summary
    (a week's summary never hides its days, which stay to check and fix one by one) and every finished
    day with messages (one without a summary can be written from there). Today is never listed unless
    it has a summary, nor a week with nothing else to show."""
    listed = {d for d in days_with_messages if d < today} | set(summarised_days)
    weeks: dict[date, list[date]] = {monday: [] for monday in summarised_weeks}
    for day in listed:
        weeks.setdefault(week_start(day), []).append(day)
    return [
        WeekGroup(monday, week_finished(monday, today), tuple(sorted(found)))
        for monday, found in sorted(weeks.items())
    ]
