from datetime import UTC, datetime, timedelta, timezone

from app.platform.timeutil import same_minute


def test_one_minute_shows_as_one_time():
    at = datetime(2026, 3, 10, 21, 31, 5, 120_000, tzinfo=UTC)
    assert same_minute(at, at.replace(second=59, microsecond=999_999))
    assert same_minute(at.replace(tzinfo=None), at)  # the database's naive UTC
    assert same_minute(at, at.astimezone(timezone(timedelta(hours=5, minutes=30))))  # one moment, any zone
    assert not same_minute(at, at.replace(minute=32, second=0))
    assert not same_minute(at, at + timedelta(days=1))
