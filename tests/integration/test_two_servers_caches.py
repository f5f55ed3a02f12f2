"""Every process-local cache stays right when another server writes (issue 26): two Sugo servers on
one PostgreSQL database, a write through one, the next read or reply through the other.

The caches that hold data across requests, and why each is right across servers:
- CompiledBooks (app/lore/prompting.py), lorebooks by id: checked every turn against the book's
  (version, created_at), read in one statement with the chat's links. Every write to a book or its
  entries bumps `version = version + 1` in SQL, so two servers' saves give two versions. The stamp
  is the one read before the entries (a save landing between the reads is read again next turn).
  Links are not held: they are read with the stamps every turn.
- SummaryBlocks (app/memory/summaries/prompting.py), Chat Summary entries by chat id: checked every
  turn against an aggregate of the chat's entries (count, sums of ids, bounds, flags, lengths, and
  the edit times summed, so an edit is seen whatever the writing server's clock says).
- SignIndex (app/memory/recall/index.py), sign bits by chat and space: SQLite's only; on PostgreSQL
  recall reads memory_words and memory_embedding (pgvector) in SQL and holds nothing.
  SQLite's copy follows the database every search too (new vector ids above the highest held, a
  trigger's tombstones, the sweep's floor).
- By content, never stale: QueryVectors (embedding space, text), RenderCache (Markdown text), the
  stemmer's lru_cache (word), scenes' statement per scene count, VectorSizes (address, model: what
  the embedding server answered, not stored data), time zones, the SSL context, the service worker.
- Request-scoped: the connections list in session.info (dropped at a flush that writes one, at
  commit and at rollback). Read every turn, never held: lorebook links, MCP servers' saved
  discoveries, a connection's tools_refused, chat settings, the chat memory (its Markdown mirror is
  written from the database in the writing transaction, in the shared data folder).
- Not caches of stored data but state of this server's own work (Generations, RunClaims, Rebuilds,
  ChatSyncs, DayBackfills, RescanStatuses, HeldScenes, summary_writes) and the login throttle:
  other parts of issue 26 (claims, jobs, shared secrets).
"""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text
from sqlmodel import Session, create_engine

from app.lore import service as lore
from app.lore.models import Lorebook
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.waiting import wait_for

pytestmark = pytest.mark.postgres


def _reply(api, models, chat_id: int, content: str) -> str:
    """A reply through `api`; every text of the request the model received, joined."""
    models.script("Noted.")
    events = read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content}))
    assert events[-1][0] == "done", events[-1]
    # The newest chat request (a memory job's embedding requests may have come after it).
    sent = next(r.json for r in reversed(list(models.requests)) if r.json and "messages" in r.json)
    return "\n".join(str(m["content"]) for m in sent["messages"])


def test_a_lorebook_edited_through_one_server_is_used_by_the_next_reply_through_the_other(
    two_servers, models
):
    one, two = two_servers
    with one.client() as api_one, two.client() as api_two:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]
        book = api_one.post("/api/lorebooks", json={"name": "Vellmar"}).json()
        assert (
            api_one.put(f"/api/chats/{chat_id}/lorebooks", json={"book_ids": [book["id"]]}).status_code == 200
        )
        entry = api_one.post(
            f"/api/lorebooks/{book['id']}/entries",
            json={"keys": ["dragon"], "content": "Dragons sleep under the Vellmar hills."},
        ).json()
        # Server two compiles the book (its cache is warm now).
        assert "Dragons sleep under the Vellmar hills." in _reply(api_two, models, chat_id, "A dragon!")
        assert book["id"] in two.services.lorebooks.held_books()

        # An edit through one is in two's very next reply.
        r = api_one.put(
            f"/api/lorebooks/{book['id']}/entries/{entry['id']}",
            json={"keys": ["dragon"], "content": "The dragons left Vellmar at dawn."},
        )
        assert r.status_code == 200, r.text
        sent = _reply(api_two, models, chat_id, "The dragon again.")
        assert "The dragons left Vellmar at dawn." in sent and "sleep under" not in sent

        # An entry added through one fires in two; the book's settings changed through one hold in two.
        api_one.post(
            f"/api/lorebooks/{book['id']}/entries",
            json={"keys": ["harbour"], "content": "The harbour of Vellmar is frozen."},
        )
        sent = _reply(api_two, models, chat_id, "The dragon flies over the harbour.")
        assert "The dragons left Vellmar at dawn." in sent and "The harbour of Vellmar is frozen." in sent
        r = api_one.put(f"/api/lorebooks/{book['id']}", json={"name": "Vellmar", "entry_limit": 1})
        assert r.status_code == 200, r.text
        sent = _reply(api_two, models, chat_id, "The dragon flies over the harbour.")
        assert ("The dragons left Vellmar at dawn." in sent) != ("The harbour of Vellmar is frozen." in sent)
        api_one.put(f"/api/lorebooks/{book['id']}", json={"name": "Vellmar", "entry_limit": 100})

        # An entry deleted through one is gone from two's next reply.
        assert api_one.delete(f"/api/lorebooks/{book['id']}/entries/{entry['id']}").status_code == 204
        sent = _reply(api_two, models, chat_id, "Where is the dragon?")
        assert "dragons left" not in sent and "sleep under" not in sent

        # Detached through one: two sends none of it (links are read every turn, never held).
        assert api_one.put(f"/api/chats/{chat_id}/lorebooks", json={"book_ids": []}).status_code == 200
        assert "harbour of Vellmar is frozen" not in _reply(api_two, models, chat_id, "The harbour.")


def test_a_deleted_book_s_id_given_to_a_new_book_is_not_served_from_the_cache(two_servers, models):
    """On PostgreSQL ids are never given again; the stamp's creation time covers SQLite, where they
    are (tests/integration/test_lore_cache.py); here: a book deleted through one, another book
    attached through one, two sends the new book's entries only."""
    one, two = two_servers
    with one.client() as api_one, two.client() as api_two:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]
        old = api_one.post("/api/lorebooks", json={"name": "Old", "is_global": True}).json()
        api_one.post(
            f"/api/lorebooks/{old['id']}/entries", json={"keys": ["gate"], "content": "The old gate."}
        )
        assert "The old gate." in _reply(api_two, models, chat_id, "At the gate.")
        assert api_one.delete(f"/api/lorebooks/{old['id']}").status_code == 204
        new = api_one.post("/api/lorebooks", json={"name": "New", "is_global": True}).json()
        api_one.post(
            f"/api/lorebooks/{new['id']}/entries", json={"keys": ["gate"], "content": "The new gate."}
        )
        sent = _reply(api_two, models, chat_id, "At the gate again.")
        assert "The new gate." in sent and "The old gate." not in sent


def test_two_servers_saving_one_book_at_once_give_it_two_versions(migrated_postgres_url):
    """Both transactions read the book at version 0 before either writes: each save still adds one
    (a version written twice would keep a server's cache on the first save's entries for good)."""
    engine = create_engine(migrated_postgres_url)
    try:
        with Session(engine) as session:
            book_id = lore.create_book(session, "Shared").id
            session.commit()
        with Session(engine) as a, Session(engine) as b:
            # Each holds the row it read (as a request does between its read and its write).
            read_by_a, read_by_b = lore.get_book(a, book_id), lore.get_book(b, book_id)
            assert read_by_a.version == read_by_b.version == 0
            lore.save_entry(a, book_id, {"keys": ["x"], "content": "From server one."})
            a.commit()
            lore.save_entry(b, book_id, {"keys": ["y"], "content": "From server two."})
            b.commit()
        with Session(engine) as session:
            assert session.get(Lorebook, book_id).version == 2
    finally:
        engine.dispose()


FACT = "Elowen hid the brass key inside the old clock tower, behind the third gear."


def _memory_file(*contents: str) -> bytes:
    chunks = [
        {
            "content": text,
            "messageCount": 2,
            "firstMessageAt": "2026-08-30T10:00:00.000Z",
            "lastMessageAt": "2026-08-30T10:07:00.000Z",
            "createdAt": "2026-08-30T10:08:00.000Z",
        }
        for text in contents
    ]
    return json.dumps(
        {
            "type": "marinara_memory_recall",
            "version": 1,
            "exportedAt": "2026-09-01T12:00:00.000Z",
            "data": {"sourceChat": {"id": "elsewhere", "name": "x", "mode": "roleplay"}, "chunks": chunks},
        }
    ).encode()


def test_a_memory_written_through_one_server_is_found_through_the_other_within_a_second(two_servers, models):
    one, two = two_servers
    with one.client() as api_one, two.client() as api_two:
        add_connection(api_one, models, embedding_model="test-embedding")
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]

        def found(query: str) -> list[str]:
            r = api_two.get(f"/api/chats/{chat_id}/memories/search", params={"q": query})
            assert r.status_code == 200, r.text
            return [hit["content"] for hit in r.json()["results"]]

        # Server two searched the chat before the memory was written (anything it held would be old).
        assert FACT not in found("brass key clock tower")
        imported = api_one.post(
            f"/api/chats/{chat_id}/memories/import",
            files={"file": ("m.marinara.json", _memory_file(FACT, "The tide rolled over the harbour."))},
        )
        assert imported.status_code == 200 and imported.json()["imported"] == 2, imported.text
        wait_for(lambda: FACT in found("brass key clock tower"), timeout=1.0, what="the memory through two")

        # Forgotten through one: gone through two.
        chunk_id = next(
            c["id"] for c in api_one.get(f"/api/chats/{chat_id}/memories").json() if c["content"] == FACT
        )
        assert api_one.delete(f"/api/chats/{chat_id}/memories/{chunk_id}").status_code == 204
        wait_for(
            lambda: FACT not in found("brass key clock tower"), timeout=1.0, what="the forgetting through two"
        )
        # Nothing of the chat's memories is held in two's process: PostgreSQL's index is the one read.
        assert two.services.recall.index.held_chats() == []


def _summary(api, chat_id: int, start: int, end: int, content: str) -> dict:
    r = api.post(
        f"/api/chats/{chat_id}/summaries",
        json={"scope": "range", "start": start, "end": end, "content": content},
    )
    assert r.status_code == 201, r.text
    return r.json()


def test_a_summary_edited_through_one_server_is_sent_by_the_next_reply_through_the_other(two_servers, models):
    """Even when the editing server's clock runs behind the one that wrote the chat's newest entry,
    and the new text has the old one's length (the summaries' stamp sums the edit times)."""
    one, two = two_servers
    with one.client() as api_one, two.client() as api_two:
        add_connection(api_one, models)
        chat_id = new_chat(api_one, [add_character(api_one)["id"]])["id"]
        _reply(api_one, models, chat_id, "We meet at the inn.")
        _reply(api_one, models, chat_id, "We cross the marsh.")
        first = _summary(api_one, chat_id, 1, 2, "Aria met Rowan at the inn by the sea.")
        second = _summary(api_one, chat_id, 3, 4, "Rowan lost his lantern in the marsh.")
        # The first was last edited by a server whose clock runs an hour ahead of server one's.
        with one.engine.begin() as db:
            db.execute(
                text("UPDATE summary_entry SET updated_at = updated_at + interval '1 hour' WHERE id = :id"),
                {"id": first["id"]},
            )
        sent = _reply(api_two, models, chat_id, "Onwards.")  # two holds the chat's entries now
        assert (
            "Aria met Rowan at the inn by the sea." in sent and "Rowan lost his lantern in the marsh." in sent
        )

        edited = "Rowan kept his lantern in the marsh."
        assert len(edited) == len(second["content"])
        r = api_one.patch(f"/api/chats/{chat_id}/summaries/{second['id']}", json={"content": edited})
        assert r.status_code == 200, r.text
        sent = _reply(api_two, models, chat_id, "Onwards again.")
        assert edited in sent and "Rowan lost his lantern" not in sent

        # Deleted through one: gone from two's next reply.
        assert api_one.delete(f"/api/chats/{chat_id}/summaries/{second['id']}").status_code in (200, 204)
        assert edited not in _reply(api_two, models, chat_id, "And on.")


def test_a_memory_made_after_a_reply_through_one_server_is_found_through_the_other(two_servers, models):
    """The way most memories are written: the memory job after a reply on server one chunks the
    chat; server two's search finds the new memory within a second of its being stored."""
    one, two = two_servers
    with one.client() as api_one, two.client() as api_two:
        add_connection(api_one, models, embedding_model="test-embedding")
        chat_id = new_chat(api_one, [add_character(api_one)["id"]], mode="conversation")["id"]
        for day in range(6):
            _reply(api_one, models, chat_id, f"We walk the coast road, day {day}.")
        _reply(api_one, models, chat_id, FACT)
        for day in range(2):  # a memory is five messages: the fact's is made once these are in
            _reply(api_one, models, chat_id, f"We rest at the lighthouse, night {day}.")
        stored = wait_for(
            lambda: [c for c in api_one.get(f"/api/chats/{chat_id}/memories").json() if FACT in c["content"]],
            timeout=30,
            what="server one's memory job storing the fact",
        )
        assert stored
        wait_for(
            lambda: any(
                FACT in hit["content"]
                for hit in api_two.get(
                    f"/api/chats/{chat_id}/memories/search", params={"q": "brass key"}
                ).json()["results"]
            ),
            timeout=1.0,
            what="the memory found through server two",
        )
