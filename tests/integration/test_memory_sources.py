"""Embedding sources for Memory Recall: which one a chat uses, switching models, Rebuild with
progress and Stop, and a file in Marinara Engine's exact shape. Real HTTP, real built-in models."""

import json
import threading
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from app.memory.recall.embedders import MiniLM
from app.memory.recall.jobs import embed_chat
from tests.conftest import add_character, add_connection, new_chat
from tests.integration.test_memory_recall import FACT, _chunks, _fill
from tests.support.waiting import wait_for

MINILM = "builtin:all-MiniLM-L6-v2:384"
E5 = "builtin:multilingual-e5-small:384"


def _status(api, chat_id):
    return api.get(f"/api/chats/{chat_id}/memories/status").json()


def _spaces(sugo, chat_id):
    with sugo.engine.connect() as db:
        rows = db.execute(
            text("select space_id, count(*) from memory_vector where chat_id = :c group by space_id"),
            {"c": chat_id},
        ).all()
    return dict(rows)


def _wait_rebuild(api, chat_id, timeout=120):
    deadline = time.monotonic() + timeout
    while (status := _status(api, chat_id))["rebuild"]["running"]:
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    return status


def test_precedence_chat_connection_then_defaults_then_builtin(api, sugo, models):
    plain = add_connection(api, models)
    char = add_character(api)
    chat = new_chat(api, [char["id"]], connection_id=plain["id"])
    assert _status(api, chat["id"])["source"] == {
        "kind": "builtin",
        "model": "all-MiniLM-L6-v2",
        "origin": "the built-in model",
        "space": MINILM,
    }

    lender = add_connection(
        api, models, name="Embeddings box", api_key="sk-lender", embedding_model="test-embedding"
    )
    assert (
        api.put("/api/connections/defaults", json={"embeddings": f"connection:{lender['id']}"}).status_code
        == 200
    )
    source = _status(api, chat["id"])["source"]
    assert (source["kind"], source["model"], source["origin"]) == (
        "openai",
        "test-embedding",
        "Connections → Defaults",
    )
    # A connection without an embedding model cannot be the default.
    refused = api.put("/api/connections/defaults", json={"embeddings": f"connection:{plain['id']}"})
    assert refused.status_code == 400 and "embedding model" in refused.json()["detail"]

    # The chat's connection borrows the lender's key and address for its own embedding model.
    api.put(
        f"/api/connections/{plain['id']}",
        json={**plain, "embedding_model": "other-embedding", "embedding_connection_id": lender["id"]},
    )
    assert (
        _status(api, chat["id"])["source"]["origin"]
        == "the chat's connection “Test model” (key and address of “Embeddings box”)"
    )
    _fill(sugo, chat["id"], char["id"])
    models.requests.clear()
    embed_chat(sugo.services, chat["id"])
    calls = [r for r in models.requests if r.path.endswith("/embeddings")]
    assert calls and all(r.json["model"] == "other-embedding" for r in calls)
    assert all(r.headers.get("authorization") == "Bearer sk-lender" for r in calls)
    assert set(_spaces(sugo, chat["id"])) == {"openai:other-embedding:384"}

    # The chat's own pick of a built-in model wins over everything.
    api.put(
        f"/api/chats/{chat['id']}/options", json={"settings": {"builtin_embedding": "multilingual-e5-small"}}
    )
    assert _status(api, chat["id"])["source"]["space"] == E5
    # The API never sends a key back.
    assert "sk-lender" not in api.get("/api/connections").text


def test_switching_models_marks_old_memories_rebuild_moves_them_and_spaces_never_mix(api, sugo):
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    _fill(sugo, chat["id"], char["id"])
    embed_chat(sugo.services, chat["id"])
    count = len(_chunks(sugo, chat["id"]))
    assert _status(api, chat["id"])["other_space"] == 0 and set(_spaces(sugo, chat["id"])) == {MINILM}

    api.put(
        f"/api/chats/{chat['id']}/options", json={"settings": {"builtin_embedding": "multilingual-e5-small"}}
    )
    status = _status(api, chat["id"])
    assert status["source"]["space"] == E5 and status["other_space"] == count
    # Searching now uses E5 alone: the MiniLM vectors are not compared with an E5 query.
    found = api.get(
        f"/api/chats/{chat['id']}/memories/search", params={"q": "Where did Elowen hide the key?"}
    ).json()
    assert found["results"] and all(r["similarity"] is None for r in found["results"])
    assert FACT in found["results"][0]["content"]  # text matching still finds it
    page = api.get(f"/chats/{chat['id']}/memories").text
    assert f"{count} memories were embedded with another model" in page and "Other model" in page

    assert api.post(f"/api/chats/{chat['id']}/memories/rebuild").json()["total"] == count
    status = _wait_rebuild(api, chat["id"])
    assert status["rebuild"] == {
        "status": "done",
        "total": count,
        "done": count,
        "running": False,
        "stopped": False,
        "error": None,
        "making": False,
    }
    assert status["other_space"] == 0 and set(_spaces(sugo, chat["id"])) == {E5}
    found = api.get(
        f"/api/chats/{chat['id']}/memories/search", params={"q": "Where did Elowen hide the key?"}
    ).json()
    assert FACT in found["results"][0]["content"] and found["results"][0]["similarity"] is not None


def test_rebuild_can_be_stopped_and_what_it_did_not_reach_keeps_its_vectors(api, sugo, models):
    """Stop lands while the second batch is at the model (held there, not raced against a delay: under
    load a delay let the rebuild end before Stop came); that batch is kept, no other is asked."""
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    _fill(sugo, chat["id"], char["id"], n=260)
    embed_chat(sugo.services, chat["id"])
    count = len(_chunks(sugo, chat["id"]))
    assert count > 32  # more than two rebuild batches
    conn = add_connection(api, models, embedding_model="test-embedding")
    api.put(f"/api/chats/{chat['id']}/options", json={"connection_id": conn["id"]})
    since = len(models.requests)
    asked = lambda: sum(1 for r in list(models.requests)[since:] if r.path.endswith("/embeddings"))  # noqa: E731
    first = models.embedding_gate = threading.Event()
    try:
        api.post(f"/api/chats/{chat['id']}/memories/rebuild")
        wait_for(lambda: asked() == 1, what="the first batch at the model")
        second = models.embedding_gate = threading.Event()
        first.set()
        wait_for(lambda: asked() == 2, what="the second batch at the model")
        assert _status(api, chat["id"])["rebuild"]["done"] == 16
        assert api.post(f"/api/chats/{chat['id']}/memories/rebuild/stop").json() == {"stopping": True}
        models.embedding_gate = None
        second.set()
        status = _wait_rebuild(api, chat["id"])
    finally:
        models.embedding_gate = None
        first.set()
    rebuild = status["rebuild"]
    assert rebuild["stopped"] and rebuild["status"] == "stopped" and rebuild["done"] == 32 < count, rebuild
    assert asked() == 2  # no batch after Stop
    spaces = _spaces(sugo, chat["id"])
    assert set(spaces) == {MINILM, "openai:test-embedding:384"}
    assert all(c.status == "vectorized" for c in _chunks(sugo, chat["id"]))
    assert status["other_space"] == count - rebuild["done"]
    page = api.get(f"/chats/{chat['id']}/memories").text
    assert f"Rebuild stopped after {rebuild['done']} of {count}" in page


def test_a_hand_made_file_in_marinaras_exact_shape_imports_with_usable_vectors(api, sugo):
    """Marinara Engine embeds with all-MiniLM-L6-v2 by default and writes one mean vector per chunk,
    with a space id of its own naming (or none in older versions)."""
    char = add_character(api)
    chat = new_chat(api, [char["id"]])
    contents = [
        "Rowan: Where do we sleep tonight?\n\nMirela: The inn at Vellmar has a room.\n\nRowan: Fine.\n\n"
        "Mirela: I will pay.\n\nRowan: Thank you.",
        "Rowan: The lighthouse keeper is called Tobiah.\n\nMirela: He lost an eye in the war.\n\nRowan: Poor man.\n\n"
        "Mirela: He still climbs the stairs each night.\n\nRowan: Brave.",
    ]
    vectors = MiniLM().embed_passages(contents)
    start = datetime(2026, 8, 30, 10, 0, tzinfo=UTC)
    iso = lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.000Z")  # noqa: E731
    doc = {
        "type": "marinara_memory_recall",
        "version": 1,
        "exportedAt": "2026-09-01T12:00:00.000Z",
        "data": {
            "sourceChat": {"id": "abc123", "name": "My RP", "mode": "roleplay", "memoryCount": 2},
            "chunks": [
                {
                    "content": c,
                    "embedding": v,
                    "embeddingSpaceId": sid,
                    "messageCount": 5,
                    "firstMessageAt": iso(start + timedelta(minutes=10 * i)),
                    "lastMessageAt": iso(start + timedelta(minutes=10 * i + 7)),
                    "createdAt": iso(start + timedelta(minutes=10 * i + 8)),
                }
                for i, (c, v, sid) in enumerate(
                    zip(contents, vectors, [None, "local/all-MiniLM-L6-v2/default"], strict=True)
                )
            ],
        },
    }
    raw = json.dumps(doc).encode()
    result = api.post(
        f"/api/chats/{chat['id']}/memories/import", files={"file": ("My RP-memory-recall.marinara.json", raw)}
    )
    assert result.json() == {"imported": 2, "skipped": 0, "queued": 0, "linked": 0}, result.text
    listed = api.get(f"/api/chats/{chat['id']}/memories").json()
    assert [m["content"] for m in listed] == contents and all(m["status"] == "vectorized" for m in listed)
    assert listed[0]["first_message_at"].startswith("2026-08-30T10:00:00") and listed[0]["imported"]
    found = api.get(
        f"/api/chats/{chat['id']}/memories/search", params={"q": "who keeps the lighthouse"}
    ).json()
    assert found["results"][0]["content"] == contents[1] and found["results"][0]["similarity"] > 0.4
    assert api.post(
        f"/api/chats/{chat['id']}/memories/import", files={"file": ("x.marinara", raw)}
    ).json() == {"imported": 0, "skipped": 2, "queued": 0, "linked": 0}


def test_an_answer_that_finds_the_rebuild_ended_brings_the_memory_list(tmp_path, models):
    """The root of a browser flake: Stop landed as the rebuild's batch in hand finished, so its answer
    showed "Rebuild stopped" and polled no more, yet it brought the status block alone: the list kept
    its "Other model" badges for memories the rebuild had reached. Any answer that finds nothing
    running brings the list; so does Rebuild's own when the work ran before it was written."""
    from tests.support.live import LiveSugo

    with LiveSugo(tmp_path / "data", start_scheduler=False) as sugo, sugo.client() as api:
        old = add_connection(api, models, name="Old", embedding_model="embed-old")
        new = add_connection(api, models, name="New", embedding_model="embed-new")
        char = add_character(api)
        chat = new_chat(api, [char["id"]], connection_id=old["id"], mode="conversation")
        _fill(sugo, chat["id"], char["id"], n=100)
        embed_chat(sugo.services, chat["id"])
        api.put(f"/api/chats/{chat['id']}/options", json={"connection_id": new["id"]})
        assert "Other model" in api.get(f"/chats/{chat['id']}/memories").text
        hx = {"HX-Request": "true"}

        # No scheduler: the rebuild runs inside its request, and is over when its answer is written.
        r = api.post(f"/chats/{chat['id']}/memories/rebuild", headers=hx)
        status, _, rest = r.text.partition('id="memory-list"')
        assert "Rebuilt" in status and "hx-get" not in status  # the result; no poll follows
        assert rest.startswith(' hx-swap-oob="true"') and "Vectorized" in rest and "Other model" not in rest

        # Stop arriving after the end (as the batch in hand finished) answers the same way.
        api.put(f"/api/chats/{chat['id']}/options", json={"connection_id": old["id"]})
        sugo.services.recall.rebuilds.start(sugo.services, chat["id"])
        r = api.post(f"/chats/{chat['id']}/memories/rebuild/stop", headers=hx)
        status, _, rest = r.text.partition('id="memory-list"')
        assert 'id="rebuild-result"' in status and "hx-get" not in status
        assert rest.startswith(' hx-swap-oob="true"') and "Vectorized" in rest and "Other model" not in rest
