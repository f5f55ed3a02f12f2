"""How a character names the user: one row per (character, persona).

Nickname, prefix and suffix belong to one character's way of speaking (Aria calls you "Captain Mara",
Brom calls you "kid"), so they live here; pronouns, form of address and time zone are the user's own
and live on the persona (app/personas/models.py), read by every character alike. `persona_id` is None
in a chat without a persona. SQL's unique constraint counts two NULL persona ids as different, so a
partial index keeps one persona-less row per character too.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from app.platform import modelbase as _  # noqa: F401  (naming convention before tables are declared)
from app.platform.timeutil import utcnow


class UserAddress(SQLModel, table=True):
    __tablename__ = "user_address"
    __table_args__ = (
        UniqueConstraint("character_id", "persona_id", name="uq_user_address_character_persona"),
        Index(
            "uq_user_address_character_no_persona",
            "character_id",
            unique=True,
            sqlite_where=text("persona_id IS NULL"),
            postgresql_where=text("persona_id IS NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    character_id: int = Field(foreign_key="character.id", ondelete="CASCADE")
    persona_id: int | None = Field(default=None, foreign_key="persona.id", ondelete="CASCADE")
    nickname: str = ""
    prefix: str = ""
    suffix: str = ""
    updated_at: datetime = Field(default_factory=utcnow)
