"""The app's clock, one per `Services`: what task-related code reads as "now". Tests move it (an
offset from the real time, or `set` to a moment), so a reminder due in a minute, or while Sugo was
down, is tested without waiting; the time keeps running from wherever it was moved to."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class Clock:
    def __init__(self, offset: timedelta = timedelta(0)) -> None:
        self._lock = threading.Lock()
        self._offset = offset

    @property
    def offset(self) -> timedelta:
        with self._lock:
            return self._offset

    @offset.setter
    def offset(self, value: timedelta) -> None:
        with self._lock:
            self._offset = value

    def now(self) -> datetime:
        """Aware, UTC."""
        return datetime.now(UTC) + self.offset

    def set(self, now: datetime) -> None:
        """Make `now` the current time (aware); it runs on from there."""
        if now.tzinfo is None:
            raise ValueError("Clock.set needs an aware datetime.")
        self.offset = now - datetime.now(UTC)

    def advance(self, by: timedelta) -> None:
        with self._lock:
            self._offset += by
