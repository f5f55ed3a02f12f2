"""Reminders' times, pure: reading "YYYY-MM-DD HH:MM" in the user's zone, relative times, the next
slot of a recurring task, and the words people and the model read ("Fri 4 Dec, 09:00 (Europe/Lisbon)",
"late by 2 hours"). Times in and out are aware; `now` is always passed in."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MAX_PURPOSE_CHARS = 1_000
MAX_OPEN_PER_CHAT = 50  # a reminder storm (a model setting 1,000) stops here
MAX_INTERVAL_HOURS = 8_760  # a year
MAX_AHEAD = timedelta(days=3_660)  # ten years: a date past it is a typo, not a plan
# Fired this long after its due time, a reminder says it is late (the tick runs every 15 s).
LATE_AFTER = timedelta(minutes=2)
ZONE_NAME_CHARS = 64

_V1_MACRO = re.compile(r"<(?=(?:bot|char|user)>)", re.IGNORECASE)
_LOCAL = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})[ _T]+(\d{1,2}):(\d{2})\s*")


def check_time_zone(name: str) -> str:
    """An IANA time zone name as given ("Europe/Lisbon"), or ValueError with a sentence."""
    name = name.strip()
    if not name or len(name) > ZONE_NAME_CHARS:
        raise ValueError("A time zone is an IANA name such as Europe/Lisbon.")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"“{name}” is not a time zone Sugo knows; use an IANA name such as Europe/Lisbon."
        ) from None
    return name


def parse_local_time(text: str, zone: tzinfo) -> datetime:
    """ "2026-12-04 09:00" read in `zone`, as an aware UTC datetime; ValueError with a sentence."""
    match = _LOCAL.fullmatch(text or "")
    if not match:
        raise ValueError(f"“{text[:40]}” is not a time in the form YYYY-MM-DD HH:MM.")
    year, month, day, hour, minute = (int(g) for g in match.groups())
    try:
        local = datetime(year, month, day, hour, minute, tzinfo=zone)
    except ValueError:
        raise ValueError(f"“{text.strip()}” is not a real date and time.") from None
    return local.astimezone(UTC)


def relative_due(now: datetime, *, minutes: float = 0, hours: float = 0, days: float = 0) -> datetime:
    return now + timedelta(minutes=minutes, hours=hours, days=days)


def check_due(due: datetime, now: datetime) -> datetime:
    """`due` when it is ahead of `now` and within ten years; ValueError with a sentence otherwise."""
    if due <= now:
        raise ValueError("That time has already passed; choose a time in the future.")
    if due - now > MAX_AHEAD:
        raise ValueError("That time is more than ten years away; choose a nearer one.")
    return due


def next_slot(due: datetime, interval_hours: int, now: datetime) -> datetime:
    """The first slot after `now` on the cadence `due` + k × interval (k ≥ 1): slots missed meanwhile
    are skipped, never fired one after another."""
    step = timedelta(hours=interval_hours)
    slot = due + step
    if slot <= now:
        slot += step * ((now - slot) // step + 1)
    return slot


def format_due(due: datetime, now: datetime, zone: tzinfo, label: str) -> str:
    """ "Fri 4 Dec, 09:00 (Europe/Lisbon)", in `zone`; with the year when it is not `now`'s."""
    local, today = due.astimezone(zone), now.astimezone(zone)
    year = f" {local.year}" if local.year != today.year else ""
    return f"{local:%a} {local.day} {local:%b}{year}, {local:%H:%M} ({label})"


def duration_text(delta: timedelta) -> str:
    """ "2 hours", "1 day", "5 minutes": the largest whole unit."""
    seconds = max(int(delta.total_seconds()), 0)
    for size, unit in ((86_400, "day"), (3_600, "hour"), (60, "minute")):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return "less than a minute"


def interval_text(interval_hours: int | None) -> str:
    if not interval_hours:
        return "once"
    if interval_hours % 168 == 0:
        weeks = interval_hours // 168
        return "every week" if weeks == 1 else f"every {weeks} weeks"
    if interval_hours % 24 == 0:
        days = interval_hours // 24
        return "every day" if days == 1 else f"every {days} days"
    return "every hour" if interval_hours == 1 else f"every {interval_hours} hours"


def is_late(due: datetime, fired: datetime) -> bool:
    return fired - due > LATE_AFTER


def reminder_line(purpose: str, *, late_by: timedelta | None = None) -> str:
    """The system line a reminder's own turn carries. `{{user}}` is the prompt's macro; the purpose,
    written by the model, must never be read as a template: the caller neutralises it (`literal`)."""
    line = (
        "[System: A reminder you set earlier has come due. "
        f'Reminder: "{purpose}". Write to {{{{user}}}} about it now.]'
    )
    if late_by is not None:
        line += f" It is late by {duration_text(late_by)}: Sugo was not running at the due time."
    return line


def literal(text: str) -> str:
    """`text` with its macro openers broken by a zero-width joiner, so the prompt's macro pass leaves
    it as written (a model's "{{setvar::…}}" in a purpose must not run)."""
    return _V1_MACRO.sub("<\u2060", text.replace("{{", "{\u2060{"))
