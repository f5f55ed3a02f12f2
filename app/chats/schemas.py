from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from app.chats.core.quoting import MAX_REFERENCES
from app.chats.settings import ChatSettings
from app.platform.core.names import checked
from app.platform.modelbase import RowId

ChatName = Annotated[str, checked("A chat name")]


class ChatCreate(BaseModel):
    character_ids: list[RowId] = Field(min_length=1)
    name: ChatName | None = None
    mode: Literal["roleplay", "conversation", "game"] = "roleplay"
    persona_id: RowId | None = None
    connection_id: RowId | None = None


class MemberRead(BaseModel):
    """A character of the chat as turn-taking sees it: its card's talkativeness and, in this chat,
    whether it is muted (answers only when asked for)."""

    character_id: int
    name: str
    talkativeness: float
    muted: bool
    # Its own "new start": it reads the chat from this message on (None: from the beginning).
    start_message_id: int | None = None


class MemberPatch(BaseModel):
    """What a member's PUT changes: only the fields sent (start_message_id null: from the beginning)."""

    muted: bool | None = None
    start_message_id: RowId | None = None


class ChatRead(BaseModel):
    id: int
    name: str
    mode: str
    character_ids: list[int]
    members: list[MemberRead] = []  # in the group's order; turn-taking settings are in `settings`
    # The member who sees every message (settings.narrator_id while that character is a member; in a
    # Game chat its Game Master).
    narrator_id: int | None = None
    # A Game chat's later session: the id of the game's first session (app/game/sessions.py).
    game_root_id: int | None = None
    persona_id: int | None
    connection_id: int | None
    settings: ChatSettings
    created_at: datetime
    last_message_at: datetime


class ChatImported(ChatRead):
    result: str = ""  # "Imported 160 messages (3 summaries, 2 lorebooks attached)."
    imported_messages: int = 0
    imported_summaries: int = 0  # Chat Summary entries, or day and week summaries
    attached_lorebooks: list[str] = []
    notes: list[str] = []  # what the file asked for and did not get (a lorebook not found...)


class ChatPatch(BaseModel):
    name: ChatName | None = None


class ChatOptionsIn(BaseModel):
    settings: ChatSettings = Field(default_factory=ChatSettings)
    connection_id: RowId | None = None
    persona_id: RowId | None = None
    mode: Literal["roleplay", "conversation", "game"] | None = None


class SwipeRead(BaseModel):
    content: str
    status: str = "ok"
    error: str | None = None
    model: str | None = None
    reasoning: str = ""  # the model's reasoning, kept apart from the text and never sent back to it
    reasoning_ms: int | None = None  # how long it thought, when known
    # The tools this version called: {id, name, arguments, result, error, ms, round, at, notice?}.
    tool_calls: list[dict] = []
    tool_notice: str | None = None  # a reply that hit the round cap, or whose model refused tools


class MessageRead(BaseModel):
    id: int
    kind: str = "message"  # or "refresh": a mark that cuts what the AI reads
    role: str
    name: str
    character_id: int | None
    content: str
    active_swipe: int
    swipes: list[SwipeRead]
    hidden: bool
    status: str
    error: str | None
    created_at: datetime
    # What the user's message carried besides its words: an excerpt it answers, and other chats'
    # memories attached with @ ([{chat_id, title, text}], as sent).
    quote: str | None = None
    chat_refs: list[dict] = []
    # Who in a group cannot see it: the characters it is hidden from, and the one it is whispered to
    # (then only that character, its author and the narrator see it).
    hidden_for: list[int] = []
    whisper_to: int | None = None


class MessageIn(BaseModel):
    content: str = Field(min_length=1)
    attachment_ids: list[RowId] = Field(default_factory=list, max_length=10)
    whisper_to: RowId | None = None


class MessagePatch(BaseModel):
    """What is given changes: `hidden` hides from the AI (every character); `hidden_for` sets the
    characters it is hidden from ([] for none); `whisper_to` makes it a whisper (null: not one)."""

    content: str | None = None
    hidden: bool | None = None
    hidden_for: list[RowId] | None = Field(default=None, max_length=64)
    whisper_to: RowId | None = None


class SwipeIn(BaseModel):
    index: int = Field(ge=0)


class GenerateIn(BaseModel):
    """send: store `content` (if any) as the user's message, then a new reply;
    regenerate / swipe: a new version of the last reply (older versions stay as swipes);
    continue: extend the last reply's shown version; impersonate: stream the user's next message
    (`start` has no message id) and store nothing."""

    action: Literal["send", "regenerate", "swipe", "continue", "impersonate"] = "send"
    content: str | None = None
    speaker_id: RowId | None = None
    message_id: RowId | None = None
    # Uploads waiting in this chat (POST /api/chats/{id}/attachments), attached to the message sent.
    attachment_ids: list[RowId] = Field(default_factory=list, max_length=10)
    # An excerpt of a reply the message answers (sent to the model as a quote before the text; at most
    # 2,000 characters, checked with a sentence), and other chats whose memory goes with it (@, at most 3).
    quote: str | None = Field(default=None, max_length=20_000)
    chat_ref_ids: list[RowId] = Field(default_factory=list, max_length=MAX_REFERENCES)
    # A group's member the user's message is whispered to: only it and the narrator read it.
    whisper_to: RowId | None = None
    # The reply starts with this text and the model goes on from it (a prefill); the chat's preset may
    # set one too, this one wins. Only for a new reply or version (send, regenerate, swipe).
    start_with: str | None = Field(default=None, max_length=10_000)


class AttachmentRead(BaseModel):
    """A file attached to a message (`message_id` null while it waits in the composer)."""

    id: int
    name: str
    size: int
    media_type: str
    pages: int | None
    message_id: int | None
    created_at: datetime
