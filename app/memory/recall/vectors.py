"""Vector storage for Memory Recall: float32 blobs compared with sqlite-vec's cosine distance. The
SQLite-specific SQL of recall lives here (and in app/db.py), nowhere else."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from sqlmodel import Session

from app.memory.recall.models import MemoryVector

_SIMILARITY_SQL = (
    "SELECT v.chunk_id, max(1 - vec_distance_cosine(v.embedding, ?)) "
    "FROM memory_vector v JOIN memory_chunk c ON c.id = v.chunk_id "
    "WHERE c.chat_id = ? AND v.space_id = ? GROUP BY v.chunk_id"
)


def pack(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def unpack(blob: bytes) -> list[float]:
    values = array("f")
    values.frombytes(blob)
    return values.tolist()


def store_vectors(session: Session, chunk_id: int, space_id: str, vectors: Sequence[Sequence[float]]) -> None:
    for window, vector in enumerate(vectors):
        session.add(MemoryVector(chunk_id=chunk_id, space_id=space_id, window=window, embedding=pack(vector)))


def chunk_similarities(session: Session, chat_id: int, space_id: str, query: Sequence[float]) -> dict[int, float]:
    """Best cosine similarity of the query with any window of each chunk of the chat, in one space."""
    rows = session.connection().exec_driver_sql(_SIMILARITY_SQL, (pack(query), chat_id, space_id)).all()
    return {chunk_id: float(similarity) for chunk_id, similarity in rows}
