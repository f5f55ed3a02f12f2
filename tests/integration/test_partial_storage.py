"""The growing reply as stored (app/generation/writer.py): what arrived before the model paused is
stored within the flush interval, not only once more arrives. A page following the reply from another
server reads only what is stored. Runs in the PostgreSQL pass too."""

from __future__ import annotations

import threading

from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.waiting import wait_for


def test_the_words_before_a_pause_are_stored_during_the_pause(api, sugo, models):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    held = threading.Event()
    text = "Every word before the pause is kept. Then the rest."
    # Four quick deltas, then the model stays silent until the test lets it go on.
    models.script(Reply(text=text, chunk_size=9, hold=held, hold_after_chunks=4))
    events: list = []
    writing = threading.Thread(
        target=lambda: events.extend(
            read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Go"}))
        ),
        daemon=True,
    )
    writing.start()
    try:
        last = wait_for(
            lambda: (m := api.get(f"/api/chats/{chat_id}/messages").json()[-1])["content"] == text[:36] and m,
            what="all four deltas before the pause stored",
        )
        assert last["status"] == "streaming"
    finally:
        held.set()
        writing.join(30)
    assert events[-1][0] == "done"
    assert api.get(f"/api/chats/{chat_id}/messages").json()[-1]["content"] == text
