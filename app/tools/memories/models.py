from datetime import datetime

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from app.platform.timeutil import utcnow


class LongTermMemory(SQLModel, table=True):
    """A stable fact or preference of the user, kept by a character (`character_id`) or for every
    character (`character_id` None: a global memory). Written by the memory tool or on the Memories
    page; sent in every prompt of the characters it belongs to."""

    __tablename__ = "long_term_memory"
    __table_args__ = (Index("ix_long_term_memory_character", "character_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    character_id: int | None = Field(default=None, foreign_key="character.id", ondelete="CASCADE")
    content: str
    # The chat the tool call came from (None: added on the page); the chat may be deleted since.
    created_in_chat_id: int | None = Field(default=None, foreign_key="chat.id", ondelete="SET NULL")
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ShortTermMemory(SQLModel, table=True):
    """One item of a chat's short-term memory: working notes for the current arc, gone after
    `expires_after_replies` replies (counted when a reply is written: `replies_seen`) or at
    `expires_at` (UTC), whichever comes first."""

    __tablename__ = "short_term_memory"
    __table_args__ = (Index("ix_short_term_memory_chat", "chat_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    content: str
    expires_after_replies: int | None = None
    # -1 when written during a reply: that reply ends before the item has been read by any prompt.
    replies_seen: int = 0
    expires_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
