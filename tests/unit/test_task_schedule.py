"""Reminders' times, pure (app/tools/tasks/core/schedule.py): literal values in, literal values out."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.tools.tasks.core import schedule

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
LISBON = ZoneInfo("Europe/Lisbon")


def test_a_local_time_is_read_in_its_zone():
    assert schedule.parse_local_time("2026-07-04 09:00", LISBON) == datetime(2026, 7, 4, 8, 0, tzinfo=UTC)
    assert schedule.parse_local_time("2026-12-04_09:00", LISBON) == datetime(2026, 12, 4, 9, 0, tzinfo=UTC)
    assert schedule.parse_local_time("2026-12-04T9:05", ZoneInfo("Asia/Tokyo")) == datetime(
        2026, 12, 4, 0, 5, tzinfo=UTC
    )
    with pytest.raises(ValueError, match="YYYY-MM-DD HH:MM"):
        schedule.parse_local_time("tomorrow at 9", LISBON)
    with pytest.raises(ValueError, match="not a real date"):
        schedule.parse_local_time("2026-02-30 09:00", LISBON)


def test_a_time_must_be_ahead_and_within_ten_years():
    assert schedule.check_due(NOW + timedelta(minutes=1), NOW) == NOW + timedelta(minutes=1)
    with pytest.raises(ValueError, match="already passed"):
        schedule.check_due(NOW, NOW)
    with pytest.raises(ValueError, match="ten years"):
        schedule.check_due(NOW + timedelta(days=3_661), NOW)


def test_the_next_slot_skips_those_missed():
    assert schedule.next_slot(NOW, 24, NOW + timedelta(minutes=1)) == NOW + timedelta(days=1)
    assert schedule.next_slot(NOW, 24, NOW + timedelta(days=3)) == NOW + timedelta(days=4)
    assert schedule.next_slot(NOW, 24, NOW + timedelta(days=3, hours=-1)) == NOW + timedelta(days=3)
    assert schedule.next_slot(NOW, 1, NOW + timedelta(hours=5, minutes=30)) == NOW + timedelta(hours=6)


def test_words_for_people_and_the_model():
    assert schedule.format_due(datetime(2026, 12, 4, 9, 0, tzinfo=UTC), NOW, LISBON, "Europe/Lisbon") == (
        "Fri 4 Dec, 09:00 (Europe/Lisbon)"
    )
    assert schedule.format_due(datetime(2027, 1, 1, 9, 0, tzinfo=UTC), NOW, LISBON, "Europe/Lisbon") == (
        "Fri 1 Jan 2027, 09:00 (Europe/Lisbon)"
    )
    assert [schedule.interval_text(h) for h in (None, 0, 1, 5, 24, 48, 168, 336)] == [
        "once", "once", "every hour", "every 5 hours", "every day", "every 2 days", "every week", "every 2 weeks",
    ]  # fmt: skip
    assert schedule.duration_text(timedelta(hours=2, minutes=3)) == "2 hours"
    assert schedule.duration_text(timedelta(days=1, hours=5)) == "1 day"
    assert schedule.duration_text(timedelta(seconds=30)) == "less than a minute"


def test_the_reminder_line_and_a_purpose_kept_literal():
    line = schedule.reminder_line("Call Mum.")
    assert (
        line
        == '[System: A reminder you set earlier has come due. Reminder: "Call Mum.". Write to {{user}} about it now.]'
    )
    late = schedule.reminder_line("Call Mum.", late_by=timedelta(hours=2, minutes=1))
    assert late.endswith(" It is late by 2 hours: Sugo was not running at the due time.")
    kept = schedule.literal("Say {{setvar::x::1}} to <USER> and <b>")
    assert "{{" not in kept and "<USER>" not in kept and "<b>" in kept
    assert kept.replace("\u2060", "") == "Say {{setvar::x::1}} to <USER> and <b>"
    assert not schedule.is_late(NOW, NOW + timedelta(minutes=1)) and schedule.is_late(
        NOW, NOW + timedelta(minutes=3)
    )


def test_time_zones_are_iana_names():
    assert schedule.check_time_zone(" Europe/Lisbon ") == "Europe/Lisbon"
    for bad in ("", "Mars/Olympus", "../etc/passwd", "x" * 65):
        with pytest.raises(ValueError):
            schedule.check_time_zone(bad)
