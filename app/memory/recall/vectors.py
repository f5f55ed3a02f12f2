"""Vector storage for Memory Recall: float32 blobs with their sign bits, compared with sqlite-vec's
cosine distance. The SQLite-specific SQL of recall lives here, in index.py and in app/db.py."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

import numpy as np
from sqlmodel import Session

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
    for window, vector in enumerate(vectors):
        session.add(MemoryVector(chat_id=chat_id, chunk_id=chunk_id, space_id=space_id, window=window,
                                 embedding=pack(vector), code=sign_code(vector)))  # fmt: skip


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
    rows = (
        session.connection()
        .exec_driver_sql(
            f"SELECT id, chunk_id, 1 - vec_distance_cosine(embedding, ?) FROM memory_vector WHERE id IN ({marks})",
            (pack(query), *ids),
        )
        .all()
    )
    return {vid: (chunk_id, float(sim)) for vid, chunk_id, sim in rows}


def similarities_by_chunk(
    session: Session, chunk_ids: Iterable[int], space_id: str, query: Sequence[float]
) -> dict[int, float]:
    """Best exact cosine similarity of the query with any window of each given chunk, in one space."""
    marks, ids = _in(chunk_ids)
    if not ids:
        return {}
    rows = (
        session.connection()
        .exec_driver_sql(
            "SELECT chunk_id, max(1 - vec_distance_cosine(embedding, ?)) FROM memory_vector "
            f"WHERE space_id = ? AND chunk_id IN ({marks}) GROUP BY chunk_id",
            (pack(query), space_id, *ids),
        )
        .all()
    )
    return {chunk_id: float(sim) for chunk_id, sim in rows}
