"""Summary days as arithmetic (core/shifts.py) and the prompt's plan from day counts (days.summary_plan)
give what the message-by-message rules give: chat_day for every moment, including DST changes, zones
with half-hour and two-hour changes and every rollover hour; conversation_plan's weeks, days, covered
days and tail."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.days.core.days import (
    ChatDay,
    DayCount,
    chat_day,
    conversation_plan,
    summary_plan,
    week_start,
)
from app.memory.days.core.shifts import Shift, day_shifts, shifted

ZONES = [
    ZoneInfo("Europe/Lisbon"),
    ZoneInfo("America/New_York"),
    ZoneInfo("Australia/Lord_Howe"),  # half-hour DST
    ZoneInfo("Antarctica/Troll"),  # two-hour DST, changing at 01:00 UTC
    ZoneInfo("America/Sao_Paulo"),  # changed at midnight until 2019
    ZoneInfo("Asia/Kathmandu"),
    timezone(timedelta(hours=5, minutes=30)),
    timezone(timedelta(hours=-8)),
    UTC,
]
START = datetime(2016, 1, 1)
moments = st.integers(0, 4 * 365 * 86400 * 1_000_000).map(lambda us: START + timedelta(microseconds=us))


def _changes(tz) -> list[datetime]:
    """The zone's offset changes over the moments drawn, found the slow way: every quarter hour."""
    if tz.utcoffset(None) is not None:
        return []
    found, at, end = [], START, START + timedelta(days=4 * 365)

    def offset(moment: datetime) -> timedelta | None:
        return moment.replace(tzinfo=UTC).astimezone(tz).utcoffset()

    while at < end:
        if offset(at) != offset(at + timedelta(hours=1)):
            found += [
                at + timedelta(minutes=q)
                for q in (15, 30, 45, 60)
                if offset(at + timedelta(minutes=q - 15)) != offset(at + timedelta(minutes=q))
            ]
        at += timedelta(hours=1)
    return found


CHANGES = {str(tz): _changes(tz) for tz in ZONES}


def near(points: st.SearchStrategy[datetime]) -> st.SearchStrategy[datetime]:
    """Moments within three seconds of the given ones."""
    return st.tuples(points, st.integers(-3_000_000, 3_000_000)).map(
        lambda t: t[0] + timedelta(microseconds=t[1])
    )


# Days start at a quarter hour (UTC) in every zone drawn.
quarters = moments.map(lambda at: at.replace(minute=at.minute // 15 * 15, second=0, microsecond=0))


@settings(max_examples=300, deadline=None)
@given(
    tz=st.sampled_from(ZONES),
    rollover=st.integers(0, 11),
    data=st.data(),
)
def test_a_moment_shifted_by_its_stretch_falls_on_its_chat_day(tz, rollover, data):
    changes = CHANGES[str(tz)]
    edges = st.one_of(near(quarters), near(st.sampled_from(changes))) if changes else near(quarters)
    ats = data.draw(st.lists(st.one_of(moments, edges), min_size=1, max_size=40))
    found = day_shifts(tz, rollover, min(ats), max(ats))
    for at in ats:
        assert shifted(at, found).date() == chat_day(at, tz, rollover), at


def test_a_fixed_zone_is_one_stretch_and_a_changing_one_has_its_changes_to_the_second():
    assert day_shifts(timezone(timedelta(hours=2)), 4) == (Shift(None, -7200),)
    lisbon = day_shifts(ZoneInfo("Europe/Lisbon"), 0, datetime(2024, 1, 1), datetime(2024, 12, 31))
    assert lisbon == (
        Shift(None, 0),
        Shift(datetime(2024, 3, 31, 1, 0, 0), 3600),  # 01:00 UTC: clocks go from 01:00 to 02:00
        Shift(datetime(2024, 10, 27, 1, 0, 0), 0),
    )


day_entries = st.lists(
    st.tuples(st.integers(0, 60), st.integers(1, 7)), unique_by=lambda t: t[0], max_size=25
)


@settings(max_examples=400, deadline=None)
@given(
    entries=day_entries,
    done_days=st.sets(st.integers(0, 60), max_size=20),
    done_weeks=st.sets(st.integers(0, 10), max_size=4),
    today=st.integers(0, 62),
    tail=st.integers(0, 50),
)
def test_the_plan_from_day_counts_is_the_plan_from_every_message(entries, done_days, done_weeks, today, tail):
    first = date(2024, 1, 1)  # a Monday
    on = [first + timedelta(days=n) for n in range(70)]
    grouped, next_id = [], 1
    for n, count in sorted(entries):
        grouped.append(ChatDay(on[n], tuple(range(next_id, next_id + count))))
        next_id += count
    summarised_days = {on[n] for n in done_days}
    summarised_weeks = {week_start(first) + timedelta(weeks=w) for w in done_weeks}
    old = conversation_plan(grouped, summarised_days, summarised_weeks, on[today], tail=tail)
    new = summary_plan(
        [DayCount(d.day, len(d.message_ids)) for d in grouped],
        summarised_days,
        summarised_weeks,
        on[today],
        tail=tail,
    )
    assert (new.weeks, new.days) == (old.weeks, old.days)
    # The prompt source took out the messages of these days (tail aside).
    assert new.covered == {d.day for d in grouped if d.day in old.days or week_start(d.day) in old.weeks}
    ids = {d.day: d.message_ids for d in grouped}
    assert sorted(i for day, n in new.tail for i in ids[day][-n:]) == sorted(old.tail_ids)
