from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from app.platform.core.names import checked
from app.platform.core.speech import SpeechColour


class CharacterIn(BaseModel):
    name: Annotated[str, checked("A character's name")] = Field(min_length=1, max_length=200)
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    creator_notes: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""
    alternate_greetings: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    creator: str = ""
    character_version: str = ""
    # The Character's Note (SillyTavern's `extensions.depth_prompt`), injected at a depth among the
    # recent messages. None leaves what the card has untouched.
    character_note: str | None = None
    character_note_depth: int | None = Field(default=None, ge=0, le=100)
    character_note_role: str | None = Field(default=None, pattern="^(system|user|assistant)$")
    # How readily the character answers by itself in a group chat's natural order, 0 to 1
    # (SillyTavern's `extensions.talkativeness`; 0.5 when the card has none). None leaves the card's.
    talkativeness: float | None = Field(default=None, ge=0, le=1)
    # The colour of its speech in a chat (#rrggbb; None: one picked for it). Left out of an update, the
    # stored colour stays (app/characters/service.py).
    colour: SpeechColour = None


class CharacterRead(CharacterIn):
    name: str  # as stored: an imported card keeps the name it came with (app/platform/core/names.py)
    colour: str | None = None  # as stored, unchecked
    id: int
    avatar_url: str | None
    # The roleplay view (issue 29): the picture beside the story (None: the card's picture stands in),
    # and the expression pictures by name.
    art_url: str | None = None
    expression_urls: dict[str, str] = Field(default_factory=dict)
    extensions: dict
    has_character_book: bool
    card_spec: str
    created_at: datetime
    updated_at: datetime
