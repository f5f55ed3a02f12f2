"""Memory Recall on PostgreSQL beside SQLite: the word index (memory_words, BM25 computed as FTS5's
bm25() computes it) and the vectors (memory_embedding, pgvector's HNSW index per space) are written
with their chunks, searched and removed with them, and rank as SQLite ranks the same memories."""

from __future__ import annotations

import hashlib
import math
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import event, text
from sqlmodel import Session, col, delete, select

from app.chats.models import Chat
from app.memory.recall import index, service
from app.memory.recall.core.lexical import chat_weights, query_terms
from app.memory.recall.embedders import EmbeddingSpace
from app.memory.recall.index import SignIndex
from app.memory.recall.models import MemoryChunk, MemoryVector
from app.memory.recall.vectors import pack, store_vectors, unpack
from app.platform.db import make_engine
from app.platform.migrate import alembic_config, upgrade_database

WHEN = datetime(2026, 3, 1, 12, tzinfo=UTC)
DIMS = 64

# A small corpus of a chat's memories: names, places and things repeated across them, so words
# differ in rarity and chunks in length (BM25's idf and length terms both matter).
PEOPLE = ("Aria", "Rowan", "Melanie", "Tom", "Ines", "Aldous", "Pepper", "Gina")
THINGS = (
    "lighthouse", "lantern", "roses", "beagle", "market", "bread", "dice", "coins", "lute", "ballad",
    "ship", "winter", "pollen", "mare", "stables", "bakery", "windowsill", "seamstress", "harbour",
)  # fmt: skip
QUERIES = (
    "Where did Aria hide the lantern?",
    "What did Tom buy at the market?",
    "Who owes Rowan coins from the dice game?",
    "the beagle and the roses",
    "Melanie lighthouse winter ship",
    "bread",
    "Gina Pepper stables mare harbour",
)


def _corpus(n: int = 60) -> list[str]:
    texts = []
    for i in range(n):
        words = [PEOPLE[(i * 3) % len(PEOPLE)], PEOPLE[(i * 5 + 1) % len(PEOPLE)]]
        words += [THINGS[(i * k + k) % len(THINGS)] for k in range(1, 2 + i % 5)]
        filler = " and then we talked for a while" * (i % 4)
        texts.append(
            f"{words[0]}: I saw {' and '.join(words[1:])} near the {THINGS[i % len(THINGS)]}.{filler}"
        )
    return texts


class BagOfWords:
    """A deterministic embedder: each word hashed to one of DIMS dimensions, normalised, so texts
    sharing words are close; no model to load."""

    space = EmbeddingSpace("builtin", "test-bag-of-words", DIMS)
    max_words = 96
    threshold = 0.0
    search_floor = 0.0

    def _vector(self, text_: str) -> list[float]:
        v = [0.0] * DIMS
        for word in re.findall(r"\w+", text_.lower()):
            v[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIMS] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    def embed_passages(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text_: str) -> list[float]:
        return self._vector(text_)


def _fill(engine, texts: list[str], *, chats: int = 2) -> list[int]:
    """`texts` as the memories of a new chat (with another chat's memories beside them, so the index
    holds more than one chat), embedded; returns the chat's id."""
    embedder = BagOfWords()
    with Session(engine) as s:
        made = [Chat(name=f"Chat {n}") for n in range(chats)]
        s.add_all(made)
        s.flush()
        for n, chat in enumerate(made):
            for i, content in enumerate(texts if n == 0 else texts[::3]):
                _add_memory(s, chat.id, i, content, embedder.embed_passages([content]))
        s.commit()
        return [c.id for c in made]


def _add_memory(s: Session, chat_id: int, i: int, content: str, vectors: list[list[float]]) -> None:
    """One memory (said `i` hours after WHEN) with these windows' vectors."""
    at = WHEN + timedelta(hours=i)
    chunk = MemoryChunk(
        chat_id=chat_id, content=content, message_ids=[], message_count=1,
        first_message_at=at, last_message_at=at, status="vectorized",
        embedding_space_id=BagOfWords.space.id,
    )  # fmt: skip
    s.add(chunk)
    s.flush()
    store_vectors(s, chat_id, chunk.id, BagOfWords.space.id, vectors)


def _search(engine, chat_id: int, query: str, *, k: int = 10) -> list[tuple[int, float]]:
    with Session(engine) as s, ThreadPoolExecutor(2) as threads:
        hits, note = service.search(s, chat_id, query, BagOfWords(), bits=SignIndex(), threads=threads, k=k)
    assert note is None
    return [(h.chunk.id, h.score) for h in hits]


def _word_scores(engine, chat_id: int, query: str) -> dict[int, float]:
    """The word pass's BM25 scores, as service._word_pass computes them."""
    with Session(engine) as s:
        freq = index.doc_freq(s, query_terms(query, chat_id))
        searched = {t: f for t, f in freq.items() if f}
        weights = chat_weights(
            searched, chat_chunks=index.chat_chunk_count(s, chat_id), all_chunks=index.chunk_count(s)
        )
        return index.lexical_candidates(s, weights, limit=400, doc_freq=searched)


@pytest.fixture
def both(tmp_path, migrated_postgres_url):
    sqlite = make_engine(tmp_path / "sugo.db")
    upgrade_database(sqlite)
    postgres = make_engine(migrated_postgres_url)
    yield sqlite, postgres
    sqlite.dispose()
    postgres.dispose()


def test_memories_are_written_searched_and_removed_with_their_chunks(database):
    chat_id = _fill(database, _corpus(12))[0]
    found = _search(database, chat_id, "Where did Aria hide the lantern?")
    assert found and all(score > 0 for _, score in found)
    with Session(database) as s:
        first = s.get(MemoryChunk, found[0][0])
        assert "lantern" in first.content.lower() or "aria" in first.content.lower()
        s.exec(delete(MemoryChunk).where(col(MemoryChunk.chat_id) == chat_id))  # type: ignore[call-overload]
        s.commit()
        assert not s.exec(select(MemoryVector).where(MemoryVector.chat_id == chat_id)).all()
        if database.dialect.name == "postgresql":
            for table in ("memory_words", "memory_embedding"):
                left = s.connection().execute(
                    text(f"SELECT count(*) FROM {table} WHERE chat_id = :c"), {"c": chat_id}
                )
                assert left.scalar() == 0, table
            total = s.connection().execute(
                text("SELECT chunks, words FROM memory_word_total WHERE chat_id = :c"), {"c": chat_id}
            )
            assert tuple(total.one()) == (0, 0)
    assert _search(database, chat_id, "Where did Aria hide the lantern?") == []


@pytest.mark.postgres
def test_each_vector_is_held_by_pgvector_exactly_as_stored(migrated_postgres_url):
    engine = make_engine(migrated_postgres_url)
    _fill(engine, _corpus(5), chats=1)
    with Session(engine) as s:
        stored = {v.id: unpack(v.embedding) for v in s.exec(select(MemoryVector))}
        held = (
            s.connection()
            .execute(text("SELECT vector_id, embedding::real[]::float8[] FROM memory_embedding"))
            .all()
        )
        assert {i: list(v) for i, v in held} == stored
        # The space's HNSW index was made with its first vectors.
        name = index.space_index_name(BagOfWords.space.id, DIMS)
        assert s.connection().execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None
    engine.dispose()


@pytest.mark.postgres
def test_the_word_pass_scores_as_fts5_does(both):
    sqlite, postgres = both
    texts = _corpus()
    ids = {name: _fill(engine, texts)[0] for name, engine in (("sqlite", sqlite), ("postgres", postgres))}
    for query in QUERIES:
        on_sqlite = _word_scores(sqlite, ids["sqlite"], query)
        on_postgres = _word_scores(postgres, ids["postgres"], query)
        assert on_sqlite, query
        # The same chunks (ids are given in the same order on both), in the same order, same scores.
        assert list(on_postgres) == list(on_sqlite), query
        for chunk_id, score in on_sqlite.items():
            assert on_postgres[chunk_id] == pytest.approx(score, rel=1e-9), (query, chunk_id)


@pytest.mark.postgres
def test_the_full_search_ranks_as_on_sqlite(both):
    sqlite, postgres = both
    texts = _corpus()
    ids = {name: _fill(engine, texts)[0] for name, engine in (("sqlite", sqlite), ("postgres", postgres))}
    for query in QUERIES:
        on_sqlite = _search(sqlite, ids["sqlite"], query)
        on_postgres = _search(postgres, ids["postgres"], query)
        assert [c for c, _ in on_postgres] == [c for c, _ in on_sqlite], query
        for (_, a), (_, b) in zip(on_sqlite, on_postgres, strict=True):
            assert b == pytest.approx(a, rel=1e-5), query


@pytest.mark.postgres
def test_a_memory_written_through_one_server_is_found_through_another(migrated_postgres_url):
    one, two = make_engine(migrated_postgres_url), make_engine(migrated_postgres_url)
    chat_id = _fill(one, _corpus(8), chats=1)[0]
    assert _search(two, chat_id, "the seamstress in the harbour")  # warm: what two holds of the chat
    with Session(one) as s:
        chunk = MemoryChunk(
            chat_id=chat_id, content="Ines keeps a green parrot called Biscuit.", message_ids=[],
            message_count=1, first_message_at=WHEN, last_message_at=WHEN, status="vectorized",
            embedding_space_id=BagOfWords.space.id,
        )  # fmt: skip
        s.add(chunk)
        s.flush()
        store_vectors(s, chat_id, chunk.id, BagOfWords.space.id, BagOfWords().embed_passages([chunk.content]))
        s.commit()
        new_id = chunk.id
    assert _search(two, chat_id, "Biscuit the parrot")[0][0] == new_id
    one.dispose()
    two.dispose()


@pytest.mark.postgres
def test_the_upgrade_indexes_memories_already_stored(postgres_url):
    engine = make_engine(postgres_url)
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "d4f6a8c0e2b4")
    # Written as the older Sugo wrote them (its model had no word index to fill on PostgreSQL).
    content = "Aria hid the lantern under the stairs."
    with engine.begin() as conn:
        # The chat as that schema holds it: the model's columns added since are not there yet.
        table = sa.Table("chat", sa.MetaData(), autoload_with=conn)
        row = {k: v for k, v in Chat(name="Old").model_dump(exclude={"id"}).items() if k in table.c}
        chat_id = conn.execute(table.insert().values(**row).returning(table.c.id)).scalar()
        chunk_id = conn.execute(
            text(
                "INSERT INTO memory_chunk (chat_id, content, message_ids, fingerprint, message_count, "
                "first_message_at, last_message_at, created_at, status, embedding_space_id) VALUES "
                "(:chat_id, :content, '[]', '', 1, :at, :at, :at, 'vectorized', :space) RETURNING id"
            ),
            {"chat_id": chat_id, "content": content, "at": WHEN, "space": BagOfWords.space.id},
        ).scalar()
        conn.execute(
            text(
                "INSERT INTO memory_vector (chat_id, chunk_id, space_id, \"window\", embedding, code) "
                "VALUES (:chat_id, :chunk_id, :space, 0, :embedding, :code)"
            ),
            {
                "chat_id": chat_id, "chunk_id": chunk_id, "space": BagOfWords.space.id,
                "embedding": pack(BagOfWords().embed_query(content)), "code": b"\0" * 8,
            },
        )  # fmt: skip
    upgrade_database(engine)
    assert [c for c, _ in _search(engine, chat_id, "lantern")] == [chunk_id]
    with engine.connect() as conn:
        name = index.space_index_name(BagOfWords.space.id, DIMS)
        assert conn.execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None
        assert conn.execute(text("SELECT count(*) FROM memory_embedding")).scalar() == 1
    engine.dispose()


@pytest.mark.postgres
def test_memories_copied_in_by_plain_inserts_get_their_words_and_index(migrated_postgres_url):
    """As copy-to-postgres writes them (no app hook runs): the memory sweep's fill finds them."""
    engine = make_engine(migrated_postgres_url)
    with Session(engine) as s:
        chat = Chat(name="Copied")
        s.add(chat)
        s.commit()
        chat_id = chat.id
    content = "Rowan buried the silver compass beneath the old oak."
    with engine.begin() as conn:
        chunk_id = conn.execute(
            MemoryChunk.__table__.insert().returning(MemoryChunk.__table__.c.id),
            {"chat_id": chat_id, "content": content, "message_ids": [], "first_message_at": WHEN,
             "last_message_at": WHEN, "created_at": WHEN, "status": "vectorized", "fingerprint": "",
             "message_count": 1, "embedding_space_id": BagOfWords.space.id},
        ).scalar()  # fmt: skip
        conn.execute(
            MemoryVector.__table__.insert(),
            {"chat_id": chat_id, "chunk_id": chunk_id, "space_id": BagOfWords.space.id, "window": 0,
             "embedding": pack(BagOfWords().embed_query(content)), "code": b"\0" * 8},
        )  # fmt: skip
    assert _word_scores(engine, chat_id, "compass") == {}
    with engine.begin() as conn:
        assert index.fill_postgres_index(conn) == 1
        assert index.fill_postgres_index(conn) == 0  # once only
        name = index.space_index_name(BagOfWords.space.id, DIMS)
        assert conn.execute(text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None
    assert list(_word_scores(engine, chat_id, "compass")) == [chunk_id]
    assert [c for c, _ in _search(engine, chat_id, "the silver compass")] == [chunk_id]
    engine.dispose()


@pytest.mark.postgres
def test_a_large_chats_first_pass_goes_through_the_spaces_hnsw_index(migrated_postgres_url, monkeypatch):
    engine = make_engine(migrated_postgres_url)
    texts = _corpus(40)
    chat_id = _fill(engine, texts, chats=1)[0]
    query = BagOfWords().embed_query(texts[7])
    with Session(engine) as s:
        exact = index.nearest_postgres(s, chat_id, BagOfWords.space.id, query, limit=5)
    monkeypatch.setattr(index, "EXACT_SCAN_CHUNKS", 10)  # the chat's 40 memories count as many now
    statements: list[str] = []

    def sent(conn, cursor, statement, *_):
        statements.append(statement)

    with Session(engine) as s:
        s.connection().execute(text("SET LOCAL enable_seqscan = off"))  # a table this small is read whole
        event.listen(engine, "before_cursor_execute", sent)
        try:
            through_index = index.nearest_postgres(s, chat_id, BagOfWords.space.id, query, limit=5)
        finally:
            event.remove(engine, "before_cursor_execute", sent)
        # The statement as sent, explained with the same values.
        search = statements[-1].replace("%(", ":").replace(")s", "")
        values = {"query": index.vector_text(query), "chat_id": chat_id, "limit": 5}
        plan = "\n".join(s.connection().execute(text("EXPLAIN " + search), values).scalars())
    assert index.space_index_name(BagOfWords.space.id, DIMS) in plan
    # The nearest window (the one holding the query's very words) and its similarity, as exactly found.
    best = max(exact, key=lambda v: exact[v][1])
    assert max(through_index, key=lambda v: through_index[v][1]) == best
    assert through_index[best] == exact[best] and exact[best][1] == pytest.approx(1.0)
    engine.dispose()


def _untied(vector: list[float], i: int) -> list[float]:
    # Nudged apart: texts sharing the same words would tie exactly, and which of two equal windows a
    # LIMIT keeps is PostgreSQL's choice (real embeddings do not tie).
    nudged = [x + (1e-3 * (i + 1) if d == i % DIMS else 0.0) for d, x in enumerate(vector)]
    norm = math.sqrt(sum(x * x for x in nudged))
    return [x / norm for x in nudged]


def _fill_crowded(engine, texts: list[str], windows: int) -> int:
    """A chat whose every memory has `windows` identical windows: its nearest windows crowd into few
    memories, as a long memory's overlapping windows do."""
    embedder = BagOfWords()
    with Session(engine) as s:
        chat = Chat(name="Crowded")
        s.add(chat)
        s.flush()
        for i, content in enumerate(texts):
            _add_memory(s, chat.id, i, content, [_untied(embedder.embed_passages([content])[0], i)] * windows)
        s.commit()
        return chat.id


@pytest.mark.postgres
def test_a_first_ask_of_the_index_that_falls_short_asks_again_for_the_limit(
    migrated_postgres_url, monkeypatch
):
    engine = make_engine(migrated_postgres_url)
    texts = _corpus(40)
    chat_id = _fill_crowded(engine, texts, windows=5)
    query = BagOfWords().embed_query(texts[7])
    monkeypatch.setattr(index, "EXACT_SCAN_CHUNKS", 10)  # through the HNSW index
    asked: list[int] = []

    def enough(found) -> bool:
        asked.append(len(found))
        return len({chunk_id for chunk_id, _ in found.values()}) >= 8

    with Session(engine) as s:
        s.connection().execute(text("SET LOCAL enable_seqscan = off"))
        # 20 windows are 4 memories of 5 windows each: short of 8, so the 60 are asked for.
        found = index.nearest_postgres(
            s, chat_id, BagOfWords.space.id, query, limit=60, first=20, enough=enough
        )
        assert asked == [20] and len(found) == 60
        assert len({chunk_id for chunk_id, _ in found.values()}) == 12
        # Enough from the first ask: that answer stands.
        kept = index.nearest_postgres(
            s, chat_id, BagOfWords.space.id, query, limit=60, first=20, enough=lambda _found: True
        )
        assert len(kept) == 20 and set(kept) <= set(found)
    engine.dispose()


@pytest.mark.postgres
def test_the_shorter_first_ask_ranks_as_the_full_one(migrated_postgres_url, monkeypatch):
    """The best chunks are the first distinct ones of the nearest windows, their similarities the same
    from a shorter list: a search whose first ask held enough ranks as one that asked for all."""
    engine = make_engine(migrated_postgres_url)
    texts = _corpus(60)
    chat_id = _fill_crowded(engine, texts, windows=3)
    monkeypatch.setattr(index, "EXACT_SCAN_CHUNKS", 10)
    monkeypatch.setattr(service, "CANDIDATES_PER_RANKING", 6)
    rankings = {}
    for first in (18, 24, service.NEAREST_WINDOWS):  # 6 memories exactly, a few more, all of them
        monkeypatch.setattr(service, "HNSW_FIRST_WINDOWS", first)
        rankings[first] = [_search(engine, chat_id, q) for q in QUERIES]
    assert rankings[18] == rankings[24] == rankings[service.NEAREST_WINDOWS]
    engine.dispose()
