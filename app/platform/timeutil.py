from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(dt: datetime) -> datetime:
    """Give a datetime read back from the database its UTC zone for display and export."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def same_minute(a: datetime, b: datetime) -> bool:
    """Whether two moments show as one time: pages show times to the minute, in the reader's zone
    (whole minutes away from UTC), so "09:31 – 09:31" is one time, "09:31"."""
    return as_utc(a).replace(second=0, microsecond=0) == as_utc(b).replace(second=0, microsecond=0)
