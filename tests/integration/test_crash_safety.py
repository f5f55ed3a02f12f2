"""Kill -9 in the middle of things: the server, run as its own process, is killed while a reply
streams, a memory rebuild runs and a lorebook import is in flight, then started again on the same
data folder. What was committed is there; what was half done is marked or absent, never half there."""

import json
import threading
import time

import httpx

from tests.conftest import add_character, add_connection, new_chat
from tests.support.model_server import Reply
from tests.support.process import SugoProcess
from tests.support.waiting import wait_for

INTERRUPTED = "Sugo stopped before this reply was finished."
REPLY = " ".join(f"word{i}" for i in range(2000))  # ~30 s at the pace below: still streaming at the kill
MEMORIES = 400  # a rebuild of this many takes several seconds with the built-in model
BOOK_ENTRIES = 10_000  # the most a lorebook file may hold: its import takes a moment


def _memory_file() -> bytes:
    chunks = [
        {
            "content": f"Aria: memory number {i} is about the lighthouse keeper's {i} lamps.",
            "embedding": [((i + d) % 7 - 3) / 10 for d in range(384)],
            "messageCount": 2,
            "firstMessageAt": f"2026-08-{1 + i % 28:02d}T10:{i % 60:02d}:00.000Z",
            "lastMessageAt": f"2026-08-{1 + i % 28:02d}T11:{i % 60:02d}:00.000Z",
            "createdAt": "2026-08-30T10:08:00.000Z",
        }
        for i in range(MEMORIES)
    ]
    return json.dumps(
        {
            "type": "marinara_memory_recall",
            "version": 1,
            "exportedAt": "2026-09-01T12:00:00.000Z",
            "data": {
                "sourceChat": {"id": "a", "name": "x", "mode": "roleplay", "memoryCount": MEMORIES},
                "chunks": chunks,
            },
        }
    ).encode()


def _book_file() -> bytes:
    entries = {
        str(i): {"uid": i, "key": [f"place{i}"], "content": f"Place {i} lies by the sea."}
        for i in range(BOOK_ENTRIES)
    }
    return json.dumps({"entries": entries}).encode()


def _in_background(func) -> threading.Thread:
    def run():
        try:
            func()
        except httpx.HTTPError:
            pass  # the server is killed under the request: that is the point

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_killed_server_keeps_what_was_committed_and_nothing_half_done(tmp_path, models):
    data_dir = tmp_path / "data"
    server = SugoProcess(data_dir).start()
    try:
        with server.client() as api:
            add_connection(api, models)
            char = add_character(api)
            talk = new_chat(api, [char["id"]], name="Talk")
            memory = new_chat(api, [char["id"]], name="Memory")
            r = api.post(
                f"/api/chats/{memory['id']}/memories/import",
                files={"file": ("m.marinara.json", _memory_file())},
            )
            assert r.json()["imported"] == MEMORIES, r.text

            # A rebuild embeds every memory again, a batch per commit; wait for a committed batch.
            assert api.post(f"/api/chats/{memory['id']}/memories/rebuild").json()["running"]
            status = f"/api/chats/{memory['id']}/memories/status"
            wait_for(
                lambda: (api.get(status).json().get("rebuild") or {}).get("done", 0) > 0,
                timeout=60,
                what="the rebuild's first batch",
            )

            # A reply streams slowly; wait until part of it is written to the database.
            models.script(Reply(text=REPLY, chunk_size=6, delay_s=0.02))
            _in_background(
                lambda: api.post(
                    f"/api/chats/{talk['id']}/generate",
                    json={"content": "Tell me about the lighthouse."},
                    timeout=120,
                )
            )
            messages = f"/api/chats/{talk['id']}/messages"

            def streaming_reply():
                return next(
                    (
                        m
                        for m in api.get(messages).json()
                        if m["status"] == "streaming" and len(m["content"]) > 50
                    ),
                    None,
                )

            wait_for(streaming_reply, timeout=30, what="part of the reply stored")

            memories_before = {
                m["id"]: m["content"] for m in api.get(f"/api/chats/{memory['id']}/memories").json()
            }
            reply_before = streaming_reply()
            assert api.get(status).json()["rebuild"]["running"] and reply_before is not None

            # Last, a large lorebook import; the kill comes while it is parsed or written (it takes
            # seconds), or, on a fast machine, just after: either way the book is whole or absent.
            book_sent = threading.Event()

            def import_book():
                with server.client() as other:
                    other.post(
                        "/api/lorebooks/import",
                        files={"file": ("Harbour.json", book)},
                        extensions={
                            "trace": lambda name, info: (
                                name == "http11.send_request_body.complete" and book_sent.set()
                            )
                        },
                    )

            book = _book_file()
            importer = _in_background(import_book)
            assert book_sent.wait(10)
            time.sleep(0.3)  # for the request to reach the route (not an assertion: any moment is fair)
        server.kill()
        importer.join(10)
    finally:
        server.kill()

    with SugoProcess(data_dir) as again, again.client() as api:
        shown = api.get(f"/api/chats/{talk['id']}/messages").json()
        user = [m for m in shown if m["role"] == "user"]
        assert [m["content"] for m in user] == ["Tell me about the lighthouse."]
        reply = next(m for m in shown if m["id"] == reply_before["id"])
        assert reply["content"].startswith(reply_before["content"]) and REPLY.startswith(reply["content"])
        assert len(reply["content"]) < len(REPLY)
        assert reply["status"] == "partial" and reply["error"] == INTERRUPTED

        memories_after = {
            m["id"]: m["content"] for m in api.get(f"/api/chats/{memory['id']}/memories").json()
        }
        assert memories_after == memories_before and len(memories_after) == MEMORIES

        books = [b for b in api.get("/api/lorebooks").json() if b["name"] == "Harbour"]
        assert books == [] or (len(books) == 1 and books[0]["entry_count"] == BOOK_ENTRIES), books
