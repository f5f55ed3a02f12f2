"""Vector storage for Memory Recall: float32 blobs with their sign bits, compared with sqlite-vec's
cosine distance. The SQLite-specific SQL of recall lives here, in index.py and in app/platform/db.py.
On PostgreSQL a trigger copies each blob into memory_embedding as a pgvector `vector`, compared
with pgvector's cosine distance (`<=>`) in SQL (the *_postgres functions)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

import numpy as np
from sqlalchemy import text
from sqlmodel import Session

from app.memory.recall.core.formats import space_dims
from app.memory.recall.index import ensure_space_index, on_postgres, vector_text
from app.memory.recall.models import MemoryVector

_PLACEHOLDERS = "?"


def pack(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def unpack(blob: bytes) -> list[float]:
    values = array("f")
    values.frombytes(blob)
    return values.tolist()


def sign_code(vector: Sequence[float]) -> bytes:
    """One bit per dimension (1 where the value is positive), padded to whole 64-bit words: the
    Hamming distance of two codes tracks the angle between the vectors."""
    bits = np.packbits(np.asarray(vector, dtype=np.float32) > 0)
    padding = (-len(bits)) % 8
    return bits.tobytes() + bytes(padding)


def store_vectors(
    session: Session, chat_id: int, chunk_id: int, space_id: str, vectors: Sequence[Sequence[float]]
) -> None:
    """The chunk's windows under `space_id`; every vector must have the size the space names (the
    embedders and the import check it first: one of another size here is a bug, never stored)."""
    dims = space_dims(space_id)
    if dims is not None and any(len(vector) != dims for vector in vectors):
        raise ValueError(
            f"vectors of {sorted({len(v) for v in vectors})} numbers cannot go in space {space_id}"
        )
    if vectors and on_postgres(session):
        ensure_space_index(session.connection(), space_id, len(vectors[0]))
    for window, vector in enumerate(vectors):
        session.add(
            MemoryVector(
                chat_id=chat_id,
                chunk_id=chunk_id,
                space_id=space_id,
                window=window,
                embedding=pack(vector),
                code=sign_code(vector),
            )
        )


def _in(values: Iterable[int]) -> tuple[str, list[int]]:
    ids = list(values)
    return ",".join(_PLACEHOLDERS * len(ids)), ids


def similarities_by_vector(
    session: Session, vector_ids: Iterable[int], query: Sequence[float]
) -> dict[int, tuple[int, float]]:
    """Exact cosine similarity of the query with each given vector: {vector id: (chunk id, similarity)}."""
    marks, ids = _in(vector_ids)
    if not ids:
        return {}
    if on_postgres(session):
        return _similarities_by_vector_postgres(session, ids, query)
    found = _one_row(
        session,
        "SELECT group_concat(id || ' ' || chunk_id || ' ' || "
        "printf('%!.17g', 1 - vec_distance_cosine(embedding, ?)), ' ') "
        f"FROM memory_vector WHERE id IN ({marks}) AND length(embedding) = ?",
        (pack(query), *ids, 4 * len(query)),
    )
    return {int(found[i]): (int(found[i + 1]), float(found[i + 2])) for i in range(0, len(found), 3)}


def similarities_by_chunk(
    session: Session, chunk_ids: Iterable[int], space_id: str, query: Sequence[float]
) -> dict[int, float]:
    """Best exact cosine similarity of the query with any window of each given chunk, in one space."""
    marks, ids = _in(chunk_ids)
    if not ids:
        return {}
    if on_postgres(session):
        return _similarities_by_chunk_postgres(session, ids, space_id, query)
    found = _one_row(
        session,
        "SELECT group_concat(chunk_id || ' ' || printf('%!.17g', sim), ' ') FROM ("
        "SELECT chunk_id, max(1 - vec_distance_cosine(embedding, ?)) AS sim FROM memory_vector "
        f"WHERE space_id = ? AND chunk_id IN ({marks}) AND length(embedding) = ? GROUP BY chunk_id)",
        (pack(query), space_id, *ids, 4 * len(query)),
    )
    return {int(found[i]): float(found[i + 1]) for i in range(0, len(found), 2)}


# Both similarity queries skip vectors of another size than the query's (`length(embedding)`, four
# bytes a number): one stored before imports were checked would fail the whole statement.


def _one_row(session: Session, sql: str, params: tuple) -> list[str]:
    # One text row, not one row per vector: see index.one_row.
    return (session.connection().exec_driver_sql(sql, params).scalar() or "").split()


def _similarities_by_vector_postgres(
    session: Session, ids: list[int], query: Sequence[float]
) -> dict[int, tuple[int, float]]:
    rows = session.connection().execute(
        text(
            "SELECT vector_id, chunk_id, 1 - (embedding <=> CAST(:query AS vector)) FROM memory_embedding "
            "WHERE vector_id = ANY(CAST(:ids AS integer[])) AND vector_dims(embedding) = :dims "
            "ORDER BY vector_id"  # id order, as SQLite gives them
        ),
        {"query": vector_text(query), "ids": ids, "dims": len(query)},
    )
    return {vector_id: (chunk_id, float(similarity)) for vector_id, chunk_id, similarity in rows}


def _similarities_by_chunk_postgres(
    session: Session, ids: list[int], space_id: str, query: Sequence[float]
) -> dict[int, float]:
    rows = session.connection().execute(
        text(
            "SELECT chunk_id, max(1 - (embedding <=> CAST(:query AS vector))) FROM memory_embedding "
            "WHERE space_id = :space_id AND chunk_id = ANY(CAST(:ids AS integer[])) "
            "AND vector_dims(embedding) = :dims GROUP BY chunk_id ORDER BY chunk_id"
        ),
        {"query": vector_text(query), "space_id": space_id, "ids": ids, "dims": len(query)},
    )
    return {chunk_id: float(similarity) for chunk_id, similarity in rows}
