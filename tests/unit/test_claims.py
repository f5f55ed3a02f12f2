"""ChatClaims: one run per chat and kind of work, given back when the run's thread ends."""

import threading
import time

import pytest
from sqlalchemy import create_engine

from app.platform.claims import ChatClaims


def _until_free(claims: ChatClaims, engine, chat_id: int) -> None:
    deadline = time.monotonic() + 5
    while claims.held(engine, chat_id):
        assert time.monotonic() < deadline, "the thread never let go of the chat"
        time.sleep(0.01)


def test_a_chat_is_claimed_once_per_engine_and_given_back():
    claims, a, b = ChatClaims(), create_engine("sqlite://"), create_engine("sqlite://")
    assert claims.claim(a, 1)
    assert not claims.claim(a, 1)
    assert claims.claim(a, 2) and claims.claim(b, 1)  # another chat, another app on the same kind of file
    assert claims.chats(a) == [1, 2] and claims.chats(b) == [1]
    claims.release(a, 1)
    assert not claims.held(a, 1) and claims.claim(a, 1)


def test_by_address_two_engines_of_one_database_share_a_claim():
    claims = ChatClaims(key=lambda engine: str(engine.url))
    assert claims.claim(create_engine("sqlite:///x.db"), 1)
    assert not claims.claim(create_engine("sqlite:///x.db"), 1)


def test_a_failing_block_gives_the_claim_back():
    claims, engine = ChatClaims(), create_engine("sqlite://")
    assert claims.claim(engine, 1)
    with pytest.raises(RuntimeError), claims.holding(engine, 1):
        raise RuntimeError("the run's row could not be written")
    assert not claims.held(engine, 1)


# The raising run's exception reaches the thread's excepthook, as it would in the app (whose runs log theirs).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_started_thread_gives_the_claim_back_when_its_work_ends_even_by_raising():
    claims, engine = ChatClaims(), create_engine("sqlite://")
    go = threading.Event()

    def work(fail: bool) -> None:
        go.wait(5)
        if fail:
            raise RuntimeError("boom")

    for fail in (False, True):
        go.clear()
        assert claims.claim(engine, 1)
        claims.start(engine, 1, work, fail, name="test-work")
        assert claims.held(engine, 1)
        go.set()
        _until_free(claims, engine, 1)


def test_an_early_release_lets_the_next_run_keep_its_claim_when_the_old_thread_ends():
    claims, engine = ChatClaims(), create_engine("sqlite://")
    released, finish = threading.Event(), threading.Event()

    def old_run() -> None:
        claims.release(engine, 1)  # its end shows: the next run may start
        released.set()
        finish.wait(5)

    assert claims.claim(engine, 1)
    claims.start(engine, 1, old_run, name="old-run")
    assert released.wait(5)
    assert claims.claim(engine, 1)  # the next run
    finish.set()
    deadline = time.monotonic() + 5
    while any(t.name == "old-run" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert claims.held(engine, 1), "the old thread's end took the new run's claim"
