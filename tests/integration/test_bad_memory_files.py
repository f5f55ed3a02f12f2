"""Issue 10 finding 5: a memory file whose vectors do not fit their space is refused, and a prompt
source that fails (here: recall over vectors of the wrong size already stored) never fails the
reply nor shows SQL to the user."""

import json

from sqlalchemy import text
from sqlmodel import Session

from app.memory.recall.core.formats import MINILM_SPACE
from app.memory.recall.embedders import MiniLM
from app.memory.recall.models import MemoryChunk, MemoryVector
from app.memory.recall.vectors import pack, sign_code
from app.platform.timeutil import utcnow
from tests.conftest import add_character, add_connection, new_chat, read_sse

SQL_WORDS = ("OperationalError", "SELECT", "sqlite", "Traceback", "vec_distance")


def _memory_file(embedding: list[float], space: str = MINILM_SPACE) -> bytes:
    chunk = {
        "content": "Aria: the key is in the clock tower.",
        "embedding": embedding,
        "embeddingSpaceId": space,
        "messageCount": 2,
        "firstMessageAt": "2026-08-30T10:00:00.000Z",
        "lastMessageAt": "2026-08-30T10:07:00.000Z",
        "createdAt": "2026-08-30T10:08:00.000Z",
    }
    return json.dumps(
        {
            "type": "marinara_memory_recall",
            "version": 1,
            "exportedAt": "2026-09-01T12:00:00.000Z",
            "data": {"sourceChat": {"id": "abc", "name": "x", "mode": "conversation"}, "chunks": [chunk]},
        }
    ).encode()


def _counts(sugo) -> tuple[int, int]:
    with sugo.engine.connect() as db:
        return (
            db.execute(text("select count(*) from memory_chunk")).scalar_one(),
            db.execute(text("select count(*) from memory_vector")).scalar_one(),
        )


def test_a_memory_file_with_vectors_of_the_wrong_size_is_refused(api, sugo):
    chat = new_chat(api, [add_character(api)["id"]])
    for raw in (
        _memory_file([0.1, 0.2, 0.3]),
        _memory_file([0.1] * 10, "openai:text-embedding-3-small:1536"),
    ):
        r = api.post(f"/api/chats/{chat['id']}/memories/import", files={"file": ("m.marinara.json", raw)})
        assert r.status_code == 400, r.text
        assert "embedding has" in r.json()["detail"] and "the file is damaged" in r.json()["detail"]
    page = api.post(
        f"/chats/{chat['id']}/memories/import", files={"file": ("m.marinara.json", _memory_file([0.5] * 3))}
    )
    assert page.status_code == 400 and "embedding has 3 numbers" in page.text
    assert _counts(sugo) == (0, 0)
    ok = api.post(
        f"/api/chats/{chat['id']}/memories/import", files={"file": ("m.json", _memory_file([0.1] * 384))}
    )
    assert ok.status_code == 200 and ok.json()["imported"] == 1


def test_vectors_of_the_wrong_size_already_stored_break_nothing(api, sugo, models):
    """A memory imported before files were checked, its vector of 3 numbers stored under the
    MiniLM space: recall's search failed inside SQLite, which failed memory search (500) and
    named the failure in Peek Prompt with the SQL text. Such a vector is now skipped: the reply is
    written, search, export and Peek Prompt answer, and no SQL reaches the user."""
    MiniLM().embed_query("warm up")  # vectors rank only once the built-in model is loaded
    add_connection(api, models)
    chat = new_chat(api, [add_character(api)["id"]], mode="conversation")
    api.put(f"/api/chats/{chat['id']}/options", json={"settings": {"memory_recall": True}})
    with Session(sugo.engine) as s:
        now = utcnow()
        chunk = MemoryChunk(
            chat_id=chat["id"],
            content="Aria: the key is in the clock tower.",
            message_ids=[],
            message_count=2,
            first_message_at=now,
            last_message_at=now,
            created_at=now,
            status="vectorized",
            embedding_space_id=MINILM_SPACE,
            source_chat_id="abc",
        )
        s.add(chunk)
        s.flush()
        # Written as rows: store_vectors itself now refuses a vector its space's size does not allow.
        s.add(
            MemoryVector(
                chat_id=chat["id"],
                chunk_id=chunk.id,
                space_id=MINILM_SPACE,
                window=0,
                embedding=pack([0.1, 0.2, 0.3]),
                code=sign_code([0.1, 0.2, 0.3]),
            )
        )
        s.commit()
    events = read_sse(
        api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Where is the key?"})
    )
    assert [e for e, _ in events][-1] == "done", events
    shown = [json.dumps(events)]
    for url, params in (
        (f"/api/chats/{chat['id']}/prompt", {}),
        (f"/chats/{chat['id']}/prompt", {}),
        (f"/api/chats/{chat['id']}/memories/search", {"q": "Where is the clock tower key?"}),
        (f"/api/chats/{chat['id']}/memories/export", {}),
    ):
        r = api.get(url, params=params)
        assert r.status_code == 200, (url, r.text[:500])
        shown.append(r.text)
    peek = api.get(f"/api/chats/{chat['id']}/prompt").json()
    notes = peek["notes"] + peek["warnings"]
    assert not any("failed" in n for n in notes), notes
    for answer in shown:
        assert not any(word in answer for word in SQL_WORDS), answer[:2000]
