"""A chat end to end over real HTTP: Sugo on 127.0.0.1 talking to the test model server."""

import threading

import httpx
from sqlmodel import select

from app.chats.models import Message
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.waiting import wait_for


def _setup(api, models, **char_fields):
    add_connection(api, models)
    char = add_character(api, **char_fields)
    return char, new_chat(api, [char["id"]])


def _send(api, chat_id, content, **extra):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content, **extra})
    assert r.status_code == 200, r.text
    return read_sse(r)


def _arrived(api, chat_id) -> str:
    """What is stored so far of the reply being written; "" before it starts and once it ends."""
    last = api.get(f"/api/chats/{chat_id}/messages").json()[-1]
    return last["content"] if last["role"] == "assistant" and last["status"] == "streaming" else ""


class TestGreetings:
    def test_alternate_greetings_become_swipes_of_the_first_message(self, api, models):
        char, chat = _setup(api, models, alternate_greetings=["Second hello", "Third hello"])
        msgs = api.get(f"/api/chats/{chat['id']}/messages").json()
        assert len(msgs) == 1
        assert [s["content"] for s in msgs[0]["swipes"]] == [char["first_mes"], "Second hello", "Third hello"]


class TestSendAndStream:
    def test_reply_streams_in_several_tokens_and_is_stored(self, api, models):
        _, chat = _setup(api, models)
        models.script(Reply(text="The bard tunes her lute and smiles.", chunk_size=5))
        events = _send(api, chat["id"], "Play me a song")
        kinds = [e for e, _ in events]
        assert kinds[0] == "start" and kinds[-1] == "done"
        tokens = [d["text"] for e, d in events if e == "token"]
        assert len(tokens) > 3 and "".join(tokens) == "The bard tunes her lute and smiles."
        msgs = api.get(f"/api/chats/{chat['id']}/messages").json()
        assert [m["role"] for m in msgs] == ["assistant", "user", "assistant"]
        assert msgs[-1]["content"] == "The bard tunes her lute and smiles." and msgs[-1]["status"] == "ok"

    def test_prompt_sent_holds_character_persona_and_history(self, api, models):
        api.post("/api/personas", json={"name": "Rowan", "description": "A tired knight."})
        _, chat = _setup(api, models)
        _send(api, chat["id"], "Hello {{char}}")
        sent = models.last_request.json["messages"]
        assert sent[0]["role"] == "system"
        assert "Aria is a wandering bard." in sent[0]["content"]
        assert "About Rowan: A tired knight." in sent[0]["content"]
        assert sent[1] == {"role": "assistant", "content": "*Aria waves.* Hello, Rowan!"}
        assert sent[-1] == {"role": "user", "content": "Hello Aria"}
        assert models.last_request.json["stream"] is True

    def test_users_message_is_stored_before_the_provider_is_called(self, api, sugo, models):
        _, chat = _setup(api, models)
        models.script(Reply(text="late", first_delay_s=1.5))
        done = threading.Thread(target=_send, args=(api, chat["id"], "Remember the lighthouse"))
        done.start()
        wait_for(lambda: models.requests, what="the provider to be called")
        # The provider has the request and has not answered yet: the user's words are already stored.
        with sugo.session() as s:
            texts = [m.content for m in s.exec(select(Message).where(Message.chat_id == chat["id"]))]
        assert "Remember the lighthouse" in texts
        done.join()

    def test_generation_parameters_reach_the_provider(self, api, models):
        _, chat = _setup(api, models)
        api.put(
            f"/api/chats/{chat['id']}/options",
            json={
                "settings": {
                    "temperature": 1.3,
                    "top_p": 0.9,
                    "max_tokens": 77,
                    "stop": ["\nUser:"],
                    "recent_message_limit": 40,
                }
            },
        )
        _send(api, chat["id"], "hi")
        body = models.last_request.json
        assert (body["temperature"], body["top_p"], body["max_tokens"], body["stop"]) == (
            1.3,
            0.9,
            77,
            ["\nUser:"],
        )


class TestErrors:
    def test_broken_stream_keeps_the_partial_reply_and_names_the_cause(self, api, models):
        _, chat = _setup(api, models)
        models.script(
            Reply(text="The dragon opened one enormous eye and", chunk_size=6, break_after_chunks=3)
        )
        events = _send(api, chat["id"], "Wake the dragon")
        error = [d for e, d in events if e == "error"][0]
        assert error["kind"] == "stream_broken" and "dropped" in error["message"]
        last = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
        assert last["status"] == "partial"
        assert last["content"] == "The dragon opened one enormous eye and"[:18]
        assert "dropped" in last["error"]

    def test_each_cause_is_named(self, api, models):
        _, chat = _setup(api, models)
        cases = [
            (Reply(status=401, error="Invalid API key provided"), "auth", "API key"),
            (Reply(status=429, error="Too many requests"), "rate_limit", "Rate limited"),
            (Reply(status=500, error="boom"), "server", "boom"),
        ]
        for reply, kind, words in cases:
            models.script(reply)
            events = _send(api, chat["id"], "hi")
            error = [d for e, d in events if e == "error"][0]
            assert error["kind"] == kind and words in error["message"], error
            last = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
            assert last["status"] == "error" and words in last["error"]

    def test_unknown_model_and_refused_connection(self, api, models):
        add_connection(api, models, model="ghost-model", is_default=True)
        char = add_character(api)
        chat = new_chat(api, [char["id"]])
        error = [d for e, d in _send(api, chat["id"], "hi") if e == "error"][0]
        assert error["kind"] == "not_found" and "ghost-model" in error["message"]
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        add_connection(api, models, base_url=f"http://127.0.0.1:{port}/v1", is_default=True)
        error = [d for e, d in _send(api, chat["id"], "hi") if e == "error"][0]
        assert error["kind"] == "connection" and "refused" in error["message"]
        # Both user messages are kept even though no reply came.
        users = [m for m in api.get(f"/api/chats/{chat['id']}/messages").json() if m["role"] == "user"]
        assert len(users) == 2

    def test_no_connection_says_what_to_do(self, api):
        char = add_character(api)
        chat = new_chat(api, [char["id"]])
        error = [d for e, d in _send(api, chat["id"], "hi") if e == "error"][0]
        assert "Add one under Connections" in error["message"]


class TestStop:
    def test_stop_keeps_what_arrived(self, api, sugo, models):
        _, chat = _setup(api, models)
        models.script(Reply(text="word " * 200, chunk_size=5, delay_s=0.02))
        result = {}
        t = threading.Thread(
            target=lambda: result.setdefault("events", _send(api, chat["id"], "Tell a long tale"))
        )
        t.start()
        # Stop once part of the reply is stored (streaming all of it takes about 4 s).
        wait_for(lambda: _arrived(api, chat["id"]), what="the first words of the reply")
        assert api.post(f"/api/chats/{chat['id']}/stop").json() == {"stopped": True}
        t.join(10)
        assert [e for e, _ in result["events"]][-1] == "stopped"
        last = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
        assert last["status"] == "partial" and 0 < len(last["content"]) < len("word " * 200)

    def test_second_generation_in_the_same_chat_is_refused_while_one_runs(self, api, models):
        _, chat = _setup(api, models)
        models.script(Reply(text="slow " * 50, delay_s=0.02))
        t = threading.Thread(target=_send, args=(api, chat["id"], "one"))
        t.start()
        # The provider is answering (for about a second more), so the first generation is running.
        wait_for(lambda: models.requests, what="the first generation to reach the provider")
        r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "two"})
        assert r.status_code == 400 and "already" in r.json()["detail"]
        api.post(f"/api/chats/{chat['id']}/stop")
        t.join(10)


class TestSwipesEditsHidden:
    def test_swipe_regenerate_and_select(self, api, models):
        _, chat = _setup(api, models)
        models.script("First answer", "Second answer")
        _send(api, chat["id"], "Question")
        r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "swipe"})
        assert read_sse(r)[-1][0] == "done"
        last = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
        assert [s["content"] for s in last["swipes"]] == ["First answer", "Second answer"]
        assert last["active_swipe"] == 1 and last["content"] == "Second answer"
        back = api.post(f"/api/chats/{chat['id']}/messages/{last['id']}/swipe", json={"index": 0}).json()
        assert back["content"] == "First answer"
        # The regenerated prompt did not include the reply being replaced.
        assert all(m["content"] != "First answer" for m in models.last_request.json["messages"])

    def test_edit_changes_the_active_version_only(self, api, models):
        _, chat = _setup(api, models)
        _send(api, chat["id"], "hi")
        api.post(f"/api/chats/{chat['id']}/generate", json={"action": "swipe"})
        last = api.get(f"/api/chats/{chat['id']}/messages").json()[-1]
        edited = api.patch(
            f"/api/chats/{chat['id']}/messages/{last['id']}", json={"content": "Edited text"}
        ).json()
        assert edited["content"] == "Edited text"
        assert (
            edited["swipes"][0]["content"] == "Echo: hi" and edited["swipes"][1]["content"] == "Edited text"
        )

    def test_hidden_message_stays_visible_but_leaves_the_prompt(self, api, models):
        _, chat = _setup(api, models)
        models.script("Noted.")
        _send(api, chat["id"], "The password is swordfish")
        user_msg = [m for m in api.get(f"/api/chats/{chat['id']}/messages").json() if m["role"] == "user"][0]
        api.patch(f"/api/chats/{chat['id']}/messages/{user_msg['id']}", json={"hidden": True})
        peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
        assert user_msg["id"] not in [b["message_id"] for b in peek["blocks"]]
        assert peek["hidden_skipped"] == 1
        _send(api, chat["id"], "What is the password?")
        assert "swordfish" not in str(models.last_request.json["messages"])
        page = api.get(f"/chats/{chat['id']}").text
        assert "swordfish" in page and "hidden from AI" in page

    def test_delete_and_branch(self, api, models):
        _, chat = _setup(api, models)
        _send(api, chat["id"], "one")
        _send(api, chat["id"], "two")
        msgs = api.get(f"/api/chats/{chat['id']}/messages").json()
        branch = api.post(f"/api/chats/{chat['id']}/messages/{msgs[2]['id']}/branch").json()
        branch_msgs = api.get(f"/api/chats/{branch['id']}/messages").json()
        assert [m["content"] for m in branch_msgs] == [m["content"] for m in msgs[:3]]
        assert api.delete(f"/api/chats/{chat['id']}/messages/{msgs[-1]['id']}").status_code == 204
        assert len(api.get(f"/api/chats/{chat['id']}/messages").json()) == len(msgs) - 1
        # the branch is untouched
        assert len(api.get(f"/api/chats/{branch['id']}/messages").json()) == 3


class TestGroupChats:
    def test_members_answer_in_the_groups_order_or_as_chosen(self, api, models):
        add_connection(api, models)
        a = add_character(api, "Aria")
        b = add_character(api, "Bram")
        chat = new_chat(api, [a["id"], b["id"]])
        settings = {**chat["settings"], "reply_order": "list"}
        api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings})
        _send(api, chat["id"], "Hello both")
        _send(api, chat["id"], "Bram only", speaker_id=b["id"])
        names = [
            m["name"] for m in api.get(f"/api/chats/{chat['id']}/messages").json() if m["role"] == "assistant"
        ]
        assert names[-3:] == ["Aria", "Bram", "Bram"]
        sys = models.last_request.json["messages"]
        assert "## Aria" in sys[0]["content"] and "## Bram" in sys[0]["content"]
        assert sys[-1]["content"] == "[Write the next reply only as Bram.]"


class TestChatList:
    def test_most_recent_first_and_search(self, api, models):
        add_connection(api, models)
        char = add_character(api)
        first = new_chat(api, [char["id"]], name="Harbour night")
        second = new_chat(api, [char["id"]], name="Forest morning")
        _send(api, first["id"], "bump")
        assert [c["name"] for c in api.get("/api/chats").json()] == ["Harbour night", "Forest morning"]
        assert [c["name"] for c in api.get("/api/chats", params={"q": "forest"}).json()] == ["Forest morning"]
        page = api.get("/", params={"q": "harb"}).text
        assert "Harbour night" in page and "Forest morning" not in page
        assert second["id"]

    def test_delete_chat_removes_its_messages(self, api, sugo, models):
        _, chat = _setup(api, models)
        _send(api, chat["id"], "x")
        assert api.delete(f"/api/chats/{chat['id']}").status_code == 204
        with sugo.session() as s:
            assert s.exec(select(Message).where(Message.chat_id == chat["id"])).first() is None


class TestAnthropic:
    def test_streams_through_the_messages_api_with_a_cache_breakpoint(self, api, models):
        add_connection(api, models, kind="anthropic", base_url=models.anthropic_base_url)
        char = add_character(api)
        chat = new_chat(api, [char["id"]])
        models.script(Reply(text="Claude-style answer", chunk_size=4))
        events = _send(api, chat["id"], "Hi there")
        assert "".join(d["text"] for e, d in events if e == "token") == "Claude-style answer"
        body = models.last_request.json
        assert models.last_request.path.endswith("/messages")
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][0]["role"] == "user"


class TestFollow:
    def test_a_second_page_can_follow_a_reply_being_written(self, api, sugo, models):
        _, chat = _setup(api, models)
        models.script(Reply(text="one two three four five six", chunk_size=3, delay_s=0.05))
        t = threading.Thread(target=_send, args=(api, chat["id"], "go"))
        t.start()
        # Registered before the provider is called, and the reply takes about half a second more.
        wait_for(lambda: models.requests, what="the reply to be under way")
        with sugo.client() as other:
            events = read_sse(other.get(f"/api/chats/{chat['id']}/generate"))
        t.join(10)
        assert events[0][0] == "start" and events[-1][0] == "done"
        assert "".join(d["text"] for e, d in events if e == "token") == "one two three four five six"
        assert api.get(f"/api/chats/{chat['id']}/generate").status_code == 204


def _send_until_cut(live, chat_id: int) -> None:
    """The reply's request, on a client of its own (one the test's thread closes under it read a
    closed socket: an unhandled error in this thread). The shutdown cuts the stream: that is the point."""
    with live.client() as own:
        try:
            own.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "go"})
        except httpx.HTTPError:
            pass


def test_replies_cut_off_by_a_shutdown_or_a_crash_keep_their_text_and_are_marked(tmp_path, models):
    from app.chats.service import INTERRUPTED
    from tests.conftest import add_character, add_connection, new_chat
    from tests.support.live import LiveSugo

    data = tmp_path / "data"
    with LiveSugo(data) as first, first.client() as c:
        add_connection(c, models)
        char = add_character(c)
        chat = new_chat(c, [char["id"]])
        models.script(Reply(text="a long tale " * 100, chunk_size=4, delay_s=0.02))
        request = threading.Thread(target=_send_until_cut, args=(first, chat["id"]), daemon=True)
        request.start()
        # Shut down once part of the reply is stored (streaming all of it takes about 6 s).
        wait_for(lambda: _arrived(c, chat["id"]).startswith("a long tale"), what="the reply's first words")
    request.join(30)
    assert not request.is_alive()
    # A clean shutdown stops the reply and keeps what arrived.
    with LiveSugo(data) as second, second.client() as c:
        last = c.get(f"/api/chats/{chat['id']}/messages").json()[-1]
        assert last["status"] == "partial" and last["content"].startswith("a long tale")
        assert last["error"] == "Stopped before the reply was finished."
        # Now leave a row as a crash would: still "streaming".
        with second.session() as s:
            msg = s.get(Message, last["id"])
            msg.status = "streaming"
            msg.swipes = [{**msg.swipes[0], "status": "streaming", "error": None}]
            s.add(msg)
            s.commit()
    with LiveSugo(data) as third, third.client() as c:
        last = c.get(f"/api/chats/{chat['id']}/messages").json()[-1]
        assert last["status"] == "partial" and last["error"] == INTERRUPTED
        assert last["content"].startswith("a long tale")


class TestContextNotes:
    def test_chat_note_and_character_note_sit_at_their_depths(self, api, models):
        _, chat = _setup(api, models)
        char_id = api.get(f"/api/chats/{chat['id']}").json()["character_ids"][0]
        body = api.get(f"/api/characters/{char_id}").json()
        body.update(character_note="Aria hums when nervous.", character_note_depth=0)
        api.put(f"/api/characters/{char_id}", json=body)
        for text in ("one", "two", "three"):
            _send(api, chat["id"], text)
        api.put(
            f"/api/chats/{chat['id']}/options",
            json={
                "settings": {
                    "context_note": "It is still raining.",
                    "context_note_depth": 2,
                    "time_awareness": True,
                }
            },
        )
        _send(api, chat["id"], "four")
        sent = models.last_request.json["messages"]
        contents = [m["content"] for m in sent]
        note_at = contents.index("It is still raining.")
        # depth 2: before the second newest message of the history (the previous reply, then "four")
        # depth 2: before the second newest history message; the character's note at depth 0 last.
        assert contents[note_at + 1 :] == ["Echo: three", "four", "Aria hums when nervous."]
        # The current time sits just above the four newest speaker turns.
        assert contents[contents.index("Echo: two") - 1].startswith("Current time: ")
        assert "Current time" not in contents[0]  # never in the cached system prefix
        exported = api.get(f"/api/characters/{char_id}/export", params={"format": "json"}).json()
        assert exported["data"]["extensions"]["depth_prompt"] == {
            "prompt": "Aria hums when nervous.",
            "depth": 0,
            "role": "system",
        }


class TestContextGridAndSnapshot:
    def test_context_report_sizes_cost_and_cache_rate(self, api, models):
        add_connection(
            api, models, price_input_per_m=3.0, price_output_per_m=15.0, price_cached_input_per_m=0.3
        )
        char = add_character(api, description="A bard. " * 200)
        chat = new_chat(api, [char["id"]])
        models.script(
            Reply(text="Noted.", usage={"input_tokens": 1200, "output_tokens": 3, "cached_input_tokens": 900})
        )
        _send(api, chat["id"], "hello")
        ctx = api.get(f"/api/chats/{chat['id']}/context").json()
        legend = {row["key"]: row for row in ctx["legend"]}
        assert legend["system"]["tokens"] > 400 and legend["conversation"]["tokens"] > 0
        assert legend["reply"]["tokens"] == 256 and legend["free"]["tokens"] == ctx["free_tokens"]
        assert ctx["used_tokens"] + ctx["reply_reserve"] + ctx["free_tokens"] == ctx["context_size"]
        assert ctx["sizes"][0]["label"] == "Character: Aria"  # the biggest block first
        assert ctx["cost"]["input_cost"] == ctx["used_tokens"] * 3.0 / 1e6
        assert ctx["cost"]["input_cost_cached"] < ctx["cost"]["input_cost"]
        assert (ctx["last_input_tokens"], ctx["last_cached_tokens"]) == (1200, 900)
        assert ctx["cache_hit_rate"] == 0.75 and ctx["replies_with_usage"] == 1
        page = api.get(f"/chats/{chat['id']}/context", headers={"HX-Request": "true"}).text
        assert "<html" not in page and "ctx-grid" in page and "Why does it forget?" in page

    def test_snapshots_are_the_exact_package(self, api, models):
        add_connection(api, models, api_key="sk-never-in-a-snapshot")
        char = add_character(api)
        chat = new_chat(api, [char["id"]])
        _send(api, chat["id"], "remember the lighthouse")
        text = api.get(f"/api/chats/{chat['id']}/prompt/snapshot", params={"format": "text"})
        assert "attachment" in text.headers["content-disposition"]
        assert "Sugo prompt snapshot" in text.text and "remember the lighthouse" in text.text
        assert "--- [1] Main prompt" in text.text and "messages in the recent window fit" in text.text
        raw = api.get(f"/api/chats/{chat['id']}/prompt/snapshot", params={"format": "json"})
        body = raw.json()
        assert body["provider"] == "openai" and body["url"].endswith("/chat/completions")
        peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
        assert [m["content"] for m in body["body"]["messages"]] == [m["content"] for m in peek["messages"]]
        assert "sk-never-in-a-snapshot" not in raw.text and "sk-never-in-a-snapshot" not in text.text
        # What the provider received for the last reply had the same shape.
        assert set(body["body"]) >= {"model", "messages", "stream", "max_tokens"}

    def test_help_page(self, api):
        page = api.get("/help/forgetting").text
        assert "Why does it forget?" in page and "refresh" in page.lower()


class TestRefresh:
    def test_refresh_cuts_the_history_and_deleting_the_mark_undoes_it(self, api, models):
        _, chat = _setup(api, models)
        _send(api, chat["id"], "The key is under the mat.")
        mark = api.post(f"/api/chats/{chat['id']}/refresh").json()
        assert mark["kind"] == "refresh"
        _send(api, chat["id"], "Where is the key?")
        sent = models.last_request.json["messages"]
        assert [m["content"] for m in sent[1:]] == ["Where is the key?"]  # nothing above the mark
        peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
        assert any("refresh mark" in n for n in peek["notes"])
        assert api.delete(f"/api/chats/{chat['id']}/messages/{mark['id']}").status_code == 204
        _send(api, chat["id"], "And now?")
        contents = [m["content"] for m in models.last_request.json["messages"]]
        assert "The key is under the mat." in contents and "*Aria waves.* Hello, User!" in contents

    def test_refresh_marks_survive_a_jsonl_round_trip(self, api, models):
        _, chat = _setup(api, models)
        _send(api, chat["id"], "one")
        api.post(f"/api/chats/{chat['id']}/refresh")
        download = api.get(f"/api/chats/{chat['id']}/export")
        exported, file_name = download.content, download.headers["content-disposition"].split('"')[1]
        char_id = api.get(f"/api/chats/{chat['id']}").json()["character_ids"][0]
        api.delete(
            f"/api/chats/{chat['id']}"
        )  # restored from the file as downloaded: its name comes back too
        again = api.post(
            "/api/chats/import", files={"file": (file_name, exported)}, data={"character_id": char_id}
        ).json()
        kinds = [m["kind"] for m in api.get(f"/api/chats/{again['id']}/messages").json()]
        assert kinds[-1] == "refresh"
        assert api.get(f"/api/chats/{again['id']}/export").content == exported
