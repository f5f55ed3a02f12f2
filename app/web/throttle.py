"""Wrong passwords per client address (the login form and Bearer tokens alike), counted in the
database: every Sugo server sharing it makes the same client wait, so a guesser cannot spread its
tries over the servers behind a proxy.

Decisions:
- Times are wall-clock seconds (`time.time`): the servers share them; a monotonic clock is one
  process's own.
- A wrong password takes the write lock (`lock_for_write`) to count: two servers counting the same
  client at once both count. Reads (every Bearer request asks whether its client must wait) take
  none, and a right password deletes only a row that is there, so a correct client writes nothing.
- At most `max_clients` addresses are remembered, the least recently wrong let go first; rows quiet
  for longer than any wait they could impose are let go at the next wrong password.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import Field, Session, SQLModel

from app.platform import modelbase as _  # noqa: F401  (naming convention before tables are declared)
from app.platform.db import lock_for_write

MAX_CLIENT_CHARS = 100  # an IPv6 address with its zone fits; "unknown" too


class LoginFailure(SQLModel, table=True):
    """Wrong passwords in a row from one client address."""

    __tablename__ = "login_failure"

    client: str = Field(primary_key=True, max_length=MAX_CLIENT_CHARS)
    failures: int
    last_at: float  # wall-clock seconds of the last wrong password


def backoff_s(failures: int, *, free: int, first_wait_s: float, max_wait_s: float) -> float:
    """How long a client waits after `failures` wrong passwords in a row: nothing for the first
    `free` ones (typos), then a wait that doubles with each further one."""
    if failures < free:
        return 0.0
    return min(max_wait_s, first_wait_s * 2 ** (failures - free))


def too_many_tries_message(wait_s: float) -> str:
    return f"Too many wrong passwords from your address. Try again in {int(wait_s) + 1} seconds."


_READ = text("SELECT failures, last_at FROM login_failure WHERE client = :client")


class LoginThrottle:
    def __init__(
        self,
        engine: Engine,
        *,
        free: int = 5,
        first_wait_s: float = 30.0,
        max_wait_s: float = 900.0,
        forget_after_s: float = 3600.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.free, self.first_wait_s, self.max_wait_s = free, first_wait_s, max_wait_s
        self.forget_after_s, self.max_clients, self._clock = forget_after_s, max_clients, clock

    def _wait(self, count: int) -> float:
        return backoff_s(count, free=self.free, first_wait_s=self.first_wait_s, max_wait_s=self.max_wait_s)

    def _current(self, row, now: float) -> tuple[int, float]:
        """(failures, last time) still counting; none when the client has been quiet long enough."""
        if row is None:
            return 0, now
        count, last = int(row[0]), float(row[1])
        if now - last > max(self.forget_after_s, self._wait(count)):
            return 0, now
        return count, last

    def wait_s(self, client: str) -> float:
        """Seconds before `client` may try a password again (0: now)."""
        client = client[:MAX_CLIENT_CHARS]
        with self.engine.connect() as conn:
            row = conn.execute(_READ, {"client": client}).first()
        now = self._clock()
        count, last = self._current(row, now)
        return max(0.0, last + self._wait(count) - now) if count else 0.0

    def failed(self, client: str) -> None:
        client = client[:MAX_CLIENT_CHARS]
        with Session(self.engine) as session:
            lock_for_write(session)
            conn = session.connection()
            now = self._clock()
            count, _ = self._current(conn.execute(_READ, {"client": client}).first(), now)
            conn.execute(
                text(
                    "INSERT INTO login_failure (client, failures, last_at) VALUES (:client, :failures, :now) "
                    "ON CONFLICT (client) DO UPDATE SET failures = excluded.failures, last_at = excluded.last_at"
                ),
                {"client": client, "failures": count + 1, "now": now},
            )
            # Quiet past any wait they could still impose, or beyond the newest `max_clients`.
            conn.execute(
                text("DELETE FROM login_failure WHERE last_at < :quiet"),
                {"quiet": now - max(self.forget_after_s, self.max_wait_s)},
            )
            conn.execute(
                text(
                    "DELETE FROM login_failure WHERE last_at <= (SELECT last_at FROM login_failure "
                    "ORDER BY last_at DESC LIMIT 1 OFFSET :keep)"
                ),
                {"keep": self.max_clients},
            )
            session.commit()

    def succeeded(self, client: str) -> None:
        client = client[:MAX_CLIENT_CHARS]
        with self.engine.connect() as conn:
            if conn.execute(_READ, {"client": client}).first() is None:
                return
        with self.engine.begin() as conn:
            conn.execute(text("DELETE FROM login_failure WHERE client = :client"), {"client": client})
