"""Run claims in the database (app/platform/claims.py): one run per chat and kind of work, given back
when the run's thread ends, decided by the database between threads and between servers; a server that
dies leaves its claims to go stale, and another takes them over. Each test on SQLite and PostgreSQL.
(Per app: tests/integration/test_app_state.py.)"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from app.platform.claims import KINDS, ChatClaims, ClaimTable, RunClaims
from tests.support.waiting import wait_for


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _claims(engine, server: str = "server-a", clock: _Clock | None = None) -> ChatClaims:
    return RunClaims(ClaimTable(engine, server=server, now=clock or _Clock())).summaries


def test_a_chat_is_claimed_once_and_given_back(database):
    claims = _claims(database)
    assert claims.claim(1)
    assert not claims.claim(1)
    assert claims.claim(2)  # another chat
    assert claims.chats() == [1, 2]
    claims.release(1)
    assert not claims.held(1) and claims.claim(1)


def test_each_kind_of_run_claims_the_chat_apart(database):
    claims = RunClaims(ClaimTable(database, server="a"))
    kinds = claims.kinds()
    assert all(kind.claim(1) for kind in kinds)  # a scene check and a Prepare of one chat, say
    assert [kind.kind for kind in kinds] == list(KINDS) and len(KINDS) == 8


def test_two_servers_never_hold_one_chat_and_one_cannot_release_the_others(database):
    clock = _Clock()
    a, b = _claims(database, "server-a", clock), _claims(database, "server-b", clock)
    assert a.claim(7)
    assert not b.claim(7) and b.held(7) and b.chats() == [7]
    b.release(7)  # only the holder gives a claim back
    assert a.held(7) and not b.claim(7)
    a.release(7)
    assert b.claim(7) and not a.claim(7)


def test_many_threads_of_two_servers_racing_for_one_chat_give_it_to_one(database):
    clock = _Clock()
    servers = [_claims(database, f"server-{n}", clock) for n in range(2)]
    won: list[int] = []
    start = threading.Barrier(8)

    def race(n: int) -> None:
        start.wait(10)
        if servers[n % 2].claim(3):
            won.append(n)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(won) == 1


def test_a_dead_servers_claim_goes_stale_and_another_server_takes_it_over(database):
    clock = _Clock()
    dead, alive = (
        ClaimTable(database, server="dead", now=clock),
        ClaimTable(database, server="alive", now=clock),
    )
    assert RunClaims(dead).prepare.claim(5)
    survivor = RunClaims(alive).prepare
    clock.now += timedelta(seconds=59)
    assert survivor.held(5) and not survivor.claim(5)
    clock.now += timedelta(seconds=2)  # no heartbeat for over a minute: the server died
    assert not survivor.held(5) and survivor.chats() == []
    assert survivor.claim(5)
    assert survivor.held(5)


def test_a_heartbeat_keeps_a_long_runs_claim_alive(database):
    clock = _Clock()
    busy, other = (
        ClaimTable(database, server="busy", now=clock),
        ClaimTable(database, server="other", now=clock),
    )
    assert RunClaims(busy).fix.claim(9)
    for _ in range(5):  # five minutes of work, a beat every half minute
        clock.now += timedelta(seconds=30)
        assert busy.beat() == 1
    assert not RunClaims(other).fix.claim(9)


def test_the_heartbeat_thread_refreshes_the_claims(database):
    clock = _Clock()
    table = ClaimTable(database, server="a", now=clock)
    assert RunClaims(table).fix.claim(4)
    clock.now += timedelta(seconds=45)
    table.start_heartbeat(every_s=0.01)
    try:
        clock.now += timedelta(seconds=45)  # 90 s after the claim: alive only if a beat ran since
        wait_for(
            lambda: RunClaims(ClaimTable(database, server="b", now=clock)).fix.held(4), what="a heartbeat"
        )
    finally:
        table.stop_heartbeat()


def test_a_restarted_server_takes_back_its_own_claims_at_once(database):
    clock = _Clock()
    before = ClaimTable(database, server="home", now=clock)
    assert RunClaims(before).rescans.claim(2)
    stranger = ClaimTable(database, server="elsewhere", now=clock)
    assert RunClaims(stranger).rescans.claim(3)
    after = ClaimTable(database, server="home", now=clock)  # the same server started again
    dropped = after.forget_previous_life()
    again = RunClaims(after).rescans
    assert again.claim(2)
    if database.dialect.name == "sqlite":  # one process owns a SQLite file: every claim was its own
        assert dropped == 2 and again.claim(3)
    else:  # another server's claim stays until it goes stale
        assert dropped == 1 and not again.claim(3)


def test_a_failing_block_gives_the_claim_back(database):
    claims = _claims(database)
    assert claims.claim(1)
    with pytest.raises(RuntimeError), claims.holding(1):
        raise RuntimeError("the run's row could not be written")
    assert not claims.held(1)


# The raising run's exception reaches the thread's excepthook, as it would in the app (whose runs log theirs).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_started_thread_gives_the_claim_back_when_its_work_ends_even_by_raising(database):
    claims = _claims(database)
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
        wait_for(lambda: not claims.held(1), what="the thread letting go of the chat")


def test_an_early_release_lets_the_next_run_keep_its_claim_when_the_old_thread_ends(database):
    claims = _claims(database)
    released, finish = threading.Event(), threading.Event()
    done = threading.Event()

    def old_run() -> None:
        claims.release(1)  # its end shows: the next run may start
        released.set()
        finish.wait(5)

    assert claims.claim(1)
    claims.start(1, old_run, name="old-run", then=done.set)
    assert released.wait(5)
    assert claims.claim(1)  # the next run
    finish.set()
    assert done.wait(5)
    assert claims.held(1), "the old thread's end took the new run's claim"


def test_a_claim_of_its_own_is_taken_over_only_when_asked_and_never_anothers(database):
    clock = _Clock()
    mine, theirs = ClaimTable(database, server="a", now=clock), ClaimTable(database, server="b", now=clock)
    old = mine.take("replies", 1)
    assert old is not None and mine.take("replies", 1) is None
    new = mine.take("replies", 1, over_own=True)
    assert new is not None and new != old
    mine.give_back("replies", 1, old)  # the finished reply's late give-back leaves the new claim
    assert mine.held("replies", 1) and mine.token("replies", 1) == new
    assert theirs.take("replies", 1, over_own=True) is None
