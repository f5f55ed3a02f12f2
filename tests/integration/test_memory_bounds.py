"""Issue 21 (20): what the server keeps in memory while it runs stays within a bound however many
distinct inputs it meets. Each cache that could grow with the data is fed more than its bound (the bound
lowered for the test where the real one is large) and checked to hold no more than it, while what the
request in hand needs is still held.

The memory figure itself (RSS over 200 replies) is bench/memory_use.py's, not a test's: a threshold on RSS
would depend on the machine."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import text
from sqlmodel import Session

from app.lore import prompting
from app.memory.recall import index as sign_index
from app.memory.recall.core import lexical
from app.memory.recall.embedders import VectorSizes
from app.memory.recall.runtime import RecallRuntime

CODE_BYTES = 48  # 384 sign bits


def _books(api, count: int, entries: int) -> None:
    """`count` lorebooks of `entries` entries each."""
    for b in range(count):
        book = api.post("/api/lorebooks", json={"name": f"Book {b}"}).json()
        for e in range(entries):
            r = api.post(
                f"/api/lorebooks/{book['id']}/entries",
                json={"keys": [f"key{b}x{e}"], "content": f"Lore {b}.{e}"},
            )
            assert r.status_code == 201, r.text


def test_compiled_lorebooks_stay_within_their_entry_budget(api, sugo, monkeypatch):
    monkeypatch.setattr(prompting, "MAX_HELD_ENTRIES", 30, raising=False)
    _books(api, 12, 10)
    with sugo.engine.connect() as conn:
        versions = [tuple(row) for row in conn.execute(text("select id, version from lorebook order by id"))]
    books = sugo.services.lorebooks
    with Session(sugo.engine) as session:
        for pair in versions:  # twelve chats, one book each
            _, entries, _ = books.load(session, [pair], char="Aria", user="Rowan")
            assert len(entries) == 10
            assert pair[0] in books.held_books() and len(books.held_books()) <= 3, books.held_books()
        # One chat with all twelve: a scan gets every book it needs, past the budget...
        _, entries, compiled = books.load(session, versions, char="Aria", user="Rowan")
        assert len(entries) == 120 and sorted(compiled) == [v[0] for v in versions]
        # ...and the next scan lets the others go.
        books.load(session, versions[:1], char="Aria", user="Rowan")
        assert versions[0][0] in books.held_books() and len(books.held_books()) <= 3, books.held_books()


def _vectors(sugo, chats: int, windows: int) -> None:
    """`windows` stored windows (random sign bits) for each of `chats` chats, straight into SQL."""
    rng = os.urandom
    with sugo.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")  # the chunks and chats they would name are not needed
        rows = [
            (chat, chat * 10_000 + w, "test:space", b"\0" * 4 * 384, rng(CODE_BYTES))
            for chat in range(1, chats + 1)
            for w in range(windows)
        ]
        conn.exec_driver_sql(
            "INSERT INTO memory_vector (chat_id, chunk_id, space_id, window, embedding, code) VALUES (?, ?, ?, 0, ?, ?)",
            rows,
        )
        conn.commit()
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")


@pytest.mark.sqlite_only
def test_the_sign_bit_index_stays_within_its_window_budget(sugo, monkeypatch):
    monkeypatch.setattr(sign_index, "MAX_HELD_WINDOWS", 3_000, raising=False)
    _vectors(sugo, chats=10, windows=1_000)  # room for 1,024 windows each
    held = sign_index.SignIndex()
    with Session(sugo.engine) as session:
        for chat in range(1, 11):
            vector_ids, _ = held.nearest_windows(session, chat, "test:space", os.urandom(CODE_BYTES), limit=5)
            assert len(vector_ids) >= 5  # the chat searched is held and answers
            assert chat in held.held_chats() and len(held.held_chats()) <= 2, held.held_chats()


def test_long_words_never_enter_the_stem_cache_and_short_ones_stay_within_it():
    cache = getattr(lexical, "_cached_stem", lexical.stem)  # the memo of stems
    cache.cache_clear()
    for i in range(2_000):  # a pasted picture's base64, split by nothing a tokenizer splits on
        lexical.stem(f"{i:05d}" + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhf" * 200)
    assert cache.cache_info().currsize == 0
    for i in range(70_000):
        lexical.stem(f"lantern{i}")
    assert cache.cache_info().currsize <= getattr(lexical, "STEM_CACHE_WORDS", 65_536)
    assert lexical.stem("adoptions") == "adopt"


def test_the_vector_sizes_seen_stay_within_their_bound_and_belong_to_one_app(sugo):
    """The size each embedding server gave is the app's (RecallRuntime), bounded; a second app in the
    same process knows none of the first's."""
    sizes = VectorSizes(size=4)
    for n in range(10):
        sizes.seen(f"http://127.0.0.1:{9000 + n}/v1", "embed", 8 + n)
    assert [sizes.get(f"http://127.0.0.1:{9000 + n}/v1", "embed") for n in range(10)] == [0] * 6 + [
        14,
        15,
        16,
        17,
    ]
    sugo.services.recall.sizes.seen("http://127.0.0.1:9999/v1", "embed", 16)
    other = RecallRuntime()
    try:
        assert other.sizes.get("http://127.0.0.1:9999/v1", "embed") == 0
    finally:
        other.close()
