"""Lorebooks as stored. The fields mirror app.lore.core.activation's LoreBook and LoreEntry (same names,
same defaults), which the scan reads; `extra` keeps what an imported file held that Sugo does not
model, so an export gives it back."""

from datetime import datetime

from sqlmodel import Field, SQLModel

from app.platform.modelbase import json_field
from app.platform.timeutil import utcnow


class Lorebook(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str
    description: str = ""
    enabled: bool = True
    # Active in every chat (Lorebooks page → "Use in every chat"); otherwise through links.
    is_global: bool = False
    token_budget: int = 2048  # 0 = unlimited
    entry_limit: int = 100  # 1..1000
    recursive: bool = False
    max_depth: int = 3  # 1..10
    scan_depth: int = 2
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    extra: dict = json_field()
    # Bumped on every change to the book or its entries: compiled matchers are cached per version.
    version: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class LorebookLink(SQLModel, table=True):
    """A lorebook attached to one chat, character or persona (exactly one of the three is set)."""

    __tablename__ = "lorebook_link"

    id: int | None = Field(default=None, primary_key=True)
    lorebook_id: int = Field(foreign_key="lorebook.id", ondelete="CASCADE", index=True)
    chat_id: int | None = Field(default=None, foreign_key="chat.id", ondelete="CASCADE", index=True)
    character_id: int | None = Field(default=None, foreign_key="character.id", ondelete="CASCADE", index=True)
    persona_id: int | None = Field(default=None, foreign_key="persona.id", ondelete="CASCADE", index=True)


class LorebookEntry(SQLModel, table=True):
    __tablename__ = "lorebook_entry"

    id: int | None = Field(default=None, primary_key=True)
    lorebook_id: int = Field(foreign_key="lorebook.id", ondelete="CASCADE", index=True)
    # The entry's id in the file it came from (World Info uid...), for lossless export.
    file_id: int | None = None
    title: str = ""
    content: str = ""
    keys: list = json_field(list)
    secondary_keys: list = json_field(list)
    selective_logic: str = "and_any"
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    constant: bool = False
    enabled: bool = True
    order: int = 100
    position: str = "before_char"
    depth: int = 4
    role: str = "system"
    probability: int = 100
    use_probability: bool = True
    scan_depth: int | None = None
    sticky: int = 0
    cooldown: int = 0
    delay: int = 0
    group: str = ""
    group_weight: int = 100
    group_override: bool = False
    recursion: bool = False
    exclude_recursion: bool = False
    delay_until_recursion: int = 0
    selective: bool = True
    use_group_scoring: bool | None = None
    extra: dict = json_field()
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
