from datetime import datetime

from sqlalchemy import JSON, Column
from sqlmodel import Field, SQLModel

from app.platform.timeutil import utcnow


class ChatMemory(SQLModel, table=True):
    """The memory of one chat (issue 25): the summary made by rules from its messages and the notes
    the user keeps, as JSON; mirrored to `DATA_DIR/chats/<chat id>.md` (app/memory/chat_notes/mirror.py).
    Every chat gets a row once its memory is first built (after a reply, a change, or the start-up
    pass for chats older than this feature), even an empty one: the start-up pass then knows which
    chats it has done."""

    __tablename__ = "chat_memory"

    chat_id: int = Field(foreign_key="chat.id", primary_key=True, ondelete="CASCADE")
    summary: dict = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    notes: list = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # The summary or a note holds something: the @ list leaves out chats without (one indexed filter).
    has_content: bool = False
    # The first request, for the @ list's second line (kept here so the list reads one row per chat).
    first_request: str = ""
    # Bumped by every rebuild and note change: the write that takes the row's lock (service.locked).
    version: int = 0
    updated_at: datetime = Field(default_factory=utcnow)
