"""What the lorebook forms and API accept."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, field_validator

from app.lore.core.activation import POSITIONS, ROLES, SELECTIVE_LOGICS, regex_key_problem
from app.platform.core.names import checked
from app.platform.modelbase import RowId

MAX_KEYS = 1000
MAX_KEY_CHARS = 1000
MAX_CONTENT_CHARS = 100_000


class BookIn(BaseModel):
    name: Annotated[str, checked("A lorebook's name")] = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=10_000)
    enabled: bool = True
    is_global: bool = False
    token_budget: int = Field(default=2048, ge=0, le=1_000_000)
    entry_limit: int = Field(default=100, ge=1, le=1000)
    recursive: bool = False
    max_depth: int = Field(default=3, ge=1, le=10)
    scan_depth: int = Field(default=2, ge=0, le=1000)
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False


class EntryIn(BaseModel):
    title: str = Field(default="", max_length=500)
    content: str = Field(default="", max_length=MAX_CONTENT_CHARS)
    keys: list[str] = Field(default_factory=list, max_length=MAX_KEYS)
    secondary_keys: list[str] = Field(default_factory=list, max_length=MAX_KEYS)
    selective_logic: str = "and_any"
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    constant: bool = False
    enabled: bool = True
    order: int = Field(default=100, ge=-1_000_000, le=1_000_000)
    position: str = "before_char"
    depth: int = Field(default=4, ge=0, le=1000)
    role: str = "system"
    probability: int = Field(default=100, ge=0, le=100)
    use_probability: bool = True
    scan_depth: int | None = Field(default=None, ge=0, le=1000)
    sticky: int = Field(default=0, ge=0, le=100_000)
    cooldown: int = Field(default=0, ge=0, le=100_000)
    delay: int = Field(default=0, ge=0, le=100_000)
    group: str = Field(default="", max_length=500)
    group_weight: int = Field(default=100, ge=0, le=1_000_000)
    group_override: bool = False
    recursion: bool = False
    exclude_recursion: bool = False
    delay_until_recursion: int = Field(default=0, ge=0, le=10)
    selective: bool = True
    use_group_scoring: bool | None = None

    @field_validator("keys", "secondary_keys")
    @classmethod
    def _keys(cls, keys: list[str]) -> list[str]:
        cleaned = []
        for key in keys:
            key = key.strip()
            if not key:
                continue
            if len(key) > MAX_KEY_CHARS:
                raise ValueError(f"a key is longer than {MAX_KEY_CHARS} characters")
            if (problem := regex_key_problem(key)) is not None:
                raise ValueError(f"the key {key} cannot be used: {problem}")
            cleaned.append(key)
        return cleaned

    @field_validator("selective_logic", "position", "role")
    @classmethod
    def _choice(cls, v: str, info) -> str:
        allowed = {"selective_logic": SELECTIVE_LOGICS, "position": POSITIONS, "role": ROLES}[info.field_name]
        if v not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return v


class KeywordTestIn(BaseModel):
    text: str = Field(min_length=1, max_length=200_000)
    book_ids: list[RowId] | None = None  # None: every book the chat uses (or all enabled books)
    chat_id: RowId | None = None


class ChatBooksIn(BaseModel):
    book_ids: list[RowId]


class LinkIn(BaseModel):
    target: str  # "chat" | "character" | "persona"
    target_id: RowId
