import threading

from app.memory.recall.jobs import ChatSyncs


def test_a_sync_asked_for_while_one_runs_makes_that_one_go_again():
    syncs = ChatSyncs()
    rounds = []

    def work():
        rounds.append(len(rounds) + 1)
        if len(rounds) == 1:
            assert syncs.busy(7)
            assert syncs.run(7, work) is None  # the chat is busy: the running sync goes again
            assert syncs.run(8, lambda: "other chat") == "other chat"  # other chats are not held up
        return len(rounds)

    assert syncs.run(7, work) == 2
    assert not syncs.busy(7) and syncs.run(7, lambda: "free") == "free"


def test_a_failing_sync_frees_its_chat():
    syncs = ChatSyncs()

    def fail():
        raise RuntimeError("embedding source down")

    try:
        syncs.run(3, fail)
    except RuntimeError:
        pass
    assert not syncs.busy(3)


def test_a_sync_that_waits_its_turn_runs_after_the_running_one():
    syncs = ChatSyncs()
    order = []
    inside, release = threading.Event(), threading.Event()

    def first():
        inside.set()
        release.wait(30)
        order.append("first")

    holder = threading.Thread(target=syncs.run, args=(5, first))
    holder.start()
    inside.wait(30)
    waiter = threading.Thread(target=lambda: order.append(syncs.run(5, lambda: "second", wait=True)))
    waiter.start()
    release.set()
    holder.join(30)
    waiter.join(30)
    assert order == ["first", "second"]
