"""Wrong passwords per client: literal clocks, no waiting."""

from app.web.auth import LoginThrottle, allowed_host_names, backoff_s, host_name


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_backoff_is_free_for_typos_then_doubles_up_to_a_ceiling():
    waits = [backoff_s(n, free=5, first_wait_s=30, max_wait_s=900) for n in range(12)]
    assert waits == [0, 0, 0, 0, 0, 30, 60, 120, 240, 480, 900, 900]


def test_a_client_waits_after_too_many_failures_and_others_do_not():
    clock = Clock()
    throttle = LoginThrottle(free=2, first_wait_s=30, clock=clock)
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


def test_failures_are_forgotten_after_a_quiet_hour():
    clock = Clock()
    throttle = LoginThrottle(free=2, first_wait_s=30, forget_after_s=3600, clock=clock)
    throttle.failed("a")
    clock.now += 3601
    throttle.failed("a")
    assert throttle.wait_s("a") == 0


def test_remembers_a_bounded_number_of_clients():
    throttle = LoginThrottle(free=1, max_clients=3, clock=Clock())
    for client in ("a", "b", "c", "d"):
        throttle.failed(client)
    assert throttle.wait_s("a") == 0  # the oldest was forgotten
    assert all(throttle.wait_s(c) > 0 for c in ("b", "c", "d"))
    assert len(throttle._failures) == 3


def test_host_names():
    assert host_name("127.0.0.1:8000") == "127.0.0.1"
    assert host_name("[::1]:8000") == "::1"
    assert host_name("LocalHost.") == "localhost"
    assert host_name("localhost@evil.example") is None
    assert host_name("") is None
    assert allowed_host_names(["sugo.lan", "::1", " 192.168.1.20 "]) == {
        "127.0.0.1",
        "localhost",
        "::1",
        "sugo.lan",
        "192.168.1.20",
    }
    assert allowed_host_names(["*"]) is None
