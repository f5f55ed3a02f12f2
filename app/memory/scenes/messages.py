"""What Advanced Memory reads of a chat: its messages as the helper model sees them, numbered as the
user sees them, and the connection of the helper model."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlmodel import Session, col, select

from app.chats.core.audience import audience_of
from app.chats.models import Chat, Message
from app.chats.service import chat_characters, chat_connection
from app.chats.settings import read_settings
from app.connections.models import Connection
from app.connections.providers.base import ProviderConfig
from app.connections.service import provider_config
from app.memory.scenes.core.access import seen_note
from app.platform.core.errors import UserError
from app.platform.services import Services


@dataclass(frozen=True)
class ReadableMessage:
    id: int
    number: int  # its 1-based position among the chat's messages, as the chat view numbers it
    name: str
    text: str
    seen_by: str = (
        ""  # in a group, who did not see it ("hidden from Mira"), for the helper (access.seen_note)
    )


def readable_messages(session: Session, chat_id: int) -> list[ReadableMessage]:
    """The chat's messages the helper may read, oldest first: hidden-from-AI, failed and still
    streaming ones are left out (their numbers are skipped, so the others keep the numbers the user
    sees), as are empty ones."""
    return messages_and_streaming(session, chat_id)[0]


# Readable as readable_messages says, but for the strip(): SQL trims ASCII white space only, so the few
# rows it lets through are checked in Python. Trimming is spelled apart (SQLite's char() is PostgreSQL's
# chr(), and PostgreSQL trims a set of characters with btrim).
_MAYBE_READABLE = (
    "SELECT id, content FROM message WHERE chat_id = :chat_id AND kind = 'message' AND hidden = false"
    " AND status NOT IN ('error', 'streaming') AND {trimmed} != '' AND id > :after ORDER BY id LIMIT 1"
)
_MAYBE_READABLE_SQL = {
    "sqlite": text(_MAYBE_READABLE.format(trimmed="trim(content, ' ' || char(9, 10, 11, 12, 13))")),
    "postgresql": text(
        _MAYBE_READABLE.format(
            trimmed="btrim(content, ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13))"
        )
    ),
}


def has_readable_message(session: Session, chat_id: int) -> bool:
    """Whether readable_messages would give any, reading the first readable message alone."""
    conn = session.connection()
    sql = _MAYBE_READABLE_SQL[conn.dialect.name]
    after = -1
    while row := conn.execute(sql, {"chat_id": chat_id, "after": after}).first():
        if (row[1] or "").strip():
            return True
        after = row[0]
    return False


def messages_and_streaming(session: Session, chat_id: int) -> tuple[list[ReadableMessage], frozenset[int]]:
    """`readable_messages`, and the ids of the messages being written now (a reply, a new version of one,
    a Continue), read in ONE query: a recap must not be written from a scene whose message is streaming
    (it would read the scene without it), and two queries could disagree on whether it is."""
    rows = session.exec(
        select(
            Message.id,
            Message.name,
            Message.role,
            Message.content,
            Message.hidden,
            Message.status,
            Message.private,
            Message.hidden_for,
            Message.whisper_to,
            Message.character_id,
        )
        .where(Message.chat_id == chat_id, Message.kind == "message")
        .order_by(col(Message.id))
    ).all()
    readable, streaming = [], set()
    members: dict[int, str] | None = None  # read once, when a message is private
    for number, (mid, name, role, content, hidden, status, private, *audience) in enumerate(rows, start=1):
        if status == "streaming":
            streaming.add(mid)
        if hidden or status in ("error", "streaming") or not (content or "").strip():
            continue
        note = ""
        if private:
            if members is None:
                members = {c.id: c.name for c in chat_characters(session, chat_id) if c.id is not None}
            hidden_for, whisper_to, author = audience
            note = seen_note(
                audience_of(hidden_for, whisper_to, author if role == "assistant" else None), members
            )
        readable.append(ReadableMessage(mid, number, name or role, content, note))
    return readable, frozenset(streaming)


def helper_connection(session: Session, chat: Chat) -> Connection | None:
    """The Helper model's connection: the one chosen for Advanced Memory, else the chat's own (Sugo has
    no agents' connection). A chosen one since deleted falls back too."""
    chosen = read_settings(chat.settings).adv_helper_connection_id
    if chosen is not None and (conn := session.get(Connection, chosen)) is not None:
        return conn
    return chat_connection(session, chat)


def decision_config(session: Session, services: Services, chat: Chat) -> ProviderConfig | None:
    """The chat's decision model, when Use Decision model is on and its connection can be called: it
    then finds the scene ends and decides who sees new messages in the helper's place."""
    s = read_settings(chat.settings)
    if not s.adv_decision or s.adv_decision_connection_id is None:
        return None
    conn = session.get(Connection, s.adv_decision_connection_id)
    if conn is None:
        return None
    try:
        return provider_config(conn, services.keybox, timeout_s=services.settings.model_timeout_s)
    except ValueError:
        return None


def helper_config(session: Session, services: Services, chat: Chat) -> ProviderConfig:
    """How to call the helper model; a sentence when there is none to call."""
    conn = helper_connection(session, chat)
    if conn is None:
        raise UserError("Advanced Memory needs a connection for its helper model. Add one under Connections.")
    try:
        return provider_config(conn, services.keybox, timeout_s=services.settings.model_timeout_s)
    except ValueError as err:
        raise UserError(str(err)) from None
