"""Gather the plain snapshot the builder needs from the database, then build."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session, col, select

from app.characters.models import Character
from app.chats import service as chats
from app.chats.models import Chat, Message
from app.connections.models import Connection
from app.connections.providers.base import GenerationParams
from app.errors import UserError
from app.prompt.blocks import Prompt
from app.prompt.builder import CardSnapshot, HistoryMessage, PromptContext, build

# With no connection yet, Peek Prompt still works with these sizes.
FALLBACK_CONTEXT_SIZE = 8192
FALLBACK_MAX_TOKENS = 512
# Hidden messages do not count against the recent-message limit, so load some spare rows.
_HISTORY_SLACK = 200


@dataclass(frozen=True)
class Effective:
    connection: Connection | None
    params: GenerationParams
    context_size: int


def effective_params(chat: Chat, connection: Connection | None) -> Effective:
    s = chats.chat_settings(chat)
    base_temp = connection.temperature if connection else None
    base_top_p = connection.top_p if connection else None
    max_tokens = s.max_tokens or (connection.max_tokens if connection else FALLBACK_MAX_TOKENS)
    context_size = s.context_size or (connection.context_size if connection else FALLBACK_CONTEXT_SIZE)
    stop = s.stop if s.stop is not None else list(connection.stop if connection else [])
    params = GenerationParams(
        temperature=s.temperature if s.temperature is not None else base_temp,
        top_p=s.top_p if s.top_p is not None else base_top_p,
        max_tokens=max_tokens,
        stop=tuple(stop),
    )
    return Effective(connection, params, context_size)


def card_snapshot(char: Character) -> CardSnapshot:
    return CardSnapshot(
        id=char.id, name=char.name, description=char.description, personality=char.personality,
        scenario=char.scenario, mes_example=char.mes_example, system_prompt=char.system_prompt,
        post_history_instructions=char.post_history_instructions,
    )  # fmt: skip


def history_rows(session: Session, chat_id: int, *, before_id: int | None, limit: int) -> list[Message]:
    stmt = select(Message).where(Message.chat_id == chat_id)
    if before_id is not None:
        stmt = stmt.where(col(Message.id) < before_id)
    rows = list(session.exec(stmt.order_by(col(Message.id).desc()).limit(limit + _HISTORY_SLACK)))
    rows.reverse()
    return rows


def build_chat_prompt(
    session: Session, chat: Chat, *, speaker: Character | None = None, before_id: int | None = None
) -> tuple[Prompt, Effective]:
    """The prompt for the next reply in `chat` (or for regenerating the message `before_id`)."""
    characters = chats.chat_characters(session, chat.id)
    if not characters:
        raise UserError("This chat has no characters.")
    speaker = speaker or characters[chat.next_speaker % len(characters)]
    persona = chats.chat_persona(session, chat)
    effective = effective_params(chat, chats.chat_connection(session, chat))
    settings = chats.chat_settings(chat)
    rows = history_rows(session, chat.id, before_id=before_id, limit=settings.recent_message_limit)
    ctx = PromptContext(
        mode=chat.mode,
        characters=tuple(card_snapshot(c) for c in characters),
        speaker=card_snapshot(speaker),
        user_name=persona.name if persona else chats.FALLBACK_USER_NAME,
        persona_description=persona.description if persona else "",
        messages=tuple(
            HistoryMessage(m.id, m.role, m.name, m.content, m.hidden)
            for m in rows
            if m.status != "error" and m.content.strip()
        ),
        context_size=effective.context_size,
        reply_reserve=effective.params.max_tokens or FALLBACK_MAX_TOKENS,
        recent_limit=settings.recent_message_limit,
    )
    return build(ctx), effective
