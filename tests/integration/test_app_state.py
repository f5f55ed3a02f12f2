"""App state lives in one services object per app: two apps in one process (two data folders)
share no key box, lorebook cache, recall index, rebuild or thread pool, even where their ids
collide."""

from __future__ import annotations

from app.connections.crypto import KeyBox
from app.memory.recall.jobs import embed_chat
from tests.conftest import add_character, add_connection, new_chat
from tests.integration.test_memory_recall import _fill
from tests.support.live import LiveSugo


def _book(api, name: str, content: str) -> dict:
    book = api.post("/api/lorebooks", json={"name": name, "is_global": True}).json()
    r = api.post(f"/api/lorebooks/{book['id']}/entries", json={"title": name, "content": content, "constant": True})
    assert r.status_code == 201, r.text
    return book


def test_two_apps_in_one_process_keep_their_caches_indexes_and_keys_apart(tmp_path, models):
    with LiveSugo(tmp_path / "a") as a, LiveSugo(tmp_path / "b") as b, a.client() as api_a, b.client() as api_b:
        services_a, services_b = a.services, b.services
        for part in ("keybox", "lorebooks", "recall", "sources", "generations"):
            assert getattr(services_a, part) is not getattr(services_b, part), part
        assert services_a.recall.index is not services_b.recall.index
        assert services_a.recall.queries is not services_b.recall.queries

        # The same ids in both databases: book 1, chat 1, character 1.
        book_a, book_b = _book(api_a, "Vellmar", "Vellmar is a port city."), _book(api_b, "Ostgard", "Ostgard is snow.")
        assert book_a["id"] == book_b["id"]
        chats = []
        for api, sugo in ((api_a, a), (api_b, b)):
            add_connection(api, models, api_key=f"sk-{sugo.settings.data_dir.name}")
            char = add_character(api)
            chat = new_chat(api, [char["id"]], mode="conversation")
            chats.append(chat)
        assert chats[0]["id"] == chats[1]["id"]
        chat_id = chats[0]["id"]

        # Each prompt carries its own book, though the book ids are the same and A's was compiled first.
        peek_a = api_a.get(f"/api/chats/{chat_id}/prompt").json()["messages"][0]["content"]
        peek_b = api_b.get(f"/api/chats/{chat_id}/prompt").json()["messages"][0]["content"]
        assert "Vellmar is a port city." in peek_a and "Ostgard" not in peek_a
        assert "Ostgard is snow." in peek_b and "Vellmar" not in peek_b
        assert services_a.lorebooks.held_books() == services_b.lorebooks.held_books() == [book_a["id"]]

        # Memories only in A: searching A loads A's index; B's stays empty and finds nothing.
        _fill(a, chat_id, 1)
        embed_chat(services_a, chat_id)
        found_a = api_a.get(f"/api/chats/{chat_id}/memories/search", params={"q": "brass key clock tower"}).json()
        found_b = api_b.get(f"/api/chats/{chat_id}/memories/search", params={"q": "brass key clock tower"}).json()
        assert found_a["results"] and "brass key" in found_a["results"][0]["content"]
        assert found_b["results"] == []
        assert services_a.recall.index.held_chats() == [chat_id]
        assert services_b.recall.index.held_chats() in ([], [chat_id])  # searched, but holds no bits
        assert services_a.recall.rebuilds.get(chat_id) is None
        api_a.post(f"/api/chats/{chat_id}/memories/rebuild")
        assert services_a.recall.rebuilds.get(chat_id) is not None and services_b.recall.rebuilds.get(chat_id) is None

        # Each app decrypts only with its own data folder's key.
        assert services_a.keybox is not services_b.keybox
        token = services_a.keybox.encrypt("sk-secret")
        assert services_a.keybox.decrypt(token) == "sk-secret"
        assert KeyBox(a.settings.secret_key_path).decrypt(token) == "sk-secret"
        try:
            services_b.keybox.decrypt(token)
            raise AssertionError("B decrypted A's key")
        except ValueError:
            pass
