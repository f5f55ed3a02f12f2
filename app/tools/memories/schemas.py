"""The JSON API's shapes for memories."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from app.platform.modelbase import RowId
from app.tools.memories.core.rules import MAX_LONG_TERM_CHARS


class MemoryIn(BaseModel):
    content: str = Field(max_length=MAX_LONG_TERM_CHARS)
    character_id: RowId | None = None  # None: a memory for all characters


class MemoryUpdate(BaseModel):
    content: str = Field(max_length=MAX_LONG_TERM_CHARS)


class MemoryRead(BaseModel):
    id: int
    character_id: int | None
    character_name: str | None
    content: str
    created_in_chat_id: int | None
    created_at: datetime
    updated_at: datetime


class MemoryList(BaseModel):
    total: int
    offset: int
    limit: int
    memories: list[MemoryRead]


class ShortTermRead(BaseModel):
    id: int
    content: str
    expires_after_replies: int | None
    replies_seen: int
    expires_at: datetime | None
    created_at: datetime
