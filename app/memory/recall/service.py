"""Memory Recall: keep a chat's chunks in step with its messages, embed them, search them."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from sqlmodel import Session, col, delete, func, select

from app.chats import service as chats
from app.chats.models import Message
from app.memory.recall import index
from app.memory.recall.core.chunking import (
    ChunkDraft,
    MessageText,
    StoredChunk,
    chunk_messages,
    embedding_windows,
    missed_messages,
    stale_chunks,
)
from app.memory.recall.core.dates import dates_named, said_on
from app.memory.recall.core.excerpts import Excerpt, excerpt, worth_showing
from app.memory.recall.core.formats import ChunkRecord, MemoryFileError, export_envelope, parse_import
from app.memory.recall.core.lexical import (
    DENSE_WEIGHT,
    NEIGHBOUR_SHARE,
    candidate_terms,
    chat_weights,
    fuse,
    query_terms,
    word_weight,
)
from app.memory.recall.core.recall import TOP_K, Candidate, memory_block, memory_budget, select_memories
from app.memory.recall.embedders import (
    Embedder,
    EmbeddingError,
    EmbeddingSpace,
    ModelStillLoading,
    QueryVectors,
    still_loading,
)
from app.memory.recall.index import ChunkRow, SignIndex
from app.memory.recall.models import MemoryChunk, MemoryVector
from app.memory.recall.vectors import (
    sign_code,
    similarities_by_chunk,
    similarities_by_vector,
    store_vectors,
    unpack,
)
from app.platform.core.downloads import safe_stem
from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import as_utc, utcnow

log = logging.getLogger(__name__)
WINDOW_WORDS = 96
# Picks a chat's embedder with the given session (the search's own connection, on its thread).
ChooseEmbedder = Callable[[Session], Embedder | None]


def _texts(
    session: Session, chat_id: int, ids: list[int] | None = None, *, before: int | None = None
) -> list[MessageText]:
    """Messages the AI could read (visible, not failed), with their active text."""
    stmt = select(Message.id, Message.name, Message.content, Message.created_at).where(
        Message.chat_id == chat_id,
        Message.kind == "message",
        Message.hidden == False,  # noqa: E712
        Message.status != "error",
        Message.status != "streaming",
    )
    if ids is not None:
        stmt = stmt.where(col(Message.id).in_(ids))
    if before is not None:
        stmt = stmt.where(col(Message.id) < before)
    return [MessageText(*row) for row in session.exec(stmt.order_by(Message.id))]


def _own_chunks(session: Session, chat_id: int) -> list[MemoryChunk]:
    """The chunks made from this chat's messages (not imported from elsewhere), oldest first."""
    return list(
        session.exec(
            select(MemoryChunk)
            .where(MemoryChunk.chat_id == chat_id, MemoryChunk.source_chat_id == None)  # noqa: E711
            .order_by(MemoryChunk.id)
        )
    )


def sync_chunks(session: Session, chat_id: int) -> tuple[int, int]:
    """Drop chunks whose messages changed (and every later one, to rebuild in order), then chunk the
    messages after the last chunk, five at a time, whatever the recent-message window: a chat has
    memories from its first replies, and the prompt's recall leaves out those of messages still in
    the window (see chunking.py). Returns (added, removed). Idempotent. While the chat's chunking is
    paused, only the changed chunks go and none is made."""
    own = _own_chunks(session, chat_id)
    paused = chats.chat_settings(chats.get_chat(session, chat_id)).memory_chunking_paused
    texts = _texts(session, chat_id)
    pinned = texts[0].id if texts else None  # always in the prompt: never a memory
    current = {m.id: m for m in texts}
    stale = set(stale_chunks([StoredChunk(c.id, tuple(c.message_ids), c.fingerprint) for c in own], current))
    # A message that became readable among those already chunked (shown to the AI again, a failed
    # reply written after all) is in no chunk: the chunks from it on are made again, so it is kept.
    readable = [m.id for m in texts if m.id != pinned and m.content.strip()]
    missed = missed_messages(readable, [c.message_ids for c in own])
    removed = 0
    if stale or (missed and not paused):
        first_bad = min([*(min(c.message_ids) for c in own if c.id in stale), *([] if paused else missed)])
        # Paused, nothing would be rebuilt: the memories after a changed one stay.
        doomed = list(stale) if paused else [c.id for c in own if max(c.message_ids) >= first_bad]
        session.exec(delete(MemoryChunk).where(col(MemoryChunk.id).in_(doomed)))  # type: ignore[call-overload]
        own = [c for c in own if c.id not in doomed]
        removed = len(doomed)
    if paused:
        session.flush()
        return 0, removed
    cursor = max((max(c.message_ids) for c in own), default=0)
    eligible = [m for m in texts if m.id > cursor and m.id != pinned]
    added = 0
    for draft in chunk_messages(eligible):
        session.add(
            MemoryChunk(
                chat_id=chat_id,
                content=draft.content,
                message_ids=list(draft.message_ids),
                last_message_id=max(draft.message_ids),
                fingerprint=draft.fingerprint,
                message_count=draft.message_count,
                first_message_at=draft.first_message_at,
                last_message_at=draft.last_message_at,
            )
        )
        added += 1
    session.flush()
    return added, removed


def embed_pending(session: Session, chat_id: int, embedder: Embedder, *, limit: int = 64) -> int:
    """Give up to `limit` waiting chunks their vectors; returns how many got them (0 when none
    waits, or the source failed: the chunks then say why)."""
    waiting = list(
        session.exec(
            select(MemoryChunk)
            .where(MemoryChunk.chat_id == chat_id, MemoryChunk.status == "waiting")
            .order_by(MemoryChunk.id)
            .limit(limit)
        )
    )
    return embed_chunks(session, chat_id, waiting, embedder)[0]


def embed_chunks(
    session: Session, chat_id: int, chunks: list[MemoryChunk], embedder: Embedder
) -> tuple[int, str | None]:
    """Embed these chunks, replacing any vectors they had; (how many, the source's error). Their
    windows go to the model in one call: batching keeps the job's throughput at the model's own.
    A failing source marks them unavailable, with the reason."""
    if not chunks:
        return 0, None
    sources = _texts(session, chat_id, sorted({i for c in chunks for i in c.message_ids}))
    by_id = {m.id: m for m in sources}
    plan: list[tuple[MemoryChunk, int, int]] = []  # chunk, first window, window count
    windows: list[str] = []
    for chunk in chunks:
        texts = [by_id[i] for i in chunk.message_ids if i in by_id] if chunk.message_ids else _blocks(chunk)
        # Windows shorter than the model could read: a fact in a long message then dominates its
        # window instead of being averaged away with the filler around it.
        own = embedding_windows(texts, max_words=min(embedder.max_words, WINDOW_WORDS)) or [chunk.content]
        plan.append((chunk, len(windows), len(own)))
        windows.extend(own)
    try:
        vectors = embedder.embed_passages(windows)
    except EmbeddingError as err:
        for chunk in chunks:
            chunk.status, chunk.error = "unavailable", str(err)
            session.add(chunk)
        session.flush()
        log.warning("embedding failed in chat %s: %s", chat_id, err)
        return 0, str(err)
    session.exec(delete(MemoryVector).where(col(MemoryVector.chunk_id).in_([c.id for c in chunks])))  # type: ignore[call-overload]
    space_id = embedder.space.id
    for chunk, first, count in plan:
        store_vectors(session, chat_id, chunk.id, space_id, vectors[first : first + count])
        chunk.status, chunk.error, chunk.embedding_space_id = "vectorized", None, space_id
        session.add(chunk)
    session.flush()
    return len(chunks), None


def waiting_count(session: Session, chat_id: int) -> int:
    """How many of the chat's memories wait for their vectors."""
    return session.exec(
        select(func.count())
        .select_from(MemoryChunk)
        .where(MemoryChunk.chat_id == chat_id, MemoryChunk.status == "waiting")
    ).one()


def list_chunk_ids(session: Session, chat_id: int) -> list[int]:
    return list(
        session.exec(select(MemoryChunk.id).where(MemoryChunk.chat_id == chat_id).order_by(MemoryChunk.id))
    )


def _blocks(chunk: MemoryChunk) -> list[MessageText]:
    """An imported chunk has no local messages: its "Name: text" blocks stand in for them."""
    return [
        MessageText(0, "", block, chunk.first_message_at)
        for block in chunk.content.split("\n\n")
        if block.strip()
    ]


@dataclass(frozen=True)
class Hit:
    chunk: ChunkRow
    score: float
    similarity: float | None
    lexical: float


# The first, approximate pass keeps this many windows for exact scoring, with those as near by sign
# bits as the last of them (a chat with fewer windows than this is searched exactly); each ranking
# then offers this many chunks to the fusion.
NEAREST_WINDOWS = 256
CANDIDATES_PER_RANKING = 32
# On PostgreSQL the first pass is pgvector's HNSW index, whose order is (nearly) exact cosine: the best
# CANDIDATES_PER_RANKING chunks are the first that many distinct chunks of its windows, and their
# similarities are the same from a shorter list. So it asks for this many windows first, and for
# NEAREST_WINDOWS only when those hold fewer chunks (a chat whose memories' windows crowd together):
# at 100,000 memories the index answered 128 windows in a third of the time of 256 (bench/scale.py).
HNSW_FIRST_WINDOWS = 128
LEXICAL_DEPTH = 400
NO_SOURCE_NOTE = "No embedding source: ranked by text matching only."
# How long a search (the viewer's, the API's) waits for a built-in model still loading after a
# start, before it ranks by words alone and says so: below a client's patience (30 s in the tests).
MODEL_WAIT_S = 20.0
LOADING_NOTE = "the built-in model is still loading, so text matching was used"


@dataclass(frozen=True)
class Embedded:
    """The query's vector, or why there is none."""

    embedder: Embedder | None  # whose vectors rank; None when text matching ranks alone
    vector: list[float] | None
    note: str | None = None  # why vectors are not used
    loading: bool = False  # the built-in model is still loading


@dataclass(frozen=True)
class Side:
    """What one pass found: its scores by chunk, its best CANDIDATES_PER_RANKING chunks, their
    neighbours in time, and the exact similarity of chunks around them (those it could score)."""

    scores: dict[int, float]
    best: list[int]
    neighbours: dict[int, tuple[int | None, int | None]]
    similarities: dict[int, float]
    lexical_unit: float | None = None  # the word pass's: what a word only one chunk holds weighs in BM25


def _outside(
    neighbours: dict[int, tuple[int | None, int | None]], excluded: frozenset[int]
) -> dict[int, tuple[int | None, int | None]]:
    """Neighbours without the left-out memories: the last memory before the window has no next one,
    as when memories of the window did not exist."""
    if not excluded:
        return neighbours
    return {
        c: (p if p not in excluded else None, n if n not in excluded else None)
        for c, (p, n) in neighbours.items()
    }


def _embed(
    query: str, embedder: Embedder | None, vectors: QueryVectors | None, wait_for_model: bool
) -> Embedded:
    if embedder is None:
        return Embedded(None, None, NO_SOURCE_NOTE)
    if still_loading(embedder):
        loading = type(embedder).loading  # type: ignore[attr-defined]
        if not wait_for_model:  # a reply does not wait: words rank, and the model goes on loading
            loading.start()
            return Embedded(None, None, NO_SOURCE_NOTE, loading=True)
        try:  # a search does, within a limit
            loading.model(timeout=MODEL_WAIT_S)
        except ModelStillLoading as err:
            return Embedded(
                None, None, f"Ranked by text matching only: {err}. Search again in a moment.", loading=True
            )
        except EmbeddingError as err:
            return Embedded(None, None, f"The embedding source failed ({err}); ranked by text matching only.")
    try:
        vector = vectors.embed(embedder, query) if vectors is not None else embedder.embed_query(query)
    except EmbeddingError as err:
        return Embedded(None, None, f"The embedding source failed ({err}); ranked by text matching only.")
    return Embedded(embedder, vector)


def _vector_pass(
    engine,
    chat_id: int,
    query: str,
    embedder: Embedder | None,
    *,
    bits: SignIndex,
    vectors: QueryVectors | None,
    wait_for_model: bool,
    embedded: Future,
    scanned: Future,
    choose_embedder: ChooseEmbedder | None = None,
    window_start_id: int | None = None,
) -> Side | None:
    """Embed the query (or find it embedded), take the windows nearest to it by sign bits, score
    them exactly (on PostgreSQL: the nearest by pgvector's HNSW index, scored as found), then the
    neighbours of the best chunks; on a connection of its own. Says when the
    query is embedded (the word pass waits for it) and when the sign bits are scanned (numpy
    needs the GIL between its steps, so this part is best run while the caller waits).
    `choose_embedder`, when given, picks the embedder here, on this pass's connection."""
    try:
        with Session(engine) as session:
            if choose_embedder is not None:
                embedder = choose_embedder(session)
            got = _embed(query, embedder, vectors, wait_for_model)
            embedded.set_result(got)
            if got.vector is None or got.embedder is None:
                return None
            # A remote model's size, part of its space, is known once it has answered.
            space_id = got.embedder.space.id
            excluded, their_windows = index.reaching(session, chat_id, window_start_id)
            # As many windows outside the left-out memories as a search of all of them would weigh.
            limit = NEAREST_WINDOWS + their_windows
            if index.on_postgres(session):  # pgvector's HNSW index, shared by every server
                nearest = index.nearest_postgres(
                    session,
                    chat_id,
                    space_id,
                    got.vector,
                    limit=limit,
                    first=HNSW_FIRST_WINDOWS + their_windows,
                    enough=lambda found: _distinct_chunks(found, excluded) >= CANDIDATES_PER_RANKING,
                )
                scanned.set_result(None)
            else:
                code = sign_code(got.vector)
                vector_ids, _ = bits.nearest_windows(session, chat_id, space_id, code, limit=limit)
                scanned.set_result(None)
                nearest = similarities_by_vector(session, vector_ids.tolist(), got.vector)
            dense: dict[int, float] = {}
            for chunk_id, similarity in nearest.values():
                if chunk_id not in excluded:
                    dense[chunk_id] = max(similarity, dense.get(chunk_id, -1.0))
            best = sorted(dense, key=dense.__getitem__, reverse=True)[:CANDIDATES_PER_RANKING]
            neighbours = _outside(index.chronological_neighbours(session, best), excluded)
            around = [n for pair in neighbours.values() for n in pair if n is not None and n not in dense]
            return Side(dense, best, neighbours, similarities_by_chunk(session, around, space_id, got.vector))
    except BaseException as err:
        for signal in (embedded, scanned):
            if not signal.done():
                signal.set_exception(err)
        raise
    finally:
        if not scanned.done():
            scanned.set_result(None)


def _distinct_chunks(windows: dict[int, tuple[int, float]], excluded: frozenset[int]) -> int:
    return len({chunk_id for chunk_id, _ in windows.values() if chunk_id not in excluded})


def _word_pass(
    engine, chat_id: int, query: str, *, embedded: Future, window_start_id: int | None = None
) -> Side:
    """The best LEXICAL_DEPTH chunks by BM25 over the query's rarer words, with their scores; the
    neighbours of the best, and, once the query is embedded, the exact similarity of those and
    their neighbours; on a connection of its own."""
    terms = query_terms(query, chat_id)
    with Session(engine) as session:
        excluded, _ = index.reaching(session, chat_id, window_start_id)
        freq = index.doc_freq(session, terms) if terms else {}
        # Scored once, deep enough that the dense candidates and the neighbours mostly find their
        # own score here; a chunk below this depth counts as sharing no rare word with the query.
        searched = {t: freq[t] for t in candidate_terms(freq)}
        scores: dict[int, float] = {}
        unit = None
        if searched:
            chat_chunks = index.chat_chunk_count(session, chat_id)
            weights = chat_weights(searched, chat_chunks=chat_chunks, all_chunks=index.chunk_count(session))
            scores = index.lexical_candidates(
                session, weights, limit=LEXICAL_DEPTH + len(excluded), doc_freq=searched
            )
            scores = {c: s for c, s in scores.items() if c not in excluded}
            unit = word_weight(1, chat_chunks)
        best = list(scores)[:CANDIDATES_PER_RANKING]
        neighbours = _outside(index.chronological_neighbours(session, best), excluded)
        got: Embedded = embedded.result()
        similarities = {}
        if best and got.vector is not None and got.embedder is not None:
            around = [*best, *(n for pair in neighbours.values() for n in pair if n is not None)]
            similarities = similarities_by_chunk(session, around, got.embedder.space.id, got.vector)
        return Side(scores, best, neighbours, similarities, unit)


@dataclass(frozen=True)
class PendingSearch:
    """A search whose passes run on threads (`start_search`); `finish_search` ranks."""

    embedded: Future[Embedded]
    scanned: Future[None]  # the sign bits are scanned (or will not be)
    dense: Future[Side | None]
    words: Future[Side]
    chat_id: int
    query: str = ""
    window_start_id: int | None = None


def start_search(
    engine,
    chat_id: int,
    query: str,
    embedder: Embedder | None,
    *,
    bits: SignIndex,
    threads: Executor,
    vectors: QueryVectors | None = None,
    wait_for_model: bool = True,
    choose_embedder: ChooseEmbedder | None = None,
    window_start_id: int | None = None,
) -> PendingSearch | None:
    """Start a search on `threads` (two of them), each pass on its own connection: the vector pass
    (the query's vector comes from `vectors` when it was embedded already) and the word pass
    (SQLite FTS5), which then scores its best chunks exactly once the query is embedded. The
    caller's own work overlaps with them. None for an empty query. `wait_for_model=False` ranks by
    words alone while the built-in model loads. `choose_embedder` (instead of `embedder`) picks the
    embedder on the vector pass's thread: the word pass need not wait for the choice to start.
    `window_start_id` leaves out the memories of that message and later ones (the prompt's window,
    which the prompt holds already) before the candidates are picked, so they take no place of an
    older memory."""
    if not query.strip():
        return None
    embedded: Future[Embedded] = Future()
    scanned: Future[None] = Future()
    # The vector pass first: the word pass waits for its embedding, and the threads take work in order.
    dense = threads.submit(
        _vector_pass,
        engine,
        chat_id,
        query,
        embedder,
        bits=bits,
        vectors=vectors,
        wait_for_model=wait_for_model,
        embedded=embedded,
        scanned=scanned,
        choose_embedder=choose_embedder,
        window_start_id=window_start_id,
    )
    words = threads.submit(
        _word_pass, engine, chat_id, query, embedded=embedded, window_start_id=window_start_id
    )
    return PendingSearch(embedded, scanned, dense, words, chat_id, query, window_start_id)


def finish_search(session: Session, pending: PendingSearch, *, k: int = 8) -> tuple[list[Hit], Embedded]:
    """Chunks ranked by vector similarity fused with lexical matching, once both passes are done;
    and the query's embedding (its embedder, or why vectors were not used). Work stays proportional
    to the candidates, not the chat: the nearest windows by sign bits, rescored exactly, and the
    best BM25 matches from FTS5; then their neighbours in time."""
    words, near, got = pending.words.result(), pending.dense.result(), pending.embedded.result()
    dense = dict(near.scores) if near is not None else None
    candidates = list(dict.fromkeys([*(near.best if near is not None else ()), *words.best]))
    if not candidates:
        return [], got
    known = {**(near.neighbours if near is not None else {}), **words.neighbours}
    neighbours = {c: known[c] for c in sorted(candidates) if c in known}  # in id order, as SQLite gives them
    pool = list(
        dict.fromkeys([*candidates, *(n for pair in neighbours.values() for n in pair if n is not None)])
    )
    lexical = {c: words.scores.get(c, 0.0) for c in pool}
    if dense is not None and near is not None:
        for c in pool:
            similarity = near.similarities.get(c, words.similarities.get(c))
            if c not in dense and similarity is not None:  # chunks without vectors in the space stay out
                dense[c] = similarity
    dense_weight, neighbour_share = ranking_weights(session, pending.chat_id)
    scores = fuse(
        dense,
        lexical,
        neighbours,
        dense_weight=dense_weight,
        neighbour_share=neighbour_share,
        lexical_unit=words.lexical_unit,
    )
    if named := dates_named(pending.query):
        # A memory said on a date the query names counts as if it shared one more rare word with it.
        spans = index.chunk_days(session, pool)
        for c in pool:
            if c in spans and said_on(named, *spans[c]):
                scores[c] += 1 - dense_weight
    ranked = sorted(pool, key=lambda c: scores[c], reverse=True)
    hits: list[Hit] = []
    seen: set[str] = set()
    # Normally one step: only a chunk whose messages changed since (the sync job has not caught up
    # yet), or the same text twice (an import beside what the messages made), sends it further.
    for start in range(0, len(ranked), k):
        step = ranked[start : start + k]
        rows = index.chunk_rows(session, step)
        fresh = {r.id for r in current_rows(session, pending.chat_id, [rows[c] for c in step if c in rows])}
        for c in step:
            if c in fresh and rows[c].content not in seen and _before(rows[c], pending.window_start_id):
                seen.add(rows[c].content)
                hits.append(Hit(rows[c], scores[c], dense.get(c) if dense is not None else None, lexical[c]))
        if len(hits) >= k:
            break
    return hits[:k], got


def _before(row: ChunkRow, window_start_id: int | None) -> bool:
    """The memory holds no message of the window (from `window_start_id` on); an imported one, tied to
    no message of this chat, never does."""
    return window_start_id is None or max(row.message_ids or [0]) < window_start_id


def ranking_weights(session: Session, chat_id: int) -> tuple[float, float]:
    """The chat's dense weight and neighbour share (Chat Settings → Memory Recall → Ranking), or
    the defaults measured on the long-chat dev set."""
    settings = chats.chat_settings(chats.get_chat(session, chat_id))
    return (
        DENSE_WEIGHT if settings.recall_dense_weight is None else settings.recall_dense_weight,
        NEIGHBOUR_SHARE if settings.recall_neighbour_share is None else settings.recall_neighbour_share,
    )


def current_rows(session: Session, chat_id: int, rows: list[ChunkRow]) -> list[ChunkRow]:
    """The rows whose messages still read as they did when chunked: an edit, swipe, hide or delete
    since leaves its chunk out at once, whether or not the sync job has run. Imported chunks with no
    messages of this chat stay. One read of at most a few dozen messages."""
    linked = [r for r in rows if r.message_ids]
    if not linked:
        return rows
    ids = sorted({i for r in linked for i in r.message_ids})
    current = {m.id: m for m in index.message_texts(session, chat_id, ids)}
    stale = set(
        stale_chunks([StoredChunk(r.id, tuple(r.message_ids), r.fingerprint) for r in linked], current)
    )
    return [r for r in rows if r.id not in stale]


def search(
    session: Session,
    chat_id: int,
    query: str,
    embedder: Embedder | None,
    *,
    bits: SignIndex,
    threads: Executor,
    vectors: QueryVectors | None = None,
    k: int = 8,
) -> tuple[list[Hit], str | None]:
    """Chunks ranked by vector similarity fused with lexical matching; (hits, why vectors were not
    used) — a failing embedding source falls back to text matching and says so. `bits` is the
    app's sign-bit index; both passes run on `threads` (see `start_search`)."""
    pending = start_search(
        session.get_bind(), chat_id, query, embedder, bits=bits, threads=threads, vectors=vectors
    )
    if pending is None:
        return [], None
    hits, got = finish_search(session, pending, k=k)
    return hits, got.note


@dataclass(frozen=True)
class Found:
    """A memory the viewer's search shows, with the excerpt around the words it matched."""

    hit: Hit
    excerpt: Excerpt


def search_for_viewer(
    session: Session,
    chat_id: int,
    query: str,
    embedder: Embedder | None,
    *,
    bits: SignIndex,
    threads: Executor,
    k: int = 8,
) -> tuple[list[Found], str | None]:
    """The memory viewer's search: `search`'s ranking without the memories that share no word with
    the query and are not clearly close in meaning (see excerpts.py), so a query about nothing in
    the chat finds nothing."""
    hits, note = search(session, chat_id, query, embedder, bits=bits, threads=threads, k=k * 2)
    floor = embedder.search_floor if embedder is not None else 1.0
    found = []
    for h in hits:
        shown = excerpt(h.chunk.content, query)
        if worth_showing(shares_word=h.lexical > 0 or shown.matched, similarity=h.similarity, floor=floor):
            found.append(Found(h, shown))
    return found[:k], note


@dataclass(frozen=True)
class RecallResult:
    block: str  # the prompt block, "" when nothing was recalled
    recalled: list  # Recalled
    note: str  # for the prompt inspector


def start_recall(
    engine,
    chat_id: int,
    query: str,
    embedder: Embedder | None,
    *,
    bits: SignIndex,
    threads: Executor,
    vectors: QueryVectors | None = None,
    choose_embedder: ChooseEmbedder | None = None,
    window_start_id: int | None = None,
) -> PendingSearch | None:
    """Start the search for the next reply's memories (`finish_recall` ends it), among those of the
    messages before `window_start_id` (the prompt's live window holds the others); while the built-in
    model loads, words alone rank."""
    return start_search(
        engine,
        chat_id,
        query,
        embedder,
        bits=bits,
        threads=threads,
        vectors=vectors,
        wait_for_model=False,
        choose_embedder=choose_embedder,
        window_start_id=window_start_id,
    )


def finish_recall(
    session: Session,
    pending: PendingSearch | None,
    *,
    context_size: int,
    window_start_id: int | None,
    count: Callable[[str], int],
    unseen: frozenset[int] = frozenset(),
    since: int | None = None,
) -> RecallResult:
    """Memories for the next reply: ranked chunks of this chat, past the live window, above the
    similarity threshold, within 15% of the context (clamped 384–1,536 tokens). A memory holding a
    message in `unseen` (in a group, one the speaker cannot see) is left out."""
    if pending is None:
        return RecallResult("", [], "Memory Recall: no message to search with yet.")
    hits, got = finish_search(session, pending, k=TOP_K * 2)
    embedder = got.embedder
    hits = [h for h in hits if window_start_id is None or max(h.chunk.message_ids or [0]) < window_start_id]
    if unseen:
        hits = [h for h in hits if unseen.isdisjoint(h.chunk.message_ids or ())]
    if since is not None:  # the speaker's own new start: nothing from before it
        hits = [h for h in hits if min(h.chunk.message_ids or [0]) >= since]
    candidates = [
        Candidate(h.chunk.id, h.chunk.content, h.similarity if embedder else None, h.lexical, _span(h.chunk))
        for h in hits
    ]
    threshold = embedder.threshold if embedder else 0.0
    recalled, why = select_memories(
        candidates, budget=memory_budget(context_size), threshold=threshold, count=count
    )
    how = LOADING_NOTE if got.loading else (got.note[:-1].lower() if got.note else "")
    if recalled:
        sims = ", ".join(f"{r.similarity:.2f}" for r in recalled if r.similarity is not None)
        text = f"Memory Recall: recalled {len(recalled)} memor{'y' if len(recalled) == 1 else 'ies'}"
        text += f" (similarity {sims})" if sims else " (by text matching)"
    else:
        text = f"Memory Recall: nothing recalled — {why}"
    if how:
        text += f"; {how}"
    return RecallResult(memory_block(recalled), recalled, text + ".")


def recall_for_prompt(
    session: Session,
    chat_id: int,
    query: str,
    *,
    context_size: int,
    window_start_id: int | None,
    count: Callable[[str], int],
    embedder: Embedder | None,
    bits: SignIndex,
    threads: Executor,
    vectors: QueryVectors | None = None,
) -> RecallResult:
    """`start_recall` then `finish_recall`, for one embedder."""
    pending = start_recall(
        session.get_bind(),
        chat_id,
        query,
        embedder,
        bits=bits,
        threads=threads,
        vectors=vectors,
        window_start_id=window_start_id,
    )
    return finish_recall(
        session, pending, context_size=context_size, window_start_id=window_start_id, count=count
    )


def _span(chunk: ChunkRow) -> str:
    first, last = chunk.first_message_at, chunk.last_message_at
    if first.date() == last.date():
        return f"{first:%Y-%m-%d}, {chunk.message_count} messages"
    return f"{first:%Y-%m-%d} to {last:%Y-%m-%d}, {chunk.message_count} messages"


def list_chunks(session: Session, chat_id: int) -> list[MemoryChunk]:
    return list(
        session.exec(
            select(MemoryChunk)
            .where(MemoryChunk.chat_id == chat_id)
            .order_by(MemoryChunk.first_message_at, MemoryChunk.id)
        )
    )


def forget_chunk(session: Session, chat_id: int, chunk_id: int) -> None:
    chunk = session.get(MemoryChunk, chunk_id)
    if chunk is None or chunk.chat_id != chat_id:
        raise NotFound(f"Memory {chunk_id} is not in chat {chat_id}.")
    session.delete(chunk)
    session.flush()


def clear_chunks(session: Session, chat_id: int) -> int:
    """Remove every memory of the chat (its messages stay)."""
    chunks = list_chunks(session, chat_id)
    for chunk in chunks:
        session.delete(chunk)
    session.flush()
    return len(chunks)


def export_file(session: Session, chat_id: int) -> tuple[str, bytes]:
    chat = chats.get_chat(session, chat_id)
    records = []
    for chunk in list_chunks(session, chat_id):
        windows = [
            unpack(v.embedding)
            for v in session.exec(
                select(MemoryVector).where(MemoryVector.chunk_id == chunk.id).order_by(MemoryVector.window)
            )
        ]
        records.append(
            ChunkRecord(
                content=chunk.content,
                embedding=_mean(windows),
                space_id=chunk.embedding_space_id,
                message_count=chunk.message_count,
                first_message_at=as_utc(chunk.first_message_at),
                last_message_at=as_utc(chunk.last_message_at),
                created_at=as_utc(chunk.created_at),
                windows=windows or None,
            )
        )
    doc = export_envelope(chat_id=chat.id, name=chat.name, mode=chat.mode, chunks=records, now=utcnow())
    safe = safe_stem(chat.name, "chat")
    return f"{safe}-memory-recall.marinara.json", json.dumps(doc, ensure_ascii=False).encode()


def _mean(windows: list[list[float]]) -> list[float] | None:
    if not windows:
        return None
    dims = len(windows[0])
    mean = [sum(w[i] for w in windows) / len(windows) for i in range(dims)]
    norm = sum(x * x for x in mean) ** 0.5 or 1.0
    return [x / norm for x in mean]


def _chunks_of_messages(session: Session, chat_id: int) -> dict[str, ChunkDraft]:
    """The chunks this chat's messages make from the start (past the pinned first message, as
    `sync_chunks` leaves it out), by their text."""
    return {draft.content: draft for draft in chunk_messages(_texts(session, chat_id)[1:])}


def import_file(session: Session, chat_id: int, raw: bytes, *, space: EmbeddingSpace) -> dict:
    """Merge a memory file into the chat: duplicates (same first and last time and content) are
    skipped, vectors in a known space are kept, the others queued for embedding. A memory whose
    text is what this chat's own messages make (a file exported from this chat) is linked to them,
    as if the chat had made it: it then moves the chunk cursor, so the messages do not make it a
    second time, and an edit of them retires it. One transaction."""
    try:
        source, records = parse_import(raw, now=utcnow())
    except MemoryFileError as err:
        raise UserError(str(err)) from err
    existing = {
        (as_utc(c.first_message_at).isoformat(), as_utc(c.last_message_at).isoformat(), c.content)
        for c in list_chunks(session, chat_id)
    }
    drafts = _chunks_of_messages(session, chat_id)
    covered = {i for c in _own_chunks(session, chat_id) for i in c.message_ids}
    imported = skipped = queued = linked = 0
    for rec in records:
        if rec.key in existing:
            skipped += 1
            continue
        existing.add(rec.key)
        draft = drafts.pop(rec.content, None)
        if draft is not None and not covered.intersection(draft.message_ids):
            covered.update(draft.message_ids)
            chunk = MemoryChunk(
                chat_id=chat_id,
                content=draft.content,
                message_ids=list(draft.message_ids),
                last_message_id=max(draft.message_ids),
                fingerprint=draft.fingerprint,
                message_count=draft.message_count,
                first_message_at=draft.first_message_at,
                last_message_at=draft.last_message_at,
                created_at=rec.created_at,
            )
            linked += 1
        else:
            chunk = MemoryChunk(
                chat_id=chat_id,
                content=rec.content,
                message_ids=[],
                message_count=rec.message_count,
                first_message_at=rec.first_message_at,
                last_message_at=rec.last_message_at,
                created_at=rec.created_at,
                source_chat_id=source,
            )
        session.add(chunk)
        session.flush()
        vectors = rec.windows or ([rec.embedding] if rec.embedding else [])
        if space.matches(rec.space_id) and vectors:
            store_vectors(session, chat_id, chunk.id, rec.space_id, vectors)
            chunk.status, chunk.embedding_space_id = "vectorized", rec.space_id
        else:
            queued += 1
        imported += 1
    session.flush()
    return {"imported": imported, "skipped": skipped, "queued": queued, "linked": linked}


def set_chunking_paused(session: Session, chat_id: int, paused: bool) -> None:
    """Pause or resume making memories from the chat's messages (Chat Settings keeps the switch)."""
    chat = chats.get_chat(session, chat_id)
    settings = chats.chat_settings(chat).model_copy(update={"memory_chunking_paused": paused})
    chat.settings = settings.model_dump(exclude_none=True)
    session.add(chat)
    session.flush()
