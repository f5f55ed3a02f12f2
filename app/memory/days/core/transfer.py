"""Conversation day and week summaries in a chat file: Marinara's `daySummaries` and `weekSummaries`
(`Record<"DD.MM.YYYY", {summary, keyDetails[]}>`, a week keyed by its Monday), `dayRolloverHour` and
`summaryTailMessages` in the header's chat_metadata, written and read back. Pure functions.

Decisions:
- Keys are written `DD.MM.YYYY`, zero-padded; reading also takes unpadded day and month ("3.1.2025").
  Two keys naming the same date keep the first.
- A summary edited by hand is written with `origin: "manual"` (Sugo's own key, which Marinara ignores)
  and comes back as the user's; every other one reads as the model's.
- Reading never fails the import. Left out, each with a note: a key that is not a date, a week key that
  is not a Monday, a day (or week) not finished by `today` (today is never summarised, and a summary
  there would stop the day's later messages from ever being summarised), a value that is not an object,
  a summary with no text or over the limit, key details that are not a list. Key details that are not
  text, too long, or past the limit are dropped from a summary that is kept, with one note for it.
- Past the limit of days (or weeks) the newest are kept, as the prompt carries the newest: one note.
  Past 20 notes on one kind, the rest are counted in one.
- A rollover hour outside 0..11 (Marinara's clamp) or a tail outside 0..50 is left out with a note.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from app.memory.days.core.days import MAX_ROLLOVER_HOUR, MAX_TAIL, week_finished

DAYS_KEY = "daySummaries"
WEEKS_KEY = "weekSummaries"
ROLLOVER_KEY = "dayRolloverHour"
TAIL_KEY = "summaryTailMessages"
MAX_FILE_DAYS = 3_660  # ten years of days
MAX_FILE_WEEKS = 530  # and of weeks
MAX_NOTES = 20  # per kind
_KEY = re.compile(r"(\d{1,2})\.(\d{1,2})\.(\d{4})")


@dataclass(frozen=True)
class FileSummary:
    """A day summary (`on` is the day) or a week summary (`on` is its Monday) as a chat file carries it."""

    on: date
    summary: str
    key_details: tuple[str, ...] = ()
    origin: str = "model"


@dataclass(frozen=True)
class Limits:
    days: int
    weeks: int
    chars: int  # a summary's text
    details: int  # key details per summary
    detail_chars: int


@dataclass(frozen=True)
class FileSummaries:
    days: tuple[FileSummary, ...]  # oldest first
    weeks: tuple[FileSummary, ...]
    notes: tuple[str, ...]


def date_key(on: date) -> str:
    return f"{on.day:02d}.{on.month:02d}.{on.year:04d}"


def parse_key(key: Any) -> date | None:
    """The date a `DD.MM.YYYY` key names, or None."""
    m = _KEY.fullmatch(key.strip()) if isinstance(key, str) else None
    if m is None:
        return None
    try:
        return date(int(m.group(3)), int(m.group(2)), int(m.group(1)))
    except ValueError:  # 31.02.2025
        return None


def write_summaries(items: Sequence[FileSummary]) -> dict[str, dict[str, Any]]:
    """Day or week summaries in Marinara's shape, oldest first."""
    out: dict[str, dict[str, Any]] = {}
    for s in sorted(items, key=lambda s: s.on):
        value: dict[str, Any] = {"summary": s.summary, "keyDetails": list(s.key_details)}
        if s.origin == "user":
            value["origin"] = "manual"
        out[date_key(s.on)] = value
    return out


def _details(raw: Any, limits: Limits) -> tuple[tuple[str, ...], int] | None:
    """The usable key details and how many were dropped; None when they are not a list."""
    if raw is None:
        return (), 0
    if not isinstance(raw, list):
        return None
    kept = [
        d.strip() for d in raw if isinstance(d, str) and d.strip() and len(d.strip()) <= limits.detail_chars
    ]
    blank = sum(1 for d in raw if isinstance(d, str) and not d.strip())  # blank lines are no loss
    dropped = len(raw) - blank - len(kept[: limits.details])
    return tuple(kept[: limits.details]), dropped


def _where(key: Any, week: bool) -> str:
    return f"{'Week' if week else 'Day'} summary “{str(key)[:40]}” in the file"


def _read_one(
    key: Any, raw: Any, *, week: bool, today: date, limits: Limits
) -> tuple[FileSummary, int] | str:
    """The summary and how many of its key details were dropped, or why it was left out."""
    where = _where(key, week)
    on = parse_key(key)
    if on is None:
        return f"{where} is not keyed by a date (DD.MM.YYYY) and was left out."
    if week and on.weekday() != 0:
        return f"{where} does not start on a Monday and was left out."
    if (week and not week_finished(on, today)) or (not week and on >= today):
        return f"{where} is for a {'week' if week else 'day'} not finished yet and was left out."
    if not isinstance(raw, Mapping):
        return f"{where} is not a summary and was left out."
    text = raw.get("summary")
    if not isinstance(text, str) or not text.strip():
        return f"{where} has no text and was left out."
    if len(text.strip()) > limits.chars:
        return f"{where} is longer than {limits.chars:,} characters and was left out."
    details = _details(raw.get("keyDetails"), limits)
    if details is None:
        return f"{where} has key details that are not a list and was left out."
    origin = "user" if raw.get("origin") == "manual" else "model"
    return FileSummary(on, text.strip(), details[0], origin), details[1]


def _read_all(
    meta: Mapping[str, Any], *, week: bool, today: date, limits: Limits
) -> tuple[list[FileSummary], list[str]]:
    name, key = ("week", WEEKS_KEY) if week else ("day", DAYS_KEY)
    raw = meta.get(key)
    if raw is None:
        return [], []
    if not isinstance(raw, Mapping):
        return [], [f"The file's {name} summaries are not keyed by date and were left out."]
    found: dict[date, FileSummary] = {}
    notes: list[str] = []
    for k, value in raw.items():
        read = _read_one(k, value, week=week, today=today, limits=limits)
        if isinstance(read, str):
            notes.append(read)
            continue
        summary, dropped = read
        if summary.on in found:
            notes.append(f"{_where(k, week)} names a date already read and was left out.")
        else:
            found[summary.on] = summary
            if dropped:
                notes.append(
                    f"{_where(k, week)}: {dropped} key details left out "
                    f"(a summary keeps at most {limits.details}, each of at most "
                    f"{limits.detail_chars:,} characters of text)."
                )
    kept = sorted(found.values(), key=lambda s: s.on)
    cap = limits.weeks if week else limits.days
    if len(kept) > cap:
        notes.append(
            f"Only {cap:,} {name} summaries fit a chat; the file's {len(kept) - cap:,} oldest were left out."
        )
        kept = kept[-cap:]
    if len(notes) > MAX_NOTES:  # a file of junk keys must not bury the import's other notes
        notes = [
            *notes[:MAX_NOTES],
            f"…and {len(notes) - MAX_NOTES:,} more notes like these on the file's {name} summaries.",
        ]
    return kept, notes


def read_summaries(meta: Mapping[str, Any], *, today: date, limits: Limits) -> FileSummaries:
    """The usable day and week summaries of a file's chat_metadata, and notes on those left out.
    `today` is the chat's day now. Never raises."""
    days, day_notes = _read_all(meta, week=False, today=today, limits=limits)
    weeks, week_notes = _read_all(meta, week=True, today=today, limits=limits)
    return FileSummaries(tuple(days), tuple(weeks), tuple(day_notes + week_notes))


def has_summaries(meta: Mapping[str, Any]) -> bool:
    """The file carries day or week summaries (a Roleplay chat leaves them out, said so)."""
    return bool(meta.get(DAYS_KEY)) or bool(meta.get(WEEKS_KEY))


def _whole(value: Any, low: int, high: int) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    return value if ok else None


def read_rollover_hour(meta: Mapping[str, Any]) -> tuple[int | None, list[str]]:
    """The file's Day Rollover Hour, when it has a usable one, and a note when it has another."""
    raw = meta.get(ROLLOVER_KEY)
    if raw is None:
        return None, []
    hour = _whole(raw, 0, MAX_ROLLOVER_HOUR)
    if hour is None:
        return None, [
            f"The file's Day Rollover Hour ({str(raw)[:20]}) is not a whole hour from 0 to "
            f"{MAX_ROLLOVER_HOUR}; the chat keeps the default."
        ]
    return hour, []


def read_tail(meta: Mapping[str, Any]) -> tuple[int | None, list[str]]:
    """The file's Recent Message Tail, when it has a usable one, and a note when it has another."""
    raw = meta.get(TAIL_KEY)
    if raw is None:
        return None, []
    tail = _whole(raw, 0, MAX_TAIL)
    if tail is None:
        return None, [
            f"The file's Recent Message Tail ({str(raw)[:20]}) is not a whole number from 0 to "
            f"{MAX_TAIL}; the chat keeps the default."
        ]
    return tail, []
