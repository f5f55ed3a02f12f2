"""Issue 23: background work leaves room for the user. Memory Recall's embedding waits while a reply is
being written and goes on after it; passages are embedded on one core fewer than the machine has; the
built-in model's objects are frozen out of the collector's full passes once loaded. (How much each
helps is measured by bench/pages.py, never here.)"""

from __future__ import annotations

import gc
import threading

from sqlmodel import func, select

from app.memory.recall.embedders import ModelLoad, background_threads
from app.memory.recall.jobs import embed_chat
from app.memory.recall.models import MemoryChunk
from app.platform.foreground import Foreground
from tests.conftest import add_character, add_connection, new_chat
from tests.integration.test_memory_recall import _fill
from tests.support.model_server import Reply
from tests.support.waiting import wait_for


def _embedded(sugo, chat_id: int) -> tuple[int, int]:
    """(memories with vectors, memories) of the chat."""
    with sugo.session() as s:
        counts = dict(
            s.exec(
                select(MemoryChunk.status, func.count())
                .where(MemoryChunk.chat_id == chat_id)
                .group_by(MemoryChunk.status)
            ).all()
        )
    return counts.get("vectorized", 0), sum(counts.values())


def test_the_memory_job_waits_while_a_reply_is_written_and_goes_on_after_it(sugo, api, models):
    add_connection(api, models)
    char = add_character(api)
    chat_id = new_chat(api, [char["id"]], mode="conversation")["id"]
    _fill(sugo, chat_id, char["id"])
    gate = threading.Event()
    models.script(Reply("We rest by the dunes.", gate=gate))
    asked_before = len(models.requests)

    def send() -> None:
        with sugo.client() as client:
            client.post(
                f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Shall we rest?"}
            )

    sending = threading.Thread(target=send)
    embedding = threading.Thread(target=embed_chat, args=(sugo.services, chat_id))
    sending.start()
    try:
        wait_for(lambda: len(models.requests) > asked_before, timeout=30, what="the reply's request")
        embedding.start()
        # The job waits before it reads the chat's messages to make memories of them (and before each
        # batch it embeds): nothing is made while the reply is written.
        wait_for(lambda: sugo.services.foreground.waiting >= 1, timeout=60, what="the memory job waiting")
        done, made = _embedded(sugo, chat_id)
        assert made == 0 and done == 0
        assert embedding.is_alive()
    finally:
        gate.set()
        sending.join(60)
    embedding.join(300)
    assert not embedding.is_alive()
    done, made = _embedded(sugo, chat_id)
    assert done == made > 0
    assert not sugo.services.foreground.replying and sugo.services.foreground.waiting == 0


def test_with_no_reply_being_written_background_work_does_not_wait():
    foreground = Foreground()
    foreground.wait_for_quiet(longest_s=3600)  # returns at once: the test would hang otherwise
    with foreground.reply():
        assert foreground.replying
    assert not foreground.replying


def test_a_reply_that_fails_still_lets_background_work_go_on():
    foreground = Foreground()
    try:
        with foreground.reply():
            raise RuntimeError("the provider went away")
    except RuntimeError:
        pass
    assert not foreground.replying


def test_passages_are_embedded_on_one_core_fewer_than_the_machine_has():
    assert [background_threads(n) for n in (1, 2, 4, 16)] == [1, 1, 3, 15]


def test_a_loaded_model_is_frozen_out_of_the_collectors_full_passes():
    model = [object() for _ in range(1000)]
    before = gc.get_freeze_count()
    load = ModelLoad("a test model", lambda: model)
    assert load.model(timeout=60) is model
    assert gc.get_freeze_count() >= before + len(model)
