"""Wrong-password backoff and host names: pure functions, literal values."""

from app.web.auth import allowed_host_names, host_name
from app.web.throttle import backoff_s


def test_backoff_is_free_for_typos_then_doubles_up_to_a_ceiling():
    waits = [backoff_s(n, free=5, first_wait_s=30, max_wait_s=900) for n in range(12)]
    assert waits == [0, 0, 0, 0, 0, 30, 60, 120, 240, 480, 900, 900]


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
