"""The first pass of a vector search: the sign bits of every window of a chat, held in memory.

Comparing sign bits (Hamming distance) over 600,000 windows takes a few milliseconds where exact
cosine over their float32 blobs in SQLite takes over a second, so a search takes the nearest few
hundred windows by bits, then scores only those exactly (vectors.similarities_by_vector). A chat
small enough to fit in that first cut is thus searched exactly.

The bits are loaded once per chat and space (each app holds its own `SignIndex`) and kept in step cheaply: vector ids only
grow, so new rows are those above the highest id held; a trigger notes every deleted vector in
memory_tombstone, and those are left out. The periodic sweep empties memory_tombstone and raises
memory_tombstone_floor; an index that had not read up to the floor reloads.

On PostgreSQL none of that is held in the process (several servers write the same database): the
first pass is pgvector's HNSW index over memory_embedding, one partial index per space and size
(`ensure_space_index`), and the word pass reads memory_words (see the functions named *_postgres,
each beside the SQLite spelling it stands for, chosen by `on_postgres`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlmodel import Session

from app.memory.recall.core.chunking import MessageText
from app.memory.recall.core.lexical import (
    CANDIDATE_POSTINGS,
    MAX_INDEXED_WORD_BYTES,
    fts5_idf,
    index_text,
    match_expression,
    sqlite_sum,
    word_counts,
)
from app.platform.timeutil import as_utc

MAX_INDEXES = 32  # chats whose bits stay in memory (least recently searched go first)
# ...and at most this many windows' room in all (~65 bytes each: 48 of bits for 384 dimensions, two ids
# and a flag; ~65 MB): 32 chats of 100,000 memories would otherwise hold 1 GB. The chat being searched
# is always kept, whatever its size; the least recently searched others go first.
MAX_HELD_WINDOWS = 1_000_000
BLOCK = 65_536  # windows per step of a scan


@dataclass
class _Bits:
    tombstone: int = 0  # the last memory_tombstone id applied
    max_id: int = 0
    size: int = 0
    dead_count: int = 0
    vector_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    chunk_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    dead: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))
    words: list[np.ndarray] = field(default_factory=list)  # one uint64 column per 64 dimensions

    def append(self, rows: Sequence[tuple[int, int, bytes]]) -> None:
        if not rows:
            return
        codes = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.uint64).reshape(len(rows), -1)
        if not self.words:
            self.words = [np.empty(0, dtype=np.uint64) for _ in range(codes.shape[1])]
        if codes.shape[1] != len(self.words):
            raise ValueError("vectors of one space must have one size")
        need = self.size + len(rows)
        if need > len(self.vector_ids):  # grow by doubling: appends after each reply stay cheap
            capacity = max(need, 2 * len(self.vector_ids), 1024)
            self.vector_ids = _grow(self.vector_ids, capacity)
            self.chunk_ids = _grow(self.chunk_ids, capacity)
            self.dead = _grow(self.dead, capacity)
            self.words = [_grow(w, capacity) for w in self.words]
        end = self.size + len(rows)
        self.vector_ids[self.size : end] = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        self.chunk_ids[self.size : end] = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
        self.dead[self.size : end] = False
        for column, word in enumerate(self.words):
            word[self.size : end] = codes[:, column]
        self.size = end
        self.max_id = int(rows[-1][0])

    def bury(self, vector_ids: Sequence[int]) -> None:
        """Leave out deleted vectors (ids are sorted: they were appended in id order)."""
        if not vector_ids or not self.size:
            return
        held = self.vector_ids[: self.size]
        wanted = np.asarray(vector_ids, dtype=np.int64)
        at = np.searchsorted(held, wanted)
        inside = at < self.size
        at, wanted = at[inside], wanted[inside]
        hit = at[held[at] == wanted]  # ids of other spaces are not held
        newly = hit[~self.dead[hit]]
        self.dead[newly] = True
        self.dead_count += len(newly)

    def nearest(self, query_code: bytes, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """(vector ids, chunk ids) of the `limit` windows whose bits differ least from the query's,
        and of those that differ as little as the last of them (see `_smallest`). One thread: the
        search's word pass runs on the other core meanwhile (the scan was cut in parts on two
        threads once; beside the word pass, a third thread only made both slower)."""
        alive = self.size - self.dead_count
        if alive <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        if limit >= alive:
            picked = np.flatnonzero(~self.dead[: self.size])
            return self.vector_ids[picked], self.chunk_ids[picked]
        positions = self._nearest_positions(np.frombuffer(query_code, dtype=np.uint64), limit)
        return self.vector_ids[positions], self.chunk_ids[positions]

    def _nearest_positions(self, query_words: np.ndarray, limit: int) -> np.ndarray:
        distance = np.zeros(self.size, dtype=np.uint16)
        # Block by block, so the scratch arrays stay in the CPU's cache; up to three words' bit
        # counts (at most 192) are summed in bytes before they join the distance.
        block = min(BLOCK, self.size)
        scratch = np.empty(block, dtype=np.uint64)
        counts = np.empty(block, dtype=np.uint8)
        partial = np.empty(block, dtype=np.uint8)
        for start in range(0, self.size, block):
            end = min(start + block, self.size)
            n = end - start
            x, c, part, out = scratch[:n], counts[:n], partial[:n], distance[start:end]
            for group in range(0, len(self.words), 3):
                words = zip(self.words[group : group + 3], query_words[group : group + 3], strict=True)
                for i, (word, q) in enumerate(words):
                    np.bitwise_xor(word[start:end], q, out=x)
                    if i == 0:
                        np.bitwise_count(x, out=part)
                    else:
                        np.bitwise_count(x, out=c)
                        np.add(part, c, out=part)
                np.add(out, part, out=out)
        if self.dead_count:
            distance[self.dead[: self.size]] = len(self.words) * 64 + 1  # farther than any living window
        return _smallest(distance, limit)


def _smallest(distances: np.ndarray, limit: int) -> np.ndarray:
    """Indices, in order, of the `limit` smallest distances and of the others as small as the last
    of them (ties, up to twice `limit` in all: the first ones then). Keeping every tie makes the cut
    depend on the distances alone, not on the order a partial sort happens to leave them in. A
    count of each distance finds the cut: cheaper than a partial sort of half a million."""
    reached = np.cumsum(np.bincount(distances))
    cut = int(np.searchsorted(reached, limit))  # the distance at which `limit` windows are reached
    below = np.flatnonzero(distances < cut)
    return np.sort(np.concatenate([below, np.flatnonzero(distances == cut)[: 2 * limit - len(below)]]))


def _grow(values: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.empty(capacity, dtype=values.dtype)
    grown[: len(values)] = values
    return grown


def _rows(session: Session, sql: str, params: tuple) -> list[tuple]:
    # The driver's own cursor: loading half a million rows through SQLAlchemy's result objects
    # costs several times more.
    return session.connection().connection.driver_connection.execute(sql, params).fetchall()


class SignIndex:
    """The sign bits of the most recently searched chats' windows, for one app's database."""

    def __init__(self, *, max_chats: int = MAX_INDEXES) -> None:
        self._bits: OrderedDict[tuple[int, str], _Bits] = OrderedDict()
        self._lock = threading.Lock()
        self._max_chats = max_chats

    def nearest_windows(
        self, session: Session, chat_id: int, space_id: str, query_code: bytes, *, limit: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The chat's windows (of one space) nearest to the query by sign bits: (vector ids, chunk ids)."""
        key = (chat_id, space_id)
        with self._lock:
            bits = self._bits.pop(key, None) or _Bits()
            self._bits[key] = bits
            while len(self._bits) > self._max_chats:
                self._bits.popitem(last=False)
            floor = _rows(session, "SELECT floor FROM memory_tombstone_floor", ())[0][0]
            newest = _rows(
                session,
                "SELECT coalesce(max(id), 0) FROM memory_vector WHERE chat_id = ? AND space_id = ?",
                (chat_id, space_id),
            )[0][0]
            issued = _rows(session, "SELECT seq FROM sqlite_sequence WHERE name = 'memory_tombstone'", ())
            last_tombstone = issued[0][0] if issued else 0  # the highest ever issued (AUTOINCREMENT)
            if (
                bits.tombstone < floor
                or bits.dead_count > bits.size // 3
                or newest < bits.max_id
                or last_tombstone < bits.tombstone
            ):
                # Tombstones it never saw were pruned, most of it is dead, or this is another
                # database file at the same path (ids went back): start again.
                bits = self._bits[key] = _Bits(tombstone=last_tombstone)
            # A vector of another size (stored before imports were checked) cannot be compared: skipped.
            bits.append(
                _rows(
                    session,
                    "SELECT id, chunk_id, code FROM memory_vector WHERE chat_id = ? AND space_id = ? "
                    "AND id > ? AND length(code) = ? ORDER BY id",
                    (chat_id, space_id, bits.max_id, len(query_code)),
                )
            )
            buried = _rows(
                session,
                "SELECT id, vector_id FROM memory_tombstone WHERE chat_id = ? AND id > ? ORDER BY id",
                (chat_id, bits.tombstone),
            )
            if buried:
                bits.bury(sorted(v for _, v in buried))
                bits.tombstone = buried[-1][0]
            self._keep_within_budget(key)
            return bits.nearest(query_code, limit)

    def _keep_within_budget(self, searched: tuple[int, str]) -> None:
        held = sum(len(b.vector_ids) for b in self._bits.values())
        for key in list(self._bits):
            if held <= MAX_HELD_WINDOWS:
                break
            if key != searched:
                held -= len(self._bits.pop(key).vector_ids)

    def held_chats(self) -> list[int]:
        """The chats whose bits are in memory now."""
        with self._lock:
            return sorted({chat_id for chat_id, _ in self._bits})

    def clear(self) -> None:
        """Drop every chat's bits (after a database is replaced)."""
        with self._lock:
            self._bits.clear()

    def close(self) -> None:
        self.clear()


def prune_tombstones(session: Session) -> None:
    """Empty memory_tombstone (the sweep does it); indexes that had not read them all reload."""
    if on_postgres(session):
        return _prune_tombstones_postgres(session)
    conn = session.connection()
    top = conn.exec_driver_sql("SELECT coalesce(max(id), 0) FROM memory_tombstone").scalar_one()
    conn.exec_driver_sql("DELETE FROM memory_tombstone WHERE id <= ?", (top,))
    conn.exec_driver_sql("UPDATE memory_tombstone_floor SET floor = max(floor, ?)", (top,))


# Results come back as one text row, not one row per chunk: the driver lets go of the GIL for each
# row it steps to, and a thread that needs the GIL back hundreds of times crawls beside the request's
# own Python work. SQLite's printf('%!.17g') gives every float back exactly.
def one_row(session: Session, sql: str, params: Sequence) -> str:
    """The single text value an aggregating query returns ("" when it found nothing)."""
    return session.connection().exec_driver_sql(sql, tuple(params)).scalar() or ""


def doc_freq(session: Session, terms: Sequence[str]) -> dict[str, int]:
    """How many chunks hold each (chat-prefixed) term: the chat's own counts (on PostgreSQL, up to
    CANDIDATE_POSTINGS + 1: past that a word is never searched)."""
    if on_postgres(session):
        return _doc_freq_postgres(session, terms)
    found = one_row(
        session,
        "SELECT group_concat(term || ' ' || doc, ' ') FROM fts_memory_vocab "
        f"WHERE term IN ({','.join('?' * len(terms))})",
        terms,
    ).split()
    counts = {term: int(doc) for term, doc in zip(found[::2], found[1::2], strict=True)}
    return {t: counts.get(t, 0) for t in terms}


def chunk_count(session: Session) -> int:
    """How many chunks the full-text index holds, over every chat: FTS5's own count in its idf."""
    if on_postgres(session):
        return _total_postgres(session)[0]
    return int(one_row(session, "SELECT count(*) FROM memory_chunk", ()) or 0)


def chat_chunk_count(session: Session, chat_id: int) -> int:
    """How many chunks the chat has: one row that triggers keep (counting a 100,000-memory chat's
    index took 1.5 ms of every reply)."""
    if on_postgres(session):
        return _chat_chunk_count_postgres(session, chat_id)
    return int(one_row(session, "SELECT chunks FROM memory_chunk_count WHERE chat_id = ?", (chat_id,)) or 0)


def lexical_candidates(
    session: Session,
    weights: Mapping[str, float],
    *,
    limit: int,
    doc_freq: Mapping[str, int] | None = None,
) -> dict[int, float]:
    """The chunks holding any of the given (chat-prefixed) words, best first, with their scores
    (higher is better): each word's BM25 as FTS5 gives it, times its weight, summed over the words.
    One FTS5 query per word (its `rank` is that word's BM25), summed and cut to the best `limit`
    inside SQLite. FTS5 weighs a word by how rare it is among every chat's chunks; the caller's
    weights turn that into how rare it is in the chat (lexical.chat_weights). `doc_freq` (how many
    chunks hold each word, as `doc_freq` gave them) spares PostgreSQL counting them again."""
    if not weights:
        return {}
    if on_postgres(session):
        return _lexical_candidates_postgres(session, weights, limit=limit, doc_freq=doc_freq)
    one = "SELECT rowid, -rank * ? AS score FROM fts_memory_chunk WHERE fts_memory_chunk MATCH ?"
    params: list = []
    for term, weight in weights.items():
        params += [weight, match_expression([term])]
    sql = (
        "SELECT group_concat(rowid || ' ' || printf('%!.17g', score), ' ') FROM ("
        f"SELECT rowid, sum(score) AS score FROM ({' UNION ALL '.join([one] * len(weights))}) "
        "GROUP BY rowid ORDER BY score DESC LIMIT ?)"
    )
    found = one_row(session, sql, (*params, limit)).split()
    return {int(rowid): float(score) for rowid, score in zip(found[::2], found[1::2], strict=True)}


def reaching(session: Session, chat_id: int, message_id: int | None) -> tuple[frozenset[int], int]:
    """The chat's memories that hold `message_id` or a later message (those of the recent-message
    window, when it is the window's first message), and how many embedded windows they have; none
    for None. A few dozen rows through two indexes."""
    if on_postgres(session):
        return _reaching_postgres(session, chat_id, message_id)
    if message_id is None:
        return frozenset(), 0
    where = "FROM memory_chunk WHERE chat_id = ? AND last_message_id >= ?"
    ids = frozenset(
        int(i)
        for i in one_row(session, f"SELECT group_concat(id, ' ') {where}", (chat_id, message_id)).split()
    )
    if not ids:
        return ids, 0
    windows = one_row(
        session,
        f"SELECT count(*) FROM memory_vector WHERE chunk_id IN (SELECT id {where})",
        (chat_id, message_id),
    )
    return ids, int(windows or 0)


def chronological_neighbours(
    session: Session, chunk_ids: Sequence[int]
) -> dict[int, tuple[int | None, int | None]]:
    """For each chunk, the chunks just before and just after it in its chat's time order."""
    if on_postgres(session):
        return _chronological_neighbours_postgres(session, chunk_ids)
    if not chunk_ids:
        return {}
    side = (
        "SELECT n.id FROM memory_chunk n WHERE n.chat_id = c.chat_id "
        "AND (n.first_message_at, n.id) {cmp} (c.first_message_at, c.id) "
        "ORDER BY n.first_message_at {order}, n.id {order} LIMIT 1"
    )
    sql = (
        f"SELECT group_concat(id || ' ' || coalesce(prev, 0) || ' ' || coalesce(next, 0), ' ') FROM ("
        f"SELECT c.id, ({side.format(cmp='<', order='DESC')}) AS prev, ({side.format(cmp='>', order='ASC')}) AS next "
        f"FROM memory_chunk c WHERE c.id IN ({','.join('?' * len(chunk_ids))}))"
    )
    found = [int(v) for v in one_row(session, sql, chunk_ids).split()]  # ids start at 1: 0 is none
    return {found[i]: (found[i + 1] or None, found[i + 2] or None) for i in range(0, len(found), 3)}


def chunk_days(session: Session, chunk_ids: Sequence[int]) -> dict[int, tuple[date, date]]:
    """The first and last day (UTC) of each chunk's messages."""
    if on_postgres(session):
        return _chunk_days_postgres(session, chunk_ids)
    if not chunk_ids:
        return {}
    sql = (
        "SELECT group_concat(id || ' ' || substr(first_message_at, 1, 10) || ' ' || substr(last_message_at, 1, 10), ' ') "
        f"FROM memory_chunk WHERE id IN ({','.join('?' * len(chunk_ids))})"
    )
    found = one_row(session, sql, chunk_ids).split()
    return {
        int(found[i]): (date.fromisoformat(found[i + 1]), date.fromisoformat(found[i + 2]))
        for i in range(0, len(found), 3)
    }


@dataclass(frozen=True)
class ChunkRow:
    """What a search's hits show of a memory chunk (the fields of MemoryChunk they read)."""

    id: int
    content: str
    message_ids: list[int]
    message_count: int
    status: str
    first_message_at: datetime
    last_message_at: datetime
    fingerprint: str = ""  # of its source messages as they were chunked ("" for one not linked to any)


def chunk_rows(session: Session, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
    """The given chunks by id, through the driver: the last read of a search, on the reply's own
    thread, where the ORM's row objects cost most of it."""
    if on_postgres(session):
        return _chunk_rows_postgres(session, chunk_ids)
    if not chunk_ids:
        return {}
    sql = (
        "SELECT id, content, message_ids, message_count, status, first_message_at, last_message_at, fingerprint "
        f"FROM memory_chunk WHERE id IN ({','.join('?' * len(chunk_ids))})"
    )
    return {
        row[0]: ChunkRow(
            row[0],
            row[1],
            json.loads(row[2]),
            row[3],
            row[4],
            _stored_datetime(row[5]),
            _stored_datetime(row[6]),
            row[7] or "",
        )
        for row in session.connection().exec_driver_sql(sql, tuple(chunk_ids)).all()
    }


def message_texts(session: Session, chat_id: int, ids: Sequence[int]) -> list[MessageText]:
    """The messages among `ids` the AI could read (visible, not failed, not streaming), with their
    active text, oldest first. Plain SQL: it runs on every reply (checking the recalled memories are
    still current), and building the ORM statement cost six times the query."""
    if on_postgres(session):
        return _message_texts_postgres(session, chat_id, ids)
    if not ids:
        return []
    sql = (
        "SELECT id, name, content, created_at FROM message WHERE chat_id = ? AND kind = 'message' "
        "AND hidden = 0 AND status NOT IN ('error', 'streaming') "
        f"AND id IN ({','.join('?' * len(ids))}) ORDER BY id"
    )
    rows = session.connection().exec_driver_sql(sql, (chat_id, *ids)).all()
    return [MessageText(i, name, content, _stored_datetime(at)) for i, name, content, at in rows]


def _stored_datetime(value: str | datetime) -> datetime:
    # Read back as the ORM's column type does: SQLite holds UTC without an offset
    # ("2026-11-30 16:54:55.033663"); the value comes back aware, in UTC.
    return as_utc(value if isinstance(value, datetime) else datetime.fromisoformat(value))


# PostgreSQL: the same answers from memory_words, memory_word_total and memory_embedding (see the
# revision e7b9d1f3a5c8). Named binds throughout; rows come back as rows (psycopg holds no GIL per row).

# FTS5's bm25() parameters: what PostgreSQL's BM25 must compute with to rank as SQLite does.
BM25_K1 = 1.2
BM25_B = 0.75
# HNSW's candidate list per search (pgvector's hnsw.ef_search): at least the windows asked for, up
# to pgvector's most; past that its iterative scan goes on finding more.
MAX_EF_SEARCH = 1000
# A chat of up to this many memories (some 10,000 windows) has its first pass scored exactly: a few
# milliseconds, and HNSW may miss a window among many near-identical ones (a long chat's repeated
# filler: a test's fact at the end of five such messages was found once in two through the index).
EXACT_SCAN_CHUNKS = 2_000


def on_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


_WORDS_INSERT = text(
    "INSERT INTO memory_words (chunk_id, chat_id, words, counts, length) VALUES (:chunk_id, :chat_id, "
    "array_to_tsvector(CAST(:terms AS text[])), CAST(:counts AS jsonb), :length)"
)


def _word_row(chunk_id: int, chat_id: int, content: str) -> dict:
    counts, length = word_counts(index_text(content, chat_id))
    return {
        "chunk_id": chunk_id,
        "chat_id": chat_id,
        "terms": list(counts),
        "counts": json.dumps(counts, ensure_ascii=False),
        "length": length,
    }


def write_words_postgres(connection: Connection, chunk_id: int, chat_id: int, content: str) -> None:
    """A new chunk's words in memory_words: the same words FTS5 holds on SQLite (lexical.index_text),
    distinct in a GIN-indexed tsvector, counted in jsonb, with the chunk's length in words."""
    connection.execute(_WORDS_INSERT, _word_row(chunk_id, chat_id, content))


def fill_postgres_index(connection: Connection, *, spaces: bool = False, batch: int = 2_000) -> int:
    """Give every chunk without its words in memory_words its row, and every space with vectors its
    HNSW index: after a migration (`spaces=True`), or rows copied in by plain inserts
    (copy-to-postgres), which no app hook sees; the memory sweep calls it (at start, then every few
    minutes), and looks for spaces without their index only when it found chunks without words (a
    copy brings both; reading every vector each sweep would cost more than the rest of it).
    Idempotent; returns how many chunks it gave their words."""
    last = filled = 0
    while True:
        rows = connection.execute(
            text(
                "SELECT c.id, c.chat_id, c.content FROM memory_chunk c WHERE c.id > :last AND NOT EXISTS "
                "(SELECT 1 FROM memory_words w WHERE w.chunk_id = c.id) ORDER BY c.id LIMIT :n"
            ),
            {"last": last, "n": batch},
        ).all()
        if not rows:
            break
        connection.execute(
            # Two servers' sweeps may fill at once: a chunk the other wrote first is left as it is.
            text(_WORDS_INSERT.text + " ON CONFLICT (chunk_id) DO NOTHING"),
            [_word_row(i, chat_id, content) for i, chat_id, content in rows],
        )
        last, filled = rows[-1][0], filled + len(rows)
    if spaces or filled:
        found = connection.execute(
            text(
                "SELECT DISTINCT space_id, vector_dims(embedding) FROM memory_embedding "
                "WHERE embedding IS NOT NULL"
            )
        ).all()
        for space_id, dims in found:
            ensure_space_index(connection, space_id, dims)
    return filled


def _literal(value: str) -> str:
    """A SQL string literal for a statement that cannot take a bind (DDL, and the searches that must
    name a partial index's predicate for the planner to use it); colons escaped for text()."""
    return "'" + value.replace("'", "''").replace(":", "\\:") + "'"


def space_index_name(space_id: str, dims: int) -> str:
    digest = hashlib.sha256(f"{space_id}\0{dims}".encode()).hexdigest()[:16]
    return f"ix_memory_embedding_hnsw_{digest}"


def _space_filter(space_id: str, dims: int) -> str:
    # Spelled the same in the index's predicate and in every search that should use it.
    return f"space_id = {_literal(space_id)} AND vector_dims(embedding) = {int(dims)}"


def ensure_space_index(connection: Connection, space_id: str, dims: int) -> None:
    """The HNSW index (cosine) of one space's vectors of one size, made when the space's first vectors
    are stored: one partial index over `embedding::vector(dims)` per space, since the column holds
    every space's sizes. An advisory lock makes two servers storing a new space's first vectors
    build it once; the second finds it made."""
    name = space_index_name(space_id, dims)
    if connection.execute(text("SELECT to_regclass(:name)"), {"name": name}).scalar() is not None:
        return
    connection.execute(text("SELECT pg_advisory_xact_lock(hashtext(:name))"), {"name": name})
    connection.execute(
        text(
            f"CREATE INDEX IF NOT EXISTS {name} ON memory_embedding USING hnsw "
            f"((embedding::vector({int(dims)})) vector_cosine_ops) WHERE {_space_filter(space_id, dims)}"
        )
    )


def nearest_postgres(
    session: Session,
    chat_id: int,
    space_id: str,
    query: Sequence[float],
    *,
    limit: int,
    first: int | None = None,
    enough: Callable[[dict[int, tuple[int, float]]], bool] | None = None,
) -> dict[int, tuple[int, float]]:
    """The first pass on PostgreSQL: the chat's `limit` windows (of the space, of the query's size)
    nearest to the query by cosine, with their exact similarity: {vector id: (chunk id, similarity)}.
    A chat of up to EXACT_SCAN_CHUNKS memories has every window scored (exact, as SQLite scores a
    chat smaller than its first cut); a larger one goes through the space's HNSW index (iterative
    scan: the index spans every chat, and enough of this chat's windows must come back). There,
    `first` windows are asked for first, and `limit` only when `enough` says those fall short: the
    index's time grows with the windows asked for (its candidate list, hnsw.ef_search, with them)."""
    dims = int(len(query))
    conn = session.connection()
    where = f"WHERE {_space_filter(space_id, dims)} AND chat_id = :chat_id"
    if _chat_chunk_count_postgres(session, chat_id) <= EXACT_SCAN_CHUNKS:
        # The untyped column's distance: no index has that expression, so none is used.
        return _nearest_windows(conn, where, "embedding <=> CAST(:query AS vector)", query, chat_id, limit)
    distance = f"embedding::vector({dims}) <=> CAST(:query AS vector({dims}))"
    if first is not None and enough is not None and first < limit:
        found = _nearest_through_index(conn, where, distance, query, chat_id, first)
        if enough(found):
            return found
    return _nearest_through_index(conn, where, distance, query, chat_id, limit)


def _nearest_through_index(
    conn: Connection, where: str, distance: str, query: Sequence[float], chat_id: int, limit: int
) -> dict[int, tuple[int, float]]:
    conn.execute(
        text(
            "SELECT set_config('hnsw.ef_search', :ef, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true)"
        ),
        {"ef": str(min(MAX_EF_SEARCH, max(40, limit)))},
    )
    return _nearest_windows(conn, where, distance, query, chat_id, limit)


def _nearest_windows(
    conn: Connection, where: str, distance: str, query: Sequence[float], chat_id: int, limit: int
) -> dict[int, tuple[int, float]]:
    rows = conn.execute(
        text(
            f"SELECT vector_id, chunk_id, 1 - ({distance}) FROM memory_embedding {where} "
            f"ORDER BY {distance} LIMIT :limit"
        ),
        {"query": vector_text(query), "chat_id": chat_id, "limit": limit},
    ).all()
    # In id order, as SQLite gives the windows it scores: chunks of equal similarity then rank alike.
    return {vector_id: (chunk_id, float(similarity)) for vector_id, chunk_id, similarity in sorted(rows)}


def vector_text(vector: Sequence[float]) -> str:
    """A vector as pgvector reads it, rounded to float32 first as the stored blobs are, so both
    databases compare the same numbers (a float32 written in full is read back exactly)."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + ",".join(repr(v) for v in values) + "]"


def _prune_tombstones_postgres(session: Session) -> None:
    conn = session.connection()
    top = conn.execute(text("SELECT coalesce(max(id), 0) FROM memory_tombstone")).scalar_one()
    conn.execute(text("DELETE FROM memory_tombstone WHERE id <= :top"), {"top": top})
    conn.execute(text("UPDATE memory_tombstone_floor SET floor = greatest(floor, :top)"), {"top": top})


def _tsquery(term: str) -> str:
    # A word of index_text is letters and digits only: quoted, tsquery reads it as one lexeme, as is.
    return f"'{term}'"


def _indexable(term: str) -> bool:
    return len(term.encode()) <= MAX_INDEXED_WORD_BYTES and "'" not in term and "\\" not in term


def _doc_freq_postgres(session: Session, terms: Sequence[str]) -> dict[str, int]:
    """Counted through the GIN index, each up to CANDIDATE_POSTINGS + 1: a word in more chunks than
    that is never searched (lexical.candidate_terms), so counting its chunks further would only cost
    time (a common word of a 100,000-memory chat is tens of thousands of rows)."""
    held = [t for t in terms if _indexable(t)]
    counts: dict[str, int] = {}
    if held:
        rows = (
            session.connection()
            .execute(
                text(
                    "SELECT q.term, (SELECT count(*) FROM (SELECT 1 FROM memory_words w "
                    "WHERE w.words @@ q.query LIMIT :cap) AS found) "
                    "FROM unnest(CAST(:terms AS text[]), CAST(:queries AS tsquery[])) AS q(term, query)"
                ),
                {"terms": held, "queries": [_tsquery(t) for t in held], "cap": CANDIDATE_POSTINGS + 1},
            )
            .all()
        )
        counts = {term: int(n) for term, n in rows}
    return {t: counts.get(t, 0) for t in terms}


def _total_postgres(session: Session) -> tuple[int, int]:
    """(chunks, words) memory_words holds over every chat: FTS5's row count and token total."""
    chunks, words = (
        session.connection()
        .execute(text("SELECT coalesce(sum(chunks), 0), coalesce(sum(words), 0) FROM memory_word_total"))
        .one()
    )
    return int(chunks), int(words)


def _chat_chunk_count_postgres(session: Session, chat_id: int) -> int:
    found = (
        session.connection()
        .execute(text("SELECT chunks FROM memory_chunk_count WHERE chat_id = :chat_id"), {"chat_id": chat_id})
        .scalar()
    )
    return int(found or 0)


def _lexical_candidates_postgres(
    session: Session, weights: Mapping[str, float], *, limit: int, doc_freq: Mapping[str, int] | None
) -> dict[int, float]:
    """FTS5's bm25() over memory_words, step by step as its C code computes it (k1 1.2, b 0.75; idf
    from how many chunks hold the word among all of them; a chunk's length against the average over
    all of them), times the word's weight; the postings of at most CANDIDATE_POSTINGS chunks come
    back (candidate_terms cuts the words to fit), few enough to sum and sort here."""
    terms = [t for t in weights if _indexable(t)]
    if not terms:
        return {}
    freq = doc_freq if doc_freq is not None else _doc_freq_postgres(session, terms)
    chunks, words = _total_postgres(session)
    if not chunks:
        return {}
    avgdl = float(words) / float(chunks)
    k1, b = f"CAST({BM25_K1!r} AS float8)", f"CAST({BM25_B!r} AS float8)"
    tf = "CAST(w.counts ->> q.term AS float8)"
    one = (
        f"(q.idf * (({tf} * ({k1} + CAST(1.0 AS float8))) / "
        f"({tf} + {k1} * (CAST(1 AS float8) - {b} + {b} * CAST(w.length AS float8) / :avgdl)))) * q.weight"
    )
    rows = session.connection().execute(
        text(
            f"SELECT w.chunk_id, q.n, {one} FROM unnest(CAST(:terms AS text[]), CAST(:queries AS tsquery[]), "
            "CAST(:idfs AS float8[]), CAST(:weights AS float8[])) WITH ORDINALITY AS q(term, query, idf, weight, n) "
            "JOIN memory_words w ON w.words @@ q.query"
        ),
        {
            "terms": terms,
            "queries": [_tsquery(t) for t in terms],
            "idfs": [fts5_idf(freq.get(t, 0), chunks) for t in terms],
            "weights": [float(weights[t]) for t in terms],
            "avgdl": avgdl,
        },
    )
    # Each chunk's words summed here as SQLite sums them (compensated, in the words' order), best
    # first; equal scores by descending id, the order SQLite's sorter leaves them in. Grouped here,
    # not in SQL: PostgreSQL's grouping sorted every posting first, twice the time of the rest.
    parts: dict[int, list[tuple[int, float]]] = {}
    for chunk_id, n, score in rows.all():  # all at once: fetched row by row it cost a fifth more
        parts.setdefault(chunk_id, []).append((n, score))
    scores = {
        c: found[0][1] if len(found) == 1 else sqlite_sum([score for _, score in sorted(found)])
        for c, found in parts.items()
    }
    best = sorted(scores, key=lambda c: (-scores[c], -c))[:limit]
    return {c: scores[c] for c in best}


def _reaching_postgres(session: Session, chat_id: int, message_id: int | None) -> tuple[frozenset[int], int]:
    if message_id is None:
        return frozenset(), 0
    conn = session.connection()
    where = "FROM memory_chunk WHERE chat_id = :chat_id AND last_message_id >= :message_id"
    params = {"chat_id": chat_id, "message_id": message_id}
    ids = frozenset(int(i) for i in conn.execute(text(f"SELECT id {where}"), params).scalars())
    if not ids:
        return ids, 0
    windows = conn.execute(
        text(f"SELECT count(*) FROM memory_vector WHERE chunk_id IN (SELECT id {where})"), params
    ).scalar()
    return ids, int(windows or 0)


def _chronological_neighbours_postgres(
    session: Session, chunk_ids: Sequence[int]
) -> dict[int, tuple[int | None, int | None]]:
    if not chunk_ids:
        return {}
    side = (
        "SELECT n.id FROM memory_chunk n WHERE n.chat_id = c.chat_id "
        "AND (n.first_message_at, n.id) {cmp} (c.first_message_at, c.id) "
        "ORDER BY n.first_message_at {order}, n.id {order} LIMIT 1"
    )
    sql = (
        f"SELECT c.id, ({side.format(cmp='<', order='DESC')}), ({side.format(cmp='>', order='ASC')}) "
        "FROM memory_chunk c WHERE c.id = ANY(CAST(:ids AS integer[])) ORDER BY c.id"
    )
    rows = session.connection().execute(text(sql), {"ids": list(chunk_ids)}).all()
    return {int(c): (p, n) for c, p, n in rows}


def _chunk_days_postgres(session: Session, chunk_ids: Sequence[int]) -> dict[int, tuple[date, date]]:
    if not chunk_ids:
        return {}
    rows = session.connection().execute(
        text(
            "SELECT id, first_message_at, last_message_at FROM memory_chunk "
            "WHERE id = ANY(CAST(:ids AS integer[])) ORDER BY id"
        ),
        {"ids": list(chunk_ids)},
    )
    # Timestamps are UTC without an offset, as on SQLite: their date is the UTC day.
    return {int(i): (first.date(), last.date()) for i, first, last in rows}


def _chunk_rows_postgres(session: Session, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
    if not chunk_ids:
        return {}
    rows = session.connection().execute(
        text(
            "SELECT id, content, message_ids, message_count, status, first_message_at, last_message_at, "
            "fingerprint FROM memory_chunk WHERE id = ANY(CAST(:ids AS integer[]))"
        ),
        {"ids": list(chunk_ids)},
    )
    return {
        row[0]: ChunkRow(
            row[0],
            row[1],
            row[2] if isinstance(row[2], list) else json.loads(row[2]),
            row[3],
            row[4],
            _stored_datetime(row[5]),
            _stored_datetime(row[6]),
            row[7] or "",
        )
        for row in rows
    }


def _message_texts_postgres(session: Session, chat_id: int, ids: Sequence[int]) -> list[MessageText]:
    if not ids:
        return []
    rows = session.connection().execute(
        text(
            "SELECT id, name, content, created_at FROM message WHERE chat_id = :chat_id "
            "AND kind = 'message' AND NOT hidden AND status NOT IN ('error', 'streaming') "
            "AND id = ANY(CAST(:ids AS integer[])) ORDER BY id"
        ),
        {"chat_id": chat_id, "ids": list(ids)},
    )
    return [MessageText(i, name, content, _stored_datetime(at)) for i, name, content, at in rows]
