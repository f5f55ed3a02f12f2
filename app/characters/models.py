from datetime import datetime

from sqlalchemy import JSON, Column
from sqlmodel import Field, SQLModel

from app.platform.modelbase import json_field
from app.platform.timeutil import utcnow


class Character(SQLModel, table=True):
    """A character card. The V2 fields are columns; everything else a card carried is kept verbatim
    in card_data_extra / card_top_extra / extensions so an export loses nothing."""

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True)
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    creator_notes: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""
    alternate_greetings: list = json_field(list)
    tags: list = json_field(list)
    creator: str = ""
    character_version: str = ""
    extensions: dict = json_field()
    character_book: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    card_spec: str = "chara_card_v2"
    card_data_extra: dict = json_field()
    card_top_extra: dict = json_field()
    avatar_id: int | None = Field(default=None, foreign_key="image.id", ondelete="SET NULL")
    # SillyTavern's avatar key: the PNG file name the card was imported from (`Seraphina.png`). Its
    # group files and group chats name members by it (app/chats/core/st_group.py).
    st_avatar: str | None = Field(default=None, max_length=255)
    # The roleplay view (issue 29). A full-size picture shown beside the story (None: the card's image);
    # the background its chats open with ("builtin:<name>" or "image:<background id>", None: none); the
    # colour of its speech (#rrggbb, None: one picked from its name); expression images by SillyTavern's
    # expression names ({"joy": image id, ...}).
    art_id: int | None = Field(default=None, foreign_key="image.id", ondelete="SET NULL")
    background: str | None = Field(default=None, max_length=64)
    colour: str | None = Field(default=None, max_length=7)
    expressions: dict = json_field()
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
