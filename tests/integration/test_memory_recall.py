"""Memory Recall storage, embedding and search, with the real built-in model and sqlite-vec."""

import time

from sqlalchemy import text
from sqlmodel import Session, select

from app.chats.models import Message
from app.chats.service import new_message
from app.memory.recall.jobs import embed_chat
from app.memory.recall.models import MemoryChunk
from tests.conftest import add_character, add_connection, new_chat, read_sse

FACT = "My sister Elowen hid the brass key inside the old clock tower, behind the third gear."


def _fill(sugo, chat_id, character_id, n=120, fact_at=20):
    with Session(sugo.engine) as s:
        for i in range(1, n + 1):
            user = i % 2 == 0
            content = (
                FACT
                if i == fact_at
                else (
                    f"We keep walking along the coast road, day {i}."
                    if user
                    else f"The wind picks up over the dunes, hour {i}."
                )
            )
            msg = new_message(
                chat_id, "user" if user else "assistant", "Rowan" if user else "Aria", [content]
            )
            msg.character_id = None if user else character_id
            s.add(msg)
        s.commit()
        return [m.id for m in s.exec(select(Message).where(Message.chat_id == chat_id).order_by(Message.id))]


def _chunks(sugo, chat_id):
    with Session(sugo.engine) as s:
        return list(
            s.exec(select(MemoryChunk).where(MemoryChunk.chat_id == chat_id).order_by(MemoryChunk.id))
        )


def test_chunks_of_five_get_vectors_and_a_fact_is_found(api, background_held):
    # Held: on PostgreSQL the start-up memory sweep runs on the worker while the test fills its chat,
    # and chunked them first (CI: added 0 of 24), as the test counts what its own run adds.
    sugo = background_held
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    ids = _fill(sugo, chat["id"], char["id"])
    added, removed, embedded = embed_chat(sugo.services, chat["id"])
    chunks = _chunks(sugo, chat["id"])
    assert added == len(chunks) == embedded > 0 and removed == 0
    assert all(
        c.status == "vectorized" and c.embedding_space_id == "builtin:all-MiniLM-L6-v2:384" for c in chunks
    )
    assert all(len(c.message_ids) == 5 and c.last_message_id == max(c.message_ids) for c in chunks)
    # Every message is in one memory, the window's too (issue 21), but the pinned first message (always
    # in the prompt) and the open end, fewer than five, which waits.
    held = [i for c in chunks for i in c.message_ids]
    assert held == ids[1 : 1 + len(held)] and len(ids) - 1 - len(held) < 5
    # Running the job again changes nothing.
    assert embed_chat(sugo.services, chat["id"]) == (0, 0, 0)

    found = api.get(
        f"/api/chats/{chat['id']}/memories/search", params={"q": "Where did Elowen hide the key?"}
    ).json()
    top = found["results"][0]
    assert FACT in top["content"] and ids[20] in top["message_ids"]
    assert top["similarity"] > 0.25 and found["note"] is None

    # Editing the fact makes the old text unrecallable; the chunk is rebuilt from the new text.
    sugo.services.queue.pause()  # the sync the edit schedules would otherwise do this first
    api.patch(
        f"/api/chats/{chat['id']}/messages/{ids[20]}", json={"content": "We rested by the harbour wall."}
    )
    added, removed, _ = embed_chat(sugo.services, chat["id"])
    sugo.services.queue.resume()
    assert removed >= 1 and added >= 1
    assert not any("Elowen" in c.content for c in _chunks(sugo, chat["id"]))
    again = api.get(f"/api/chats/{chat['id']}/memories/search", params={"q": "Elowen brass key"}).json()
    assert not any("Elowen" in r["content"] for r in again["results"])

    # Deleting the chat leaves no chunk and no vector rows.
    api.delete(f"/api/chats/{chat['id']}")
    with sugo.engine.connect() as db:
        assert db.execute(text("select count(*) from memory_chunk")).scalar_one() == 0
        assert db.execute(text("select count(*) from memory_vector")).scalar_one() == 0


def test_hidden_messages_are_never_chunked(api, sugo):
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    ids = _fill(sugo, chat["id"], char["id"])
    api.patch(f"/api/chats/{chat['id']}/messages/{ids[20]}", json={"hidden": True})
    embed_chat(sugo.services, chat["id"])
    assert not any(ids[20] in c.message_ids for c in _chunks(sugo, chat["id"]))


def test_replies_schedule_the_memory_job(api, sugo, models):
    add_connection(api, models)
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    _fill(sugo, chat["id"], char["id"])
    read_sse(api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Onwards."}))
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        chunks = _chunks(sugo, chat["id"])
        if chunks and all(c.status == "vectorized" for c in chunks):
            break
        time.sleep(0.2)
    assert chunks and all(c.status == "vectorized" for c in chunks)


def _wait_vectorized(sugo, chat_id, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunks = _chunks(sugo, chat_id)
        if chunks and all(c.status == "vectorized" for c in chunks):
            return chunks
        time.sleep(0.2)
    raise AssertionError("chunks were not vectorized in time")


def test_a_fact_from_message_20_of_300_is_recalled_into_the_prompt_and_nothing_for_unrelated(
    api, sugo, models
):
    add_connection(api, models, context_size=16384)
    char = add_character(api)
    chat = new_chat(api, [char["id"]], mode="conversation")
    _fill(sugo, chat["id"], char["id"], n=300, fact_at=20)
    read_sse(
        api.post(
            f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Let us rest a while."}
        )
    )
    _wait_vectorized(sugo, chat["id"])

    read_sse(
        api.post(
            f"/api/chats/{chat['id']}/generate",
            json={"action": "send", "content": "Where did Elowen hide the brass key?"},
        )
    )
    sent = models.last_request.json["messages"]
    memories = [m["content"] for m in sent if m["content"].startswith("<memories>")]
    assert len(memories) == 1 and FACT in memories[0]
    # The memory sits just above the newest turns, never in the cached system prefix.
    assert (
        FACT not in sent[0]["content"]
        and sent.index(next(m for m in sent if m["content"] == memories[0])) > 1
    )
    peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
    assert any(n.startswith("Memory Recall: recalled") for n in peek["notes"])

    read_sse(
        api.post(
            f"/api/chats/{chat['id']}/generate",
            json={"action": "send", "content": "What is the capital city of Mongolia?"},
        )
    )
    assert not any(m["content"].startswith("<memories>") for m in models.last_request.json["messages"])
    peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
    assert any(n.startswith("Memory Recall: nothing recalled") for n in peek["notes"])


def test_recall_is_off_for_roleplay_by_default_and_can_be_turned_on(api, sugo, models):
    add_connection(api, models, context_size=16384)
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    _fill(sugo, chat["id"], char["id"])
    embed_chat(sugo.services, chat["id"])
    read_sse(
        api.post(
            f"/api/chats/{chat['id']}/generate",
            json={"action": "send", "content": "Where did Elowen hide the key?"},
        )
    )
    assert not any(m["content"].startswith("<memories>") for m in models.last_request.json["messages"])
    api.put(f"/api/chats/{chat['id']}/options", json={"settings": {"memory_recall": True}})
    read_sse(
        api.post(
            f"/api/chats/{chat['id']}/generate",
            json={"action": "send", "content": "Where did Elowen hide the key?"},
        )
    )
    assert any(FACT in m["content"] for m in models.last_request.json["messages"])


def test_a_fact_at_the_tail_of_a_long_chunk_is_still_found(api, sugo):
    """all-MiniLM-L6-v2 reads 256 word pieces; five long roleplay messages are far more. The fact
    sits at the very end of the chunk's last message and must still be found."""
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    filler = (
        "The caravan creaked on through the grey afternoon while the drivers argued about the price "
        "of salt, the weather, and the road ahead. "
    ) * 12  # ~260 words per message
    with Session(sugo.engine) as s:
        for i in range(1, 121):
            user = i % 2 == 0
            content = filler + (
                " At last Rowan admitted that the silver compass was buried under the willow."
                if i == 10
                else ""
            )
            msg = new_message(
                chat["id"], "user" if user else "assistant", "Rowan" if user else "Aria", [content]
            )
            s.add(msg)
        s.commit()
    embed_chat(sugo.services, chat["id"])
    chunk = next(c for c in _chunks(sugo, chat["id"]) if "silver compass" in c.content)
    assert chunk.content.rstrip().endswith("buried under the willow.") and len(chunk.content.split()) > 1000
    found = api.get(
        f"/api/chats/{chat['id']}/memories/search", params={"q": "Where is the silver compass buried?"}
    ).json()
    assert found["results"][0]["chunk_id"] == chunk.id
    assert found["results"][0]["similarity"] > 0.4  # above the 0.25 recall threshold, with room


def test_memories_export_import_forget_clear_rebuild(api, sugo):
    import json as _json

    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    _fill(sugo, chat["id"], char["id"])
    embed_chat(sugo.services, chat["id"])
    listed = api.get(f"/api/chats/{chat['id']}/memories").json()
    assert listed and all(m["status"] == "vectorized" for m in listed)

    exported = api.get(f"/api/chats/{chat['id']}/memories/export")
    assert exported.headers["content-disposition"].endswith('-memory-recall.marinara.json"')
    doc = exported.json()
    assert doc["type"] == "marinara_memory_recall" and doc["data"]["sourceChat"]["memoryCount"] == len(listed)
    assert len(doc["data"]["chunks"][0]["embedding"]) == 384

    other = new_chat(api, [char["id"]], name="Elsewhere")
    result = api.post(
        f"/api/chats/{other['id']}/memories/import", files={"file": ("m.marinara.json", exported.content)}
    ).json()
    assert result == {"imported": len(listed), "skipped": 0, "queued": 0, "linked": 0}
    again = api.post(
        f"/api/chats/{other['id']}/memories/import", files={"file": ("m.json", exported.content)}
    ).json()
    assert again == {"imported": 0, "skipped": len(listed), "queued": 0, "linked": 0}
    # Imported vectors are usable as they are: the fact is found in the other chat.
    found = api.get(
        f"/api/chats/{other['id']}/memories/search", params={"q": "Where did Elowen hide the key?"}
    ).json()
    assert FACT in found["results"][0]["content"] and found["results"][0]["similarity"] > 0.25

    # A Marinara file whose vectors are in another space is queued for embedding.
    doc["data"]["chunks"] = [
        {
            **doc["data"]["chunks"][0],
            "content": "Aria: A new memory.",
            "embedding": [0.1] * 1536,
            "embeddingSpaceId": "openai/text-embedding-3-small/x",
        }
    ]
    queued = api.post(
        f"/api/chats/{other['id']}/memories/import", files={"file": ("x.marinara", _json.dumps(doc))}
    ).json()
    assert queued == {"imported": 1, "skipped": 0, "queued": 1, "linked": 0}
    assert (
        api.post(f"/api/chats/{other['id']}/memories/import", files={"file": ("bad.json", b"[]")}).status_code
        == 400
    )

    first = listed[0]["id"]
    assert api.delete(f"/api/chats/{chat['id']}/memories/{first}").status_code == 204
    assert first not in [m["id"] for m in api.get(f"/api/chats/{chat['id']}/memories").json()]
    assert api.post(f"/api/chats/{chat['id']}/memories/rebuild").json()["total"] == len(listed) - 1
    deadline = time.monotonic() + 60
    while (status := api.get(f"/api/chats/{chat['id']}/memories/status").json())["rebuild"]["running"]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert (
        status["rebuild"]["done"] == len(listed) - 1 and status["statuses"]["vectorized"] == len(listed) - 1
    )
    assert api.delete(f"/api/chats/{chat['id']}/memories").json() == {"removed": len(listed) - 1}
    assert len(api.get(f"/api/chats/{chat['id']}/messages").json()) == 121  # messages untouched


def test_malformed_memory_files_change_nothing(api, sugo):
    import json as _json

    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    good = {
        "type": "marinara_memory_recall",
        "version": 1,
        "exportedAt": "2026-09-01T12:00:00.000Z",
        "data": {
            "sourceChat": {"id": "abc", "name": "x", "mode": "roleplay", "memoryCount": 2},
            "chunks": [
                {
                    "content": "Aria: fine",
                    "embedding": [0.1] * 384,
                    "messageCount": 5,
                    "firstMessageAt": "2026-08-30T10:00:00.000Z",
                    "lastMessageAt": "2026-08-30T10:07:00.000Z",
                    "createdAt": "2026-08-30T10:08:00.000Z",
                },
                {"content": "Aria: broken", "embedding": [0.1, float("inf")]},
            ],
        },
    }
    cases = [
        (_json.dumps(good).encode(), "NaN or infinity"),
        (_json.dumps({**good, "type": "marinara_lorebook"}).encode(), "not a Memory Recall export"),
        (_json.dumps({**good, "version": 2}).encode(), "version 1"),
        (b"\x00not json", "not a JSON"),
        (b" " * (50 * 1024 * 1024), "50.0 MB"),
    ]
    for raw, words in cases:
        r = api.post(f"/api/chats/{chat['id']}/memories/import", files={"file": ("m.marinara.json", raw)})
        assert r.status_code == 400 and words in r.json()["detail"], (words, r.text[:200])
    assert api.get(f"/api/chats/{chat['id']}/memories").json() == []


def test_the_search_index_follows_deletions_and_new_vectors(api, sugo):
    """The sign bits kept in memory must follow forgets, edits and new chunks, and a sweep's pruning."""
    from app.memory.recall.jobs import sweep

    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    ids = _fill(sugo, chat["id"], char["id"])
    embed_chat(sugo.services, chat["id"])

    def top(q):
        return api.get(f"/api/chats/{chat['id']}/memories/search", params={"q": q}).json()["results"][0]

    found = top("Where did Elowen hide the brass key?")
    assert FACT in found["content"]
    api.delete(f"/api/chats/{chat['id']}/memories/{found['chunk_id']}")
    assert all(
        FACT not in r["content"]
        for r in api.get(
            f"/api/chats/{chat['id']}/memories/search", params={"q": "Elowen brass key clock tower"}
        ).json()["results"]
    )
    sweep(sugo.services)  # prunes the tombstones: the index must notice it missed none
    # A new fact, in new messages, is found by the same (kept) index.
    with Session(sugo.engine) as s:
        for i in range(160):  # the fact must leave the live window
            text = (
                "Mirela buried the silver compass under the old willow." if i == 3 else f"We rest, hour {i}."
            )
            s.add(
                new_message(
                    chat["id"], "user" if i % 2 else "assistant", "Rowan" if i % 2 else "Aria", [text]
                )
            )
        s.commit()
    embed_chat(sugo.services, chat["id"])
    assert "silver compass" in top("Where is the silver compass buried?")["content"]
    assert len(ids) == 121
