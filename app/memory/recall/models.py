from datetime import datetime

from sqlalchemy import Column, Index, LargeBinary, event
from sqlmodel import Field, SQLModel

from app.memory.recall.core.lexical import index_text
from app.memory.recall.index import write_words_postgres
from app.platform.modelbase import json_field
from app.platform.timeutil import utcnow

# "waiting": no vector yet; "vectorized": has vectors of `embedding_space_id`; "unavailable": the
# embedding source failed (the error says why).
CHUNK_STATUSES = ("waiting", "vectorized", "unavailable")


class MemoryChunk(SQLModel, table=True):
    """Five old messages of a chat, as Memory Recall finds them again."""

    __tablename__ = "memory_chunk"
    __table_args__ = (
        Index("ix_memory_chunk_chat_time", "chat_id", "first_message_at", "id"),
        Index("ix_memory_chunk_chat_last_message", "chat_id", "last_message_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE", index=True)
    content: str
    message_ids: list = json_field(list)
    # The newest of message_ids (None for a memory imported from elsewhere): a search for the prompt
    # leaves out the memories of messages still in the recent-message window by it.
    last_message_id: int | None = None
    fingerprint: str = ""
    message_count: int = 0
    first_message_at: datetime
    last_message_at: datetime
    created_at: datetime = Field(default_factory=utcnow)
    status: str = "waiting"
    embedding_space_id: str | None = None
    error: str | None = None
    # Set on chunks imported from a file: they never move this chat's chunk cursor.
    source_chat_id: str | None = None


class MemoryVector(SQLModel, table=True):
    """One embedded window of a chunk (a message, or part of a long one), float32 little-endian,
    with its sign bits (`code`) for the fast first pass of a search (see index.py).

    Ids only grow (AUTOINCREMENT), so a search index can load just the rows newer than the ones it
    holds; a trigger notes deletions in `memory_tombstone`, which it drops."""

    __tablename__ = "memory_vector"
    __table_args__ = (
        Index("ix_memory_vector_chat_space", "chat_id", "space_id", "id"),
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int
    chunk_id: int = Field(foreign_key="memory_chunk.id", ondelete="CASCADE", index=True)
    space_id: str
    window: int = 0
    embedding: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    code: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


@event.listens_for(MemoryChunk, "after_insert")
def _index_words(mapper, connection, chunk: MemoryChunk) -> None:
    """Every new chunk's words go into the full-text index (fts_memory_chunk, see index.py); SQLite
    cannot stem them itself, so no trigger can. Deletion is a trigger. On PostgreSQL they go into
    memory_words (see index.py; its foreign key removes them)."""
    if connection.dialect.name == "postgresql":
        write_words_postgres(connection, chunk.id, chunk.chat_id, chunk.content)
        return
    connection.exec_driver_sql(
        "INSERT INTO fts_memory_chunk (rowid, body) VALUES (?, ?)",
        (chunk.id, index_text(chunk.content, chunk.chat_id)),
    )
