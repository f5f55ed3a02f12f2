"""ChatClaims: one run per chat and kind of work, given back when the run's thread ends. (Per app:
tests/integration/test_app_state.py.)"""

import dataclasses
import threading
import time

import pytest

from app.platform.claims import ChatClaims, RunClaims


def _until_free(claims: ChatClaims, chat_id: int) -> None:
    deadline = time.monotonic() + 5
    while claims.held(chat_id):
        assert time.monotonic() < deadline, "the thread never let go of the chat"
        time.sleep(0.01)


def test_a_chat_is_claimed_once_and_given_back():
    claims = ChatClaims()
    assert claims.claim(1)
    assert not claims.claim(1)
    assert claims.claim(2)  # another chat
    assert claims.chats() == [1, 2]
    claims.release(1)
    assert not claims.held(1) and claims.claim(1)


def test_each_kind_of_run_claims_the_chat_apart():
    claims = RunClaims()
    kinds = [getattr(claims, f.name) for f in dataclasses.fields(claims)]
    assert all(kind.claim(1) for kind in kinds)  # a scene check and a Prepare of one chat, say
    assert len({id(kind) for kind in kinds}) == len(kinds) == 7


def test_a_failing_block_gives_the_claim_back():
    claims = ChatClaims()
    assert claims.claim(1)
    with pytest.raises(RuntimeError), claims.holding(1):
        raise RuntimeError("the run's row could not be written")
    assert not claims.held(1)


# The raising run's exception reaches the thread's excepthook, as it would in the app (whose runs log theirs).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_started_thread_gives_the_claim_back_when_its_work_ends_even_by_raising():
    claims = ChatClaims()
    go = threading.Event()

    def work(fail: bool) -> None:
        go.wait(5)
        if fail:
            raise RuntimeError("boom")

    for fail in (False, True):
        go.clear()
        assert claims.claim(1)
        claims.start(1, work, fail, name="test-work")
        assert claims.held(1)
        go.set()
        _until_free(claims, 1)


def test_an_early_release_lets_the_next_run_keep_its_claim_when_the_old_thread_ends():
    claims = ChatClaims()
    released, finish = threading.Event(), threading.Event()

    def old_run() -> None:
        claims.release(1)  # its end shows: the next run may start
        released.set()
        finish.wait(5)

    assert claims.claim(1)
    claims.start(1, old_run, name="old-run")
    assert released.wait(5)
    assert claims.claim(1)  # the next run
    finish.set()
    deadline = time.monotonic() + 5
    while any(t.name == "old-run" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert claims.held(1), "the old thread's end took the new run's claim"
