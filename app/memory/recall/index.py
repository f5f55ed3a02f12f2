"""The first pass of a vector search: the sign bits of every window of a chat, held in memory.

Comparing sign bits (Hamming distance) over 600,000 windows takes a few milliseconds where exact
cosine over their float32 blobs in SQLite takes over a second, so a search takes the nearest few
hundred windows by bits, then scores only those exactly (vectors.similarities_by_vector). A chat
small enough to fit in that first cut is thus searched exactly.

The bits are loaded once per (database, chat, space) and then kept in step cheaply: vector ids only
grow, so new rows are those above the highest id held; any deletion bumps the chat's
memory_revision (by trigger), and a changed revision reloads everything.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlmodel import Session

MAX_INDEXES = 32  # chats whose bits stay in memory (least recently searched go first)


@dataclass
class _Bits:
    revision: int = -1
    max_id: int = 0
    size: int = 0
    vector_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    chunk_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
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
            self.words = [_grow(w, capacity) for w in self.words]
        end = self.size + len(rows)
        self.vector_ids[self.size : end] = [r[0] for r in rows]
        self.chunk_ids[self.size : end] = [r[1] for r in rows]
        for column, word in enumerate(self.words):
            word[self.size : end] = codes[:, column]
        self.size = end
        self.max_id = int(rows[-1][0])

    def nearest(self, query_code: bytes, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """(vector ids, chunk ids) of the `limit` windows whose bits differ least from the query's."""
        if self.size == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        query_words = np.frombuffer(query_code, dtype=np.uint64)
        distance = np.zeros(self.size, dtype=np.uint16)
        scratch = np.empty(self.size, dtype=np.uint64)
        counts = np.empty(self.size, dtype=np.uint8)
        for word, q in zip(self.words, query_words, strict=True):
            np.bitwise_xor(word[: self.size], q, out=scratch)
            np.bitwise_count(scratch, out=counts)
            distance += counts
        if limit < self.size:
            picked = np.argpartition(distance, limit)[:limit]
        else:
            picked = np.arange(self.size)
        return self.vector_ids[picked], self.chunk_ids[picked]


def _grow(values: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.empty(capacity, dtype=values.dtype)
    grown[: len(values)] = values
    return grown


_indexes: OrderedDict[tuple[str, int, str], _Bits] = OrderedDict()
_lock = threading.Lock()


def _revision(session: Session, chat_id: int) -> int:
    row = (
        session.connection()
        .exec_driver_sql("SELECT deletions FROM memory_revision WHERE chat_id = ?", (chat_id,))
        .first()
    )
    return int(row[0]) if row else 0


def nearest_windows(
    session: Session, chat_id: int, space_id: str, query_code: bytes, *, limit: int
) -> tuple[np.ndarray, np.ndarray]:
    """The chat's windows (of one space) nearest to the query by sign bits: (vector ids, chunk ids)."""
    key = (str(session.get_bind().url), chat_id, space_id)
    with _lock:
        bits = _indexes.pop(key, None) or _Bits()
        _indexes[key] = bits
        while len(_indexes) > MAX_INDEXES:
            _indexes.popitem(last=False)
        revision = _revision(session, chat_id)
        if revision != bits.revision:
            bits = _indexes[key] = _Bits(revision=revision)
        rows = (
            session.connection()
            .exec_driver_sql(
                "SELECT id, chunk_id, code FROM memory_vector WHERE chat_id = ? AND space_id = ? AND id > ? ORDER BY id",
                (chat_id, space_id, bits.max_id),
            )
            .all()
        )
        bits.append(rows)
        return bits.nearest(query_code, limit)


def forget_all() -> None:
    """Drop every cached index (tests, and after a database is replaced)."""
    with _lock:
        _indexes.clear()


def lexical_scores(
    session: Session, chat_id: int, match: str | None, *, limit: int, only: Sequence[int] | None = None
) -> dict[int, float]:
    """BM25 scores (higher is better) of the chat's chunks for an FTS5 match expression: the best
    `limit`, or those among `only`."""
    if not match or (only is not None and not only):
        return {}
    sql = ("SELECT rowid, -bm25(fts_memory_chunk) FROM fts_memory_chunk "
           "WHERE fts_memory_chunk MATCH ? AND chat_id = ?")  # fmt: skip
    params: list = [match, chat_id]
    if only is not None:
        sql += f" AND rowid IN ({','.join('?' * len(only))})"
        params += list(only)
    sql += " ORDER BY bm25(fts_memory_chunk) LIMIT ?"
    params.append(limit if only is None else len(only))
    return {
        int(rowid): float(score) for rowid, score in session.connection().exec_driver_sql(sql, tuple(params))
    }


def chronological_neighbours(
    session: Session, chunk_ids: Sequence[int]
) -> dict[int, tuple[int | None, int | None]]:
    """For each chunk, the chunks just before and just after it in its chat's time order."""
    if not chunk_ids:
        return {}
    side = ("SELECT n.id FROM memory_chunk n WHERE n.chat_id = c.chat_id "
            "AND (n.first_message_at, n.id) {cmp} (c.first_message_at, c.id) "
            "ORDER BY n.first_message_at {order}, n.id {order} LIMIT 1")  # fmt: skip
    sql = (f"SELECT c.id, ({side.format(cmp='<', order='DESC')}), ({side.format(cmp='>', order='ASC')}) "
           f"FROM memory_chunk c WHERE c.id IN ({','.join('?' * len(chunk_ids))})")  # fmt: skip
    rows = session.connection().exec_driver_sql(sql, tuple(chunk_ids)).all()
    return {int(cid): (prev, nxt) for cid, prev, nxt in rows}
