from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from app.memory.days.core.days import (
    ChatDay,
    ConversationPlan,
    Missing,
    TimedMessage,
    chat_day,
    check_rollover_hour,
    conversation_plan,
    days_of_week,
    finished_days,
    group_days,
    missing_days,
    parse_timezone,
    week_finished,
    week_start,
    weeks_ready,
)

LISBON = parse_timezone("Europe/Lisbon")


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def test_messages_before_the_rollover_hour_belong_to_the_previous_day():
    assert chat_day(utc(2026, 3, 10, 3, 59), UTC) == date(2026, 3, 9)
    assert chat_day(utc(2026, 3, 10, 4, 0), UTC) == date(2026, 3, 10)
    assert chat_day(utc(2026, 3, 10, 0, 30), UTC, rollover_hour=0) == date(2026, 3, 10)
    assert chat_day(utc(2026, 3, 10, 10, 59), UTC, rollover_hour=11) == date(2026, 3, 9)


def test_the_day_follows_the_users_timezone():
    sao_paulo = parse_timezone("America/Sao_Paulo")  # UTC-3
    assert chat_day(utc(2026, 3, 10, 5, 0), sao_paulo) == date(2026, 3, 9)  # 02:00 there
    assert chat_day(utc(2026, 3, 10, 23, 0), parse_timezone("+09:00")) == date(2026, 3, 11)  # 08:00
    assert chat_day(datetime(2026, 3, 10, 3, 0), UTC) == date(2026, 3, 9)  # naive is UTC


def test_rollover_stays_at_wall_clock_hour_across_dst():
    # Lisbon springs forward on 29.03.2026 at 01:00 UTC: 03:30 local is 02:30 UTC that day
    assert chat_day(utc(2026, 3, 29, 2, 30), LISBON) == date(2026, 3, 28)
    assert chat_day(utc(2026, 3, 29, 3, 0), LISBON) == date(2026, 3, 29)  # 04:00 local
    assert chat_day(utc(2026, 10, 25, 3, 59), LISBON) == date(2026, 10, 24)  # 03:59 WET, after fall-back
    assert chat_day(utc(2026, 10, 25, 4, 0), LISBON) == date(2026, 10, 25)


def test_timezones_names_and_offsets():
    assert parse_timezone("UTC") is UTC
    assert parse_timezone("+03:00") == timezone(timedelta(hours=3))
    assert parse_timezone("-0530") == timezone(-timedelta(hours=5, minutes=30))
    assert parse_timezone("UTC+3") == timezone(timedelta(hours=3))
    assert parse_timezone(" GMT-4 ") == timezone(-timedelta(hours=4))
    for bad in ("", "Mars/Olympus", "+15:00", "+03:75", "x" * 65, "../../etc/passwd"):
        with pytest.raises(ValueError):
            parse_timezone(bad)


def test_rollover_hour_is_0_to_11():
    assert [check_rollover_hour(h) for h in (0, 4, 11)] == [0, 4, 11]
    for bad in (-1, 12, 24, True, 4.0, "4"):
        with pytest.raises(ValueError, match="12 AM"):
            check_rollover_hour(bad)


def test_messages_group_into_days_in_time_order():
    msgs = [
        TimedMessage(3, utc(2026, 3, 10, 12)),
        TimedMessage(1, utc(2026, 3, 9, 22)),
        TimedMessage(2, utc(2026, 3, 10, 2)),  # still the 9th
        TimedMessage(4, datetime(2026, 3, 12, 9)),
    ]
    assert group_days(msgs, UTC) == [
        ChatDay(date(2026, 3, 9), (1, 2)),
        ChatDay(date(2026, 3, 10), (3,)),
        ChatDay(date(2026, 3, 12), (4,)),
    ]


def test_today_is_never_finished():
    today = chat_day(utc(2026, 3, 12, 3), UTC)  # 03:00: still the 11th
    assert today == date(2026, 3, 11)
    assert finished_days([date(2026, 3, 9), date(2026, 3, 11), date(2026, 3, 10)], today) == [
        date(2026, 3, 9),
        date(2026, 3, 10),
    ]


def test_weeks_start_on_monday_and_finish_on_the_next_monday():
    assert week_start(date(2026, 3, 15)) == date(2026, 3, 9)  # a Sunday in the week of Monday 9th
    assert week_start(date(2026, 3, 9)) == date(2026, 3, 9)
    assert not week_finished(date(2026, 3, 9), date(2026, 3, 15))
    assert week_finished(date(2026, 3, 9), date(2026, 3, 16))
    assert days_of_week(date(2026, 3, 9), [date(2026, 3, 16), date(2026, 3, 10), date(2026, 3, 8)]) == [
        date(2026, 3, 10)
    ]


def test_a_week_is_ready_only_when_finished_and_every_message_day_is_summarised():
    days = [date(2026, 3, 9), date(2026, 3, 11), date(2026, 3, 16)]
    monday = date(2026, 3, 9)
    assert weeks_ready(days, days, [], today=date(2026, 3, 15)) == []  # not finished yet
    assert weeks_ready(days, days, [], today=date(2026, 3, 16)) == [monday]
    assert weeks_ready(days, [date(2026, 3, 9)], [], today=date(2026, 3, 20)) == []  # the 11th failed
    assert weeks_ready(days, days, [monday], today=date(2026, 3, 20)) == []  # already consolidated


def test_missing_days_are_finished_unsummarised_newest_first():
    days = [date(2026, 3, d) for d in (1, 2, 3, 5, 8, 9)]
    today = date(2026, 3, 9)
    assert missing_days(days, [date(2026, 3, 3)], [], today) == Missing(
        (date(2026, 3, 8), date(2026, 3, 5), date(2026, 3, 2), date(2026, 3, 1)), 4
    )


def test_a_failed_day_stays_missing_until_it_has_a_summary():
    days = [date(2026, 3, 1), date(2026, 3, 2)]
    first = missing_days(days, [], [], date(2026, 3, 5))
    # the 2nd failed, the 1st succeeded: the 2nd is still there on the next run
    assert missing_days(days, [date(2026, 3, 1)], [], date(2026, 3, 5)) == Missing((date(2026, 3, 2),), 1)
    assert first.total == 2


def test_days_under_a_week_summary_are_not_missing():
    days = [date(2026, 3, 10), date(2026, 3, 17)]
    assert missing_days(days, [], [date(2026, 3, 9)], date(2026, 3, 20)) == Missing((date(2026, 3, 17),), 1)


def test_backfill_takes_fourteen_days_per_run_by_default():
    days = [date(2026, 1, 1) + timedelta(days=i) for i in range(40)]
    today = date(2026, 2, 9)  # the 40th day
    run = missing_days(days, [], [], today)
    assert len(run.days) == 14 and run.total == 39
    assert run.days[0] == date(2026, 2, 8) and run.days[-1] == date(2026, 1, 26)
    assert len(missing_days(days, [], [], today, limit=60).days) == 39
    for bad in (0, 61, True):
        with pytest.raises(ValueError, match="1 to 60"):
            missing_days(days, [], [], today, limit=bad)


def test_ten_days_across_the_rollover_hour():
    # two messages a day at 23:30 and 03:30 UTC for ten days, in UTC with rollover 4:
    # the 03:30 message belongs to the evening before
    start = utc(2026, 3, 2, 23, 30)
    msgs = []
    for i in range(10):
        msgs.append(TimedMessage(2 * i, start + timedelta(days=i)))
        msgs.append(TimedMessage(2 * i + 1, start + timedelta(days=i, hours=4)))
    days = group_days(msgs, UTC)
    assert len(days) == 10 and all(len(d.message_ids) == 2 for d in days)
    now = utc(2026, 3, 12, 3, 45)  # before the rollover: today is still the 11th, the last day
    today = chat_day(now, UTC)
    assert today == days[-1].day
    missing = missing_days([d.day for d in days], [], [], today)
    assert missing.total == 9 and today not in missing.days
    assert weeks_ready([d.day for d in days], [d.day for d in days], [], today) == [date(2026, 3, 2)]


def d(day, *ids):
    return ChatDay(date(2026, 3, day), ids)


def test_conversation_prompt_carries_weeks_then_days_then_unsummarised_days_tail_and_today():
    days = [d(2, 1, 2), d(4, 3), d(9, 4, 5), d(10, 6, 7, 8), d(11, 9), d(12, 10, 11)]
    plan = conversation_plan(
        days,
        summarised_days=[date(2026, 3, 2), date(2026, 3, 4), date(2026, 3, 9), date(2026, 3, 11)],
        summarised_weeks=[date(2026, 3, 2)],
        today=date(2026, 3, 12),
        tail=3,
    )
    assert plan == ConversationPlan(
        weeks=(date(2026, 3, 2),),
        days=(date(2026, 3, 9), date(2026, 3, 11)),
        verbatim_ids=(6, 7, 8),  # the 10th failed: its messages are sent, never dropped
        tail_ids=(4, 5, 9),
        today_ids=(10, 11),
    )


def test_a_past_week_not_yet_consolidated_keeps_its_day_summaries():
    plan = conversation_plan(
        [d(2, 1), d(3, 2), d(10, 3)], [date(2026, 3, 2), date(2026, 3, 3)], [], date(2026, 3, 10)
    )
    assert plan.weeks == () and plan.days == (date(2026, 3, 2), date(2026, 3, 3)) and plan.today_ids == (3,)
    assert plan.tail_ids == (1, 2) and plan.verbatim_ids == ()


def test_tail_bounds():
    assert conversation_plan([d(2, 1, 2)], [date(2026, 3, 2)], [], date(2026, 3, 3), tail=0).tail_ids == ()
    assert conversation_plan([d(2, 1, 2)], [date(2026, 3, 2)], [], date(2026, 3, 3), tail=3).tail_ids == (
        1,
        2,
    )
    for bad in (-1, 51, True):
        with pytest.raises(ValueError, match="0 to 50"):
            conversation_plan([], [], [], date(2026, 3, 3), tail=bad)


def test_edit_groups_list_every_week_with_its_days_under_it():
    from app.memory.days.core.days import WeekGroup, edit_groups

    today = date(2026, 3, 18)  # a Wednesday
    mon1, mon2, mon3 = date(2026, 3, 2), date(2026, 3, 9), date(2026, 3, 16)
    with_messages = [date(2026, 3, 3), date(2026, 3, 4), date(2026, 3, 10), date(2026, 3, 16), today]
    summarised_days = [date(2026, 3, 3), date(2026, 3, 4), date(2026, 3, 5), date(2026, 3, 16)]
    groups = edit_groups(with_messages, summarised_days, [mon1], today)
    assert groups == [
        # A summarised week keeps its days listed (a day summary without messages too).
        WeekGroup(mon1, True, (date(2026, 3, 3), date(2026, 3, 4), date(2026, 3, 5))),
        # A finished week without a summary: its finished day without one is listed, to be written.
        WeekGroup(mon2, True, (date(2026, 3, 10),)),
        # This week: the finished days only; today is never listed without a summary.
        WeekGroup(mon3, False, (date(2026, 3, 16),)),
    ]
    assert edit_groups([today], [], [], today) == []
    assert edit_groups([], [], [mon2], today) == [WeekGroup(mon2, True, ())]  # an imported week alone
