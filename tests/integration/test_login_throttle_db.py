"""Wrong passwords per client, counted in the database (app/web/throttle.py): on SQLite and on
PostgreSQL, with literal clocks, no waiting. Two throttles on one database stand for two servers."""

from __future__ import annotations

from sqlalchemy import event, text

from app.web.throttle import LoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_client_waits_after_too_many_failures_and_others_do_not(database):
    clock = Clock()
    throttle = LoginThrottle(database, free=2, first_wait_s=30, clock=clock)
    throttle.failed("10.0.0.1")
    assert throttle.wait_s("10.0.0.1") == 0
    throttle.failed("10.0.0.1")
    assert throttle.wait_s("10.0.0.1") == 30
    assert throttle.wait_s("10.0.0.2") == 0
    clock.now += 31
    assert throttle.wait_s("10.0.0.1") == 0
    throttle.failed("10.0.0.1")
    assert throttle.wait_s("10.0.0.1") == 60
    throttle.succeeded("10.0.0.1")
    assert throttle.wait_s("10.0.0.1") == 0


def test_failures_on_one_server_make_the_client_wait_on_the_other(database):
    clock = Clock()
    one = LoginThrottle(database, free=3, first_wait_s=30, clock=clock)
    two = LoginThrottle(database, free=3, first_wait_s=30, clock=clock)
    one.failed("203.0.113.9")
    two.failed("203.0.113.9")
    one.failed("203.0.113.9")
    assert two.wait_s("203.0.113.9") == 30  # three wrong passwords, whichever server counted them
    two.succeeded("203.0.113.9")
    assert one.wait_s("203.0.113.9") == 0


def test_failures_are_forgotten_after_a_quiet_hour(database):
    clock = Clock()
    throttle = LoginThrottle(database, free=2, first_wait_s=30, forget_after_s=3600, clock=clock)
    throttle.failed("a")
    clock.now += 3601
    throttle.failed("a")
    assert throttle.wait_s("a") == 0


def _rows(engine) -> list[str]:
    with engine.connect() as conn:
        return sorted(r[0] for r in conn.execute(text("SELECT client FROM login_failure")))


def test_remembers_a_bounded_number_of_clients_and_lets_quiet_ones_go(database):
    clock = Clock()
    throttle = LoginThrottle(database, free=1, max_clients=3, forget_after_s=3600, clock=clock)
    for client in ("a", "b", "c", "d"):
        clock.now += 1
        throttle.failed(client)
    assert _rows(database) == ["b", "c", "d"]  # the least recently wrong was let go
    assert throttle.wait_s("a") == 0
    assert all(throttle.wait_s(c) > 0 for c in ("b", "c", "d"))
    clock.now += 3600.5  # b, c and d are now quiet for over an hour
    throttle.failed("e")
    assert _rows(database) == ["e"]


def test_a_right_password_writes_nothing_for_a_client_with_no_failures(database):
    throttle = LoginThrottle(database, clock=Clock())
    statements: list[str] = []

    def seen(conn, cursor, statement, *args):
        statements.append(statement.split()[0].upper())

    event.listen(database, "before_cursor_execute", seen)
    try:
        throttle.succeeded("198.51.100.7")
    finally:
        event.remove(database, "before_cursor_execute", seen)
    assert statements == ["SELECT"]


def test_an_overlong_client_address_is_cut_to_the_column(database):
    throttle = LoginThrottle(database, free=1, clock=Clock())
    throttle.failed("x" * 500)
    assert throttle.wait_s("x" * 500) > 0
    assert _rows(database) == ["x" * 100]
