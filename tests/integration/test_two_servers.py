"""Two Sugo servers sharing one PostgreSQL database (issue 26): what keeps two pieces of work apart
holds across them. Both servers run in this process on their own ports, as two machines behind a
proxy would, with one data folder (the key that seals API keys is shared, as it must be)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.live import LiveSugo
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres


@pytest.fixture
def servers(tmp_path, migrated_postgres_url) -> Iterator[tuple[LiveSugo, LiveSugo]]:
    data = tmp_path / "data"
    with (
        LiveSugo(data, database_url=migrated_postgres_url, server_name="one") as one,
        LiveSugo(data, database_url=migrated_postgres_url, server_name="two") as two,
    ):
        yield one, two


def _last(api, chat_id: int) -> dict:
    return api.get(f"/api/chats/{chat_id}/messages").json()[-1]


def test_one_reply_per_chat_across_servers_and_stop_reaches_the_server_writing_it(servers, models):
    one, two = servers
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
        # The claim was given back: the next reply may be written by either server.
        models.script("From server two.")
        assert (
            read_sse(
                api_two.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Next"})
            )[-1][0]
            == "done"
        )
        assert _last(api_one, chat_id)["content"] == "From server two."
        # Nothing to stop on either server now.
        assert api_one.post(f"/api/chats/{chat_id}/stop").json() == {"stopped": False}
