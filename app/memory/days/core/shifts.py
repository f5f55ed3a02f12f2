"""A message's summary day as arithmetic the database can do. Pure functions.

`days.chat_day` reads a moment's local wall-clock time minus the Day Rollover Hour. Between two changes
of the zone's UTC offset that is the UTC time plus one fixed number of seconds (the offset less the
rollover), so the day of every message is `date(utc + shift)` with the shift of the stretch the moment
falls in: the database groups a chat's messages by day with one `date(..., '+N seconds')` (SQLite) or
`created_at + make_interval(secs => N)` (PostgreSQL) and a CASE over the stretches
(app/memory/days/service.py), and fetches one row per day instead of one per message.

Decisions:
- A zone with one offset for all time (`tz.utcoffset(None)` answers: the server's local zone as
  `service.local_zone` reads it) is one stretch. Any other zone (a ZoneInfo) is probed from the first
  to the last moment asked about, a day at a time, and each change of offset is found to the second by
  bisection: offsets change at whole seconds and never twice within a day.
- Only whole seconds matter: every day starts at a whole second (offsets are whole seconds, the
  rollover a whole hour), so a moment's fraction of a second never moves it to another day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

PROBE = timedelta(days=1)


@dataclass(frozen=True)
class Shift:
    """From `since` on (a naive UTC moment; None: from the beginning of time), a moment's summary day is
    the date of its UTC time plus `seconds`."""

    since: datetime | None
    seconds: int


def day_shifts(
    tz: tzinfo, rollover_hour: int, first: datetime | None = None, last: datetime | None = None
) -> tuple[Shift, ...]:
    """The stretches covering `first` to `last` (naive UTC), oldest first; one for a fixed-offset zone,
    whatever the moments."""
    rollover = rollover_hour * 3600
    fixed = tz.utcoffset(None)
    if fixed is not None:
        return (Shift(None, _seconds(fixed) - rollover),)
    if first is None or last is None:
        raise ValueError("A zone whose offset changes needs the moments asked about.")
    shifts = [Shift(None, _offset(tz, first) - rollover)]
    at = first
    while at < last:
        step = min(at + PROBE, last)
        if _offset(tz, step) != _offset(tz, at):
            change = _change(tz, at, step)
            shifts.append(Shift(change, _offset(tz, change) - rollover))
        at = step
    return tuple(shifts)


def shifted(at: datetime, shifts: tuple[Shift, ...]) -> datetime:
    """The moment plus its stretch's shift (naive UTC in, naive out): its date is the summary day. What
    the database computes, in Python, for the tests."""
    seconds = next(s.seconds for s in reversed(shifts) if s.since is None or at >= s.since)
    return at.replace(microsecond=0) + timedelta(seconds=seconds)


def _seconds(offset: timedelta) -> int:
    return int(offset.total_seconds())


def _offset(tz: tzinfo, at: datetime) -> int:
    offset = at.replace(tzinfo=UTC).astimezone(tz).utcoffset()
    assert offset is not None
    return _seconds(offset)


def _change(tz: tzinfo, before: datetime, after: datetime) -> datetime:
    """The first whole second after `before` and up to `after` with `after`'s offset."""
    base = before.replace(microsecond=0)
    lo, hi = 0, int((after - base).total_seconds())
    if base + timedelta(seconds=hi) < after:
        hi += 1
    target = _offset(tz, after)
    # base + lo seconds has the old offset, base + hi seconds the new one
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset(tz, base + timedelta(seconds=mid)) == target:
            hi = mid
        else:
            lo = mid
    return base + timedelta(seconds=hi)
