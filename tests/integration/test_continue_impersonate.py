"""Continue and Impersonate over real HTTP against the test model server (issue 11 item 7):
what is sent to the model, what is stored, and Stop or a broken stream on the way."""

import threading

from app.prompt.core.builder import CONTINUE_NUDGE
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

IMPERSONATION_START = "[Write your next reply from the point of view of Rowan, using the chat history so far"


def _setup(api, models, **char_fields):
    api.post("/api/personas", json={"name": "Rowan", "description": "A tired knight."})
    add_connection(api, models)
    char = add_character(api, **char_fields)
    return new_chat(api, [char["id"]])


def _generate(api, chat_id, action, **extra):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": action, **extra})
    assert r.status_code == 200, r.text
    return read_sse(r)


def _messages(api, chat_id):
    return api.get(f"/api/chats/{chat_id}/messages").json()


def _asked_and_answered(api, models, chat_id, reply="The knight draws his sword"):
    models.script(reply)
    _generate(api, chat_id, "send", content="What now?")


class TestContinue:
    def test_the_prompt_ends_on_the_reply_then_the_nudge_and_the_text_is_appended_and_stored(
        self, api, models
    ):
        chat = _setup(api, models)
        _asked_and_answered(api, models, chat["id"])
        before = _messages(api, chat["id"])[-1]
        models.script(Reply(text="and charges the gate.", chunk_size=4))
        events = _generate(api, chat["id"], "continue")

        assert events[0] == ("start", {"message_id": before["id"], "swipe_index": 0, "action": "continue"})
        assert events[-1][0] == "done"
        # The first piece carries the space between the reply and its continuation.
        assert "".join(d["text"] for e, d in events if e == "token") == " and charges the gate."
        sent = models.last_request.json["messages"]
        assert sent[-1] == {"role": "system", "content": CONTINUE_NUDGE}
        assert sent[-2] == {"role": "assistant", "content": "The knight draws his sword"}
        assert sent[-3] == {"role": "user", "content": "What now?"}

        msgs = _messages(api, chat["id"])
        assert len(msgs) == 3  # no message added
        last = msgs[-1]
        assert last["id"] == before["id"] and last["status"] == "ok" and last["error"] is None
        assert last["content"] == "The knight draws his sword and charges the gate."
        assert [s["content"] for s in last["swipes"]] == ["The knight draws his sword and charges the gate."]

    def test_a_continuation_that_starts_with_punctuation_or_space_gets_no_extra_space(self, api, models):
        chat = _setup(api, models)
        _asked_and_answered(api, models, chat["id"], reply="He waits")
        models.script(", sword raised.")
        _generate(api, chat["id"], "continue")
        models.script("\n\nThen he laughs.")
        _generate(api, chat["id"], "continue")
        assert _messages(api, chat["id"])[-1]["content"] == "He waits, sword raised.\n\nThen he laughs."

    def test_the_shown_version_is_extended_and_the_others_are_left_alone(self, api, models):
        chat = _setup(api, models)
        _asked_and_answered(api, models, chat["id"], reply="First version")
        models.script("Second version")
        _generate(api, chat["id"], "swipe", message_id=_messages(api, chat["id"])[-1]["id"])
        mid = _messages(api, chat["id"])[-1]["id"]
        api.post(f"/api/chats/{chat['id']}/messages/{mid}/swipe", json={"index": 0})
        models.script("goes on.")
        _generate(api, chat["id"], "continue")
        last = _messages(api, chat["id"])[-1]
        assert last["active_swipe"] == 0 and last["content"] == "First version goes on."
        assert [s["content"] for s in last["swipes"]] == ["First version goes on.", "Second version"]

    def test_stop_keeps_the_partial_extension(self, api, models):
        chat = _setup(api, models)
        _asked_and_answered(api, models, chat["id"], reply="The tale begins.")
        models.script(Reply(text="word " * 200, chunk_size=5, delay_s=0.02))
        result = {}
        t = threading.Thread(
            target=lambda: result.setdefault("events", _generate(api, chat["id"], "continue"))
        )
        t.start()
        wait_for(
            # Two words, as the assertion below reads: a first piece alone ("word ") is already
            # longer than "The tale begins. word", and a stop right then keeps one word (seen once).
            lambda: _messages(api, chat["id"])[-1]["content"].startswith("The tale begins. word word"),
            what="the first two words of the continuation to be stored",
        )
        assert api.post(f"/api/chats/{chat['id']}/stop").json() == {"stopped": True}
        t.join(10)
        assert result["events"][-1][0] == "stopped"
        last = _messages(api, chat["id"])[-1]
        assert last["status"] == "partial" and last["content"].startswith("The tale begins. word word")
        assert len(last["content"]) < len("The tale begins. " + "word " * 200)

    def test_a_broken_stream_keeps_what_arrived(self, api, models):
        chat = _setup(api, models)
        _asked_and_answered(api, models, chat["id"], reply="The dragon stirs.")
        models.script(Reply(text="It opens one enormous eye and", chunk_size=6, break_after_chunks=2))
        events = _generate(api, chat["id"], "continue")
        assert events[-1][0] == "error" and "dropped" in events[-1][1]["message"]
        last = _messages(api, chat["id"])[-1]
        assert last["status"] == "partial" and "dropped" in last["error"]
        assert last["content"] == "The dragon stirs. It opens one"

    def test_a_failure_before_any_text_leaves_the_reply_as_it_was(self, api, models):
        chat = _setup(api, models)
        _asked_and_answered(api, models, chat["id"], reply="Intact.")
        models.script(Reply(status=500, error="boom"))
        events = _generate(api, chat["id"], "continue")
        assert events[-1][0] == "error" and "boom" in events[-1][1]["message"]
        last = _messages(api, chat["id"])[-1]
        assert (last["content"], last["status"], last["error"]) == ("Intact.", "ok", None)

    def test_continue_is_refused_when_the_chat_ends_on_the_users_message(self, api, models):
        chat = _setup(api, models)
        api.post(f"/api/chats/{chat['id']}/messages", json={"content": "Anyone there?"})
        before = _messages(api, chat["id"])
        r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "continue"})
        assert r.status_code == 400 and "Continue extends the last reply" in r.json()["detail"]
        assert _messages(api, chat["id"]) == before and models.requests == []

    def test_continue_schedules_the_memory_sync(self, api, sugo, models):
        chat = _setup(api, models)
        _asked_and_answered(api, models, chat["id"])
        queue = sugo.services.queue
        queue.pause()
        try:
            queue.cancel("memory.embed_chat", chat_id=chat["id"])
            models.script("and waits.")
            _generate(api, chat["id"], "continue")
            assert queue.pending("memory.embed_chat", chat_id=chat["id"])
        finally:
            queue.resume()


class TestImpersonate:
    def test_the_model_writes_the_users_next_message_and_nothing_is_stored(self, api, models):
        chat = _setup(api, models, post_history_instructions="Stay in the scene.")
        _asked_and_answered(api, models, chat["id"])
        before = _messages(api, chat["id"])
        models.script(Reply(text="I raise my shield and follow.", chunk_size=5))
        events = _generate(api, chat["id"], "impersonate")

        assert events[0] == ("start", {"message_id": None, "swipe_index": 0, "action": "impersonate"})
        assert events[-1] == ("done", {"message_id": None})
        assert "".join(d["text"] for e, d in events if e == "token") == "I raise my shield and follow."
        sent = models.last_request.json["messages"]
        assert sent[-1]["role"] == "system" and sent[-1]["content"].startswith(IMPERSONATION_START)
        assert "Don't write as Aria or system." in sent[-1]["content"]
        assert sent[-2] == {"role": "assistant", "content": "The knight draws his sword"}
        # The character's own instructions would contradict writing as the user.
        assert not any(m["content"] == "Stay in the scene." for m in sent)
        assert _messages(api, chat["id"]) == before

    def test_stop_ends_the_impersonation(self, api, models):
        chat = _setup(api, models)
        _asked_and_answered(api, models, chat["id"])
        before = _messages(api, chat["id"])
        models.script(Reply(text="step " * 200, chunk_size=5, delay_s=0.02))
        result = {}
        t = threading.Thread(
            target=lambda: result.setdefault("events", _generate(api, chat["id"], "impersonate"))
        )
        t.start()
        wait_for(lambda: len(models.requests) == 2, what="the impersonation to reach the model")
        wait_for(
            lambda: api.post(f"/api/chats/{chat['id']}/stop").json() == {"stopped": True},
            what="the impersonation to be running",
        )
        t.join(10)
        assert result["events"][-1][0] == "stopped"
        assert _messages(api, chat["id"]) == before
        # The chat is free again.
        models.script("Onward.")
        assert _generate(api, chat["id"], "impersonate")[-1][0] == "done"


def test_continue_is_refused_for_an_earlier_or_hidden_reply_and_nothing_changes(api, models):
    chat = _setup(api, models)
    _asked_and_answered(api, models, chat["id"])
    msgs = _messages(api, chat["id"])
    r = api.post(
        f"/api/chats/{chat['id']}/generate", json={"action": "continue", "message_id": msgs[0]["id"]}
    )
    assert r.status_code == 400 and "last reply only" in r.json()["detail"]
    api.patch(f"/api/chats/{chat['id']}/messages/{msgs[-1]['id']}", json={"hidden": True})
    before = _messages(api, chat["id"])
    r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "continue"})
    assert r.status_code == 400 and "hidden from the AI" in r.json()["detail"]
    assert _messages(api, chat["id"]) == before and len(models.requests) == 1


def test_on_anthropic_the_reply_is_followed_by_the_nudge_as_a_system_note(api, models):
    """The decision: the nudge, not an assistant prefill (newer Claude models refuse prefills)."""
    add_connection(api, models, kind="anthropic", base_url=models.anthropic_base_url, api_key="sk-test")
    chat = new_chat(api, [add_character(api)["id"]])
    _asked_and_answered(api, models, chat["id"])
    models.script("and charges.")
    assert _generate(api, chat["id"], "continue")[-1][0] == "done"
    turns = models.last_request.json["messages"]
    assert turns[-2] == {"role": "assistant", "content": "The knight draws his sword"}
    assert turns[-1] == {"role": "user", "content": "[System note] " + CONTINUE_NUDGE}
    assert _messages(api, chat["id"])[-1]["content"] == "The knight draws his sword and charges."
