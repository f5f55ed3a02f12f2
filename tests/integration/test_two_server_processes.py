"""Two Sugo servers as a user starts them (`python -m app`, two processes on two loopback ports)
sharing one PostgreSQL database (issue 26): a chat made through one gets a reply through the other,
which the first shows; a server with another API-key file refuses the shared database."""

from __future__ import annotations

import pytest

from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.process import SugoProcess

pytestmark = pytest.mark.postgres


def test_a_chat_made_through_one_process_gets_its_reply_through_the_other(
    tmp_path, migrated_postgres_url, models
):
    data = tmp_path / "data"
    shared = {"SUGO_DATABASE_URL": migrated_postgres_url}
    with (
        SugoProcess(data, SUGO_SERVER_NAME="a", **shared) as a,
        SugoProcess(data, SUGO_SERVER_NAME="b", **shared) as b,
        a.client() as on_a,
        b.client() as on_b,
    ):
        models.script(Reply(text="Hello back, through B."))
        add_connection(on_a, models)
        chat = new_chat(on_a, [add_character(on_a)["id"]])
        events = read_sse(
            on_b.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Hello from B"})
        )
        assert events[-1][0] == "done", events[-3:]
        shown = on_a.get(f"/api/chats/{chat['id']}/messages").json()
        assert [m["content"] for m in shown[-2:]] == ["Hello from B", "Hello back, through B."]


def test_a_process_with_another_api_key_file_refuses_the_shared_database(tmp_path, migrated_postgres_url):
    shared = {"SUGO_DATABASE_URL": migrated_postgres_url}
    with SugoProcess(tmp_path / "a", SUGO_SERVER_NAME="a", **shared):
        pass
    other = SugoProcess(tmp_path / "b", SUGO_SERVER_NAME="b", **shared)
    with pytest.raises(AssertionError, match="Sugo exited"):
        other.start()
    assert "is not the one the API keys in this database were saved with" in other.log_path.read_text()
