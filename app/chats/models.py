from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import JSON, Column, Index, Text
from sqlmodel import Field, SQLModel

from app.platform.modelbase import json_field
from app.platform.timeutil import utcnow

CHAT_MODES = ("roleplay", "conversation", "game")
# The modes Advanced Memory runs in (scenes, recaps, recall by scene); Game chats have no Chat Summary,
# recollections nor decided visibility of their own (the Game Master reads everything).
SCENE_MODES = ("roleplay", "game")
MESSAGE_ROLES = ("user", "assistant", "system")
# "streaming" while a reply arrives; "partial" when the stream broke or was stopped with text kept;
# "error" when nothing arrived.
MESSAGE_STATUSES = ("ok", "streaming", "partial", "error")


class Chat(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str
    mode: str = "roleplay"
    connection_id: int | None = Field(default=None, foreign_key="connection.id", ondelete="SET NULL")
    persona_id: int | None = Field(default=None, foreign_key="persona.id", ondelete="SET NULL")
    # Per-chat overrides (generation parameters, recent-message limit, reply order); see
    # chats/settings.py for the keys and their defaults.
    settings: dict = json_field()
    # What an imported SillyTavern chat carried in its header (chat_metadata and unknown keys),
    # kept so an export gives it back.
    st_header: dict = json_field()
    # A Game chat's later session: the id of the game's first session (app/game/sessions.py). No
    # foreign key: a session whose first one was deleted still finds the others by it.
    game_root_id: int | None = Field(default=None, index=True)
    # Group chats taking turns remember whose turn is next.
    next_speaker: int = 0
    # Macro variables ({{setvar}}, {{getvar}}, {{addvar}}), per chat.
    variables: dict = json_field()
    # Lorebook timed effects (sticky, cooldown) by entry id, and the last scan for Active Context.
    lore_timed: dict = json_field()
    lore_last_scan: dict = json_field()
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    last_message_at: datetime = Field(default_factory=utcnow, index=True)


class ChatCharacter(SQLModel, table=True):
    __tablename__ = "chat_character"

    chat_id: int = Field(foreign_key="chat.id", primary_key=True, ondelete="CASCADE")
    character_id: int = Field(foreign_key="character.id", primary_key=True, ondelete="CASCADE")
    position: int = 0
    # A muted member never answers by itself (turn-taking passes it by), only when asked for by name:
    # the composer's "Who answers" or /trigger (app/chats/core/turns.py).
    muted: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    # This member's own "new start": it reads the chat from this message on (its history, its
    # memories and the scenes it may recall), as if it joined here. None: from the beginning. No foreign
    # key: a start on a message deleted since begins at the next one.
    start_message_id: int | None = None


class Message(SQLModel, table=True):
    """One turn. `swipes` holds every alternative ({content, status, error, model, created_at,
    gen_started, gen_finished, usage, reasoning, reasoning_ms, st}); content/status/error mirror the
    active one so the prompt builder and lists read one column. A reply's reasoning stays in its
    version, never in `content` (app/generation/reasoning.py)."""

    # The second index covers the prompt's window count, so a long chat is counted from the index
    # alone (app/prompt/service.py); the third a Conversation chat's days (app/memory/days/service.py).
    __table_args__ = (
        Index("ix_message_chat_id_id", "chat_id", "id"),
        Index("ix_message_chat_window", "chat_id", "kind", "id", "status", "hidden", "private"),
        Index("ix_message_chat_days", "chat_id", "kind", "hidden", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    chat_id: int = Field(foreign_key="chat.id", ondelete="CASCADE")
    role: str = "user"
    # "message", or "refresh": a mark the user set with /refresh; the AI reads nothing before the
    # newest one (deleting the mark undoes the cut).
    kind: str = Field(default="message", sa_column_kwargs={"server_default": "message"})
    character_id: int | None = Field(default=None, foreign_key="character.id", ondelete="SET NULL")
    name: str = ""
    content: str = ""
    swipes: list = json_field(list)
    active_swipe: int = 0
    hidden: bool = False
    # Who can see it in a group chat (app/chats/core/audience.py): the characters it is hidden from
    # (ids), the one it is whispered to (an id, fixed when saved: a rename cannot redirect it; no
    # foreign key, so a recipient deleted later leaves the whisper private), and `private`, set when
    # either is, kept in the window's index. NULL / False for nearly every message.
    hidden_for: list | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    whisper_to: int | None = None
    private: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    # The user set who sees it by hand (Hide from AI, its per-character form): Advanced Memory's "Decide
    # who sees new messages" never changes it afterwards.
    audience_manual: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    status: str = "ok"
    error: str | None = None
    # The SillyTavern line this message was imported from, minus what has columns, for export.
    st_extra: dict = json_field()
    # The tool calls of the active version, mirrored from it like content (NULL for the many messages
    # without any, so the prompt's history read stays one narrow row each): [{id, name, arguments,
    # result, error, ms, at, notice}] (app/generation/tool_loop.py).
    tool_calls: list | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    # An excerpt of a reply the user answers (selected, then Reply or Alt+R): shown above the user's
    # text and sent to the model as a quote before it (app/chats/core/quoting.py). NULL for most.
    quote: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # Other chats' memories attached with @ when the message was sent, as sent: [{chat_id, title,
    # text}] (the text is a copy: the other chat may change or go; this message keeps what was read).
    chat_refs: list | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
