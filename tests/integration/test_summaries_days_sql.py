"""A Conversation chat's days as the database counts them (issue 23) are the days `group_days` makes of
every message: the same days, counts and messages in the same order, the same Recent Message Tail and
the same day for each message of a window; for timestamps around DST changes and every rollover hour,
with hidden messages and refresh marks left out, on a real SQLite database and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session

from app.chats.models import Chat, Message
from app.memory.days import service
from app.memory.days.core.days import TimedMessage, conversation_plan, group_days, summary_plan

ZONES = [
    ZoneInfo("Europe/Lisbon"),
    ZoneInfo("America/New_York"),
    ZoneInfo("Australia/Lord_Howe"),
    timezone(
        timedelta(hours=5, minutes=30)
    ),  # one offset for all time: the one-stretch SQL (the server's zone)
]
# Around the changes of 2024 in the zones drawn (March, April, October, November).
STARTS = [datetime(2024, 3, 9), datetime(2024, 3, 30), datetime(2024, 4, 6), datetime(2024, 10, 5)]


@pytest.fixture
def engine(database):
    return database  # each test once on SQLite, once on PostgreSQL (tests/conftest.py)


# A moment past the start: day, hour and minute drawn apart (so moments spread over the days), and now and
# then right on the hour or a breath before it, where days start and offsets change.
moment = st.builds(
    lambda day, hour, minute, micros: timedelta(days=day, hours=hour, minutes=minute, microseconds=micros),
    st.integers(0, 29),
    st.integers(0, 23),
    st.sampled_from([0, 0, 15, 30, 45, 59]),
    st.sampled_from([0, 59_999_999, 59_999_900]) | st.integers(0, 59_999_999),
)
message = st.tuples(
    moment,
    st.sampled_from(["message"] * 8 + ["refresh"]),
    st.sampled_from([False] * 5 + [True]),  # hidden
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tz=st.sampled_from(ZONES),
    start=st.sampled_from(STARTS),
    rollover=st.integers(0, 11),
    rows=st.lists(message, min_size=30, max_size=80),
    summarised=st.sets(st.integers(0, 30), max_size=10),
    tail=st.integers(0, 12),
    today=st.integers(0, 32),
)
def test_the_days_counted_in_sql_are_the_days_of_every_message(
    engine, tz, start, rollover, rows, summarised, tail, today
):
    with Session(engine) as s:
        chat = Chat(name="c", mode="conversation", settings={"summary_rollover_hour": rollover})
        s.add(chat)
        s.flush()
        timed = []
        for past, kind, hidden in rows:
            at = (start + past).replace(tzinfo=UTC)
            m = Message(chat_id=chat.id, kind=kind, hidden=hidden, content="x", created_at=at)
            s.add(m)
            s.flush()
            if kind == "message" and not hidden:
                timed.append(TimedMessage(m.id, at))
        grouped = group_days(timed, tz, rollover)

        counted = service.message_days(s, chat, tz=tz)
        assert [(c.day, c.messages) for c in counted] == [(d.day, len(d.message_ids)) for d in grouped]
        for d in grouped:
            assert service.day_message_ids(s, chat, d.day, tz=tz) == list(d.message_ids)
        day_of = {i: d.day for d in grouped for i in d.message_ids}
        assert service.days_of(s, chat, list(day_of), tz=tz) == day_of

        days = [start.date() + timedelta(days=n) for n in range(33)]
        done = {days[n] for n in summarised}
        old = conversation_plan(grouped, done, set(), days[today], tail=tail)
        new = summary_plan(counted, done, set(), days[today], tail=tail)
        assert sorted(service.newest_ids(s, chat, new.tail, tz=tz)) == sorted(old.tail_ids)
        s.rollback()


LISBON = ZoneInfo("Europe/Lisbon")  # 2024: UTC+0 until 31 March 01:00 UTC, UTC+1 until 27 October 01:00 UTC
EDGES = [  # UTC moments a breath either side of days' starts and of offset changes
    datetime(2024, 3, 30, 3, 59, 59, 999_900),
    datetime(2024, 3, 30, 4, 0, 0),
    datetime(2024, 3, 30, 23, 59, 59, 999_900),
    datetime(2024, 3, 31, 0, 59, 59, 999_999),
    datetime(2024, 3, 31, 1, 0, 0),
    datetime(2024, 3, 31, 2, 59, 59, 999_999),
    datetime(2024, 3, 31, 3, 0, 0),
    datetime(2024, 10, 26, 22, 59, 59, 999_900),
    datetime(2024, 10, 26, 23, 30),
    datetime(2024, 10, 27, 0, 30),
    datetime(2024, 10, 27, 1, 30),
    datetime(2024, 10, 27, 3, 59, 59, 999_999),
    datetime(2024, 10, 27, 4, 0, 0),
]


UTC_MINUS_4 = timezone(timedelta(hours=-4))  # one offset for all time: its days start at 04:00 UTC too


@pytest.mark.parametrize("tz", [LISBON, UTC_MINUS_4], ids=["lisbon", "utc-4"])
@pytest.mark.parametrize("rollover", [0, 1, 2, 4, 11])
def test_moments_at_the_edges_fall_on_their_chat_day(engine, rollover, tz):
    with Session(engine) as s:
        chat = Chat(name="c", mode="conversation", settings={"summary_rollover_hour": rollover})
        s.add(chat)
        s.flush()
        timed = []
        for at in EDGES:
            m = Message(chat_id=chat.id, content="x", created_at=at.replace(tzinfo=UTC))
            s.add(m)
            s.flush()
            timed.append(TimedMessage(m.id, at.replace(tzinfo=UTC)))
        grouped = group_days(timed, tz, rollover)
        expected = {i: d.day for d in grouped for i in d.message_ids}
        assert service.days_of(s, chat, list(expected), tz=tz) == expected
        counted = service.message_days(s, chat, tz=tz)
        assert [(c.day, c.messages) for c in counted] == [(d.day, len(d.message_ids)) for d in grouped]
        for d in grouped:
            assert service.day_message_ids(s, chat, d.day, tz=tz) == list(d.message_ids)
        s.rollback()
