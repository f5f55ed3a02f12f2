"""Two Sugo servers sharing one PostgreSQL database (issue 26): what keeps two pieces of work apart
holds across them. Both servers run in this process on their own ports, as two machines behind a
proxy would, with one data folder (the key that seals API keys is shared, as it must be)."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest

from app.chats.service import INTERRUPTED
from app.platform import claims, jobs
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.live import LiveSugo
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres


def _last(api, chat_id: int) -> dict:
    return api.get(f"/api/chats/{chat_id}/messages").json()[-1]


def _partly_stored(api, chat_id: int) -> bool:
    """Whether the reply being written has some text stored (the greeting before it has text too)."""
    last = _last(api, chat_id)
    return last["status"] == "streaming" and bool(last["content"])


def test_one_reply_per_chat_across_servers_and_stop_reaches_the_server_writing_it(two_servers, models):
    one, two = two_servers
    with one.client() as api_one, two.client() as api_two:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]
        models.script(Reply(text="word " * 400, chunk_size=5, delay_s=0.02))
        events: list = []
        writer = threading.Thread(
            target=lambda: events.extend(
                read_sse(
                    api_one.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Go"})
                )
            )
        )
        writer.start()
        wait_for(
            lambda: _last(api_two, chat_id)["status"] == "streaming" and _last(api_two, chat_id)["content"],
            what="server one's reply arriving in the shared database",
        )
        # Server two refuses a second reply in the chat, and its Stop ends server one's reply.
        refused = api_two.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Also"})
        assert refused.status_code == 400 and "already being written" in refused.json()["detail"]
        assert api_two.post(f"/api/chats/{chat_id}/stop").json() == {"stopped": True}
        writer.join(30)
        assert not writer.is_alive()
        assert [name for name, _ in events][-1] == "stopped"
        last = _last(api_two, chat_id)
        assert last["status"] == "partial" and 0 < len(last["content"]) < len("word " * 400)
        # The claim is given back (just after the last event): the next reply may be written by either server.
        wait_for(
            lambda: two.services.generations.written_elsewhere(chat_id) is None, what="the claim given back"
        )
        models.script("From server two.")
        assert (
            read_sse(
                api_two.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Next"})
            )[-1][0]
            == "done"
        )
        assert _last(api_one, chat_id)["content"] == "From server two."
        # Nothing to stop on either server now (once the claim is given back, just after the last event).
        wait_for(
            lambda: one.services.generations.written_elsewhere(chat_id) is None, what="the claim given back"
        )
        assert api_one.post(f"/api/chats/{chat_id}/stop").json() == {"stopped": False}


class Follower:
    """A page's `GET /generate` on one server, read in a thread: its events as they arrive."""

    def __init__(self, api, chat_id: int) -> None:
        self.events: list[tuple[str, dict]] = []
        self.status: int | None = None
        self._thread = threading.Thread(target=self._read, args=(api, chat_id), daemon=True)
        self._thread.start()

    def _read(self, api, chat_id: int) -> None:
        with api.stream("GET", f"/api/chats/{chat_id}/generate") as response:
            self.status = response.status_code
            event, data = "message", ""
            for line in response.iter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data += line[5:].strip()
                elif not line and data:
                    self.events.append((event, json.loads(data)))
                    event, data = "message", ""

    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def text(self) -> str:
        return "".join(data["text"] for name, data in self.events if name == "token")

    def join(self) -> None:
        self._thread.join(30)
        assert not self._thread.is_alive(), "the follow did not end"


def test_a_message_sent_the_moment_a_reply_ends_is_taken_by_the_other_server(two_servers, models):
    """A reply's stream ends once the chat is free on every server: its claim is given back first.
    Before, the claim went back just after the stream ended, and a message sent at once through the
    other server (a proxy may pick either) was refused "already being written" (bench/scale.py's
    sends, one after the other, found it under load). The give-back is slowed here so that gap, a
    few milliseconds on a quiet machine, cannot be missed."""
    one, two = two_servers
    claims = one.app.state.services.generations.claims
    give_back = claims.give_back

    def slow_give_back(*args, **kwargs):
        time.sleep(0.5)
        return give_back(*args, **kwargs)

    with one.client() as api_one, two.client() as api_two:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]
        claims.give_back = slow_give_back
        try:
            first = api_one.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "One"})
            assert [name for name, _ in read_sse(first)][-1] == "done"
            second = api_two.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Two"})
            assert second.status_code == 200, second.text
            assert [name for name, _ in read_sse(second)][-1] == "done"
        finally:
            del claims.give_back
        assert [m["content"] for m in api_two.get(f"/api/chats/{chat_id}/messages").json()][-4::2] == [
            "One",
            "Two",
        ]


def _write_in_thread(api, chat_id: int, content: str) -> tuple[threading.Thread, list]:
    events: list = []
    thread = threading.Thread(
        target=lambda: events.extend(
            read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content}))
        ),
        daemon=True,
    )
    thread.start()
    return thread, events


def test_a_reply_written_through_one_server_streams_growing_to_a_page_of_the_other(two_servers, models):
    one, two = two_servers
    with one.client() as api_one, two.client() as api_two:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]  # created through one
        held = threading.Event()
        full = "Across the servers the words arrive one by one. " * 4
        models.script(Reply(text=full, chunk_size=6, hold=held, hold_after_chunks=5))
        writer, written = _write_in_thread(api_two, chat_id, "Go")  # written by two
        wait_for(lambda: _partly_stored(api_one, chat_id), what="two's partial reply stored")
        # A page of one opened now knows a reply is being written, and follows it.
        page = api_one.get(f"/chats/{chat_id}").text
        assert 'data-generating="true"' in page
        follower = Follower(api_one, chat_id)
        wait_for(lambda: "token" in follower.names(), what="the partial reply streamed by one")
        assert follower.status == 200
        start = follower.events[0]
        assert start[0] == "start" and start[1]["message_id"] == _last(api_one, chat_id)["id"]
        # Mid-reply: the model is held, the page has what is stored so far and nothing has ended.
        assert full.startswith(follower.text()) and len(follower.text()) < len(full)
        assert not {"done", "stopped", "error"} & set(follower.names())
        tokens_before = follower.names().count("token")
        held.set()
        follower.join()
        writer.join(30)
        assert follower.names()[-1] == "done"
        assert follower.names().count("token") > tokens_before  # it grew on the page after the hold
        assert follower.text() == full == _last(api_one, chat_id)["content"]
        done = follower.events[-1][1]
        assert done["message_id"] == start[1]["message_id"] and done["message_ids"] == [
            start[1]["message_id"]
        ]
        assert [name for name, _ in written][-1] == "done"
        # Nothing is being written now: each server says so.
        assert api_one.get(f"/api/chats/{chat_id}/generate").status_code == 204
        assert 'data-generating="false"' in api_one.get(f"/chats/{chat_id}").text


def test_stop_through_the_following_server_ends_the_followed_reply(two_servers, models):
    one, two = two_servers
    with one.client() as api_one, two.client() as api_two:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]
        models.script(Reply(text="word " * 400, chunk_size=5, delay_s=0.02))
        writer, written = _write_in_thread(api_one, chat_id, "Go")  # written by one
        wait_for(lambda: _partly_stored(api_two, chat_id), what="one's partial reply stored")
        follower = Follower(api_two, chat_id)
        wait_for(lambda: "token" in follower.names(), what="the reply followed through two")
        assert api_two.post(f"/api/chats/{chat_id}/stop").json() == {"stopped": True}
        follower.join()
        writer.join(30)
        assert follower.names()[-1] == "stopped"
        assert follower.events[-1][1]["text_kept"] is True
        last = _last(api_two, chat_id)
        assert last["status"] == "partial" and follower.text() == last["content"]
        assert 0 < len(last["content"]) < len("word " * 400)
        assert [name for name, _ in written][-1] == "stopped"


def test_a_server_started_while_another_writes_leaves_that_reply_alone(
    two_servers, models, tmp_path, migrated_postgres_url
):
    one, two = two_servers
    with one.client() as api_one:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]
        held = threading.Event()
        models.script(Reply(text="Still being written. " * 3, chunk_size=5, hold=held, hold_after_chunks=3))
        writer, written = _write_in_thread(api_one, chat_id, "Go")
        wait_for(lambda: _partly_stored(api_one, chat_id), what="one's partial reply stored")
        # A third server starts (as two would after a restart) while one writes.
        with LiveSugo(tmp_path / "data", database_url=migrated_postgres_url, server_name="three") as three:
            with three.client() as api_three:
                assert _last(api_three, chat_id)["status"] == "streaming"
                assert three.services.generations.finish_abandoned() == 0  # its claim is live
                held.set()
                writer.join(30)
                assert [name for name, _ in written][-1] == "done"
                assert _last(api_three, chat_id)["status"] == "ok"
                assert _last(api_three, chat_id)["content"] == "Still being written. " * 3


def test_a_reply_whose_server_died_is_marked_interrupted_once_its_claim_is_stale(
    two_servers, models, tmp_path, migrated_postgres_url, monkeypatch
):
    one, _ = two_servers
    with one.client() as api_one:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]
        held = threading.Event()
        models.script(
            Reply(text="Cut short by a dying server. " * 3, chunk_size=5, hold=held, hold_after_chunks=3)
        )
        writer, _ = _write_in_thread(api_one, chat_id, "Go")
        wait_for(lambda: _partly_stored(api_one, chat_id), what="one's partial reply stored")
        # One stops refreshing its claims, as a server that died would; the model still holds its
        # reply, so nothing of it moves any more.
        one.services.claims.table.stop_heartbeat()
        monkeypatch.setattr(claims, "STALE_AFTER", timedelta(seconds=1))
        monkeypatch.setattr(jobs, "DEAD_SERVER_LOOK_S", 0.2)
        with LiveSugo(tmp_path / "data", database_url=migrated_postgres_url, server_name="three") as three:
            with three.client() as api_three:
                last = wait_for(
                    lambda: (m := _last(api_three, chat_id))["status"] != "streaming" and m,
                    what="the dead server's reply marked interrupted by the live one",
                )
                assert last["status"] == "partial" and last["error"] == INTERRUPTED, last
                assert last["content"] and "Cut short".startswith(last["content"][:9])
                # Nobody writes it any more: nothing to follow, and the page is not "generating".
                assert api_three.get(f"/api/chats/{chat_id}/generate").status_code == 204
                assert 'data-generating="false"' in api_three.get(f"/chats/{chat_id}").text
        held.set()
        writer.join(30)


def test_a_restarted_server_finishes_the_reply_its_last_life_was_writing_at_once(
    two_servers, models, tmp_path, migrated_postgres_url
):
    """Its own claims are dropped before the replies are looked at: no wait for them to go stale."""
    one, _ = two_servers
    with one.client() as api_one:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]
        held = threading.Event()
        models.script(
            Reply(text="Cut short by a restart. " * 3, chunk_size=5, hold=held, hold_after_chunks=3)
        )
        writer, _ = _write_in_thread(api_one, chat_id, "Go")
        wait_for(lambda: _partly_stored(api_one, chat_id), what="one's partial reply stored")
        # Server "one" starts again (its last life stands for one that was killed mid-reply).
        with LiveSugo(tmp_path / "data", database_url=migrated_postgres_url, server_name="one") as again:
            with again.client() as api_again:
                last = _last(api_again, chat_id)
                assert (last["status"], last["error"]) == ("partial", INTERRUPTED)
                assert api_again.get(f"/api/chats/{chat_id}/generate").status_code == 204
        held.set()
        writer.join(30)
