"""Shaping chats and messages for JSON answers."""

from sqlmodel import Session

from app.chats import service
from app.chats.core.audience import audience_of
from app.chats.models import Chat, Message
from app.chats.schemas import ChatRead, MemberRead, MessageRead, SwipeRead
from app.chats.turn_taking import group_members


def chat_read(session: Session, chat: Chat) -> ChatRead:
    members = group_members(session, chat.id)
    narrator = service.chat_settings(chat).narrator_in(chat.mode, [m.character.id for m in members])
    return ChatRead(
        id=chat.id,
        name=chat.name,
        mode=chat.mode,
        character_ids=[m.character.id for m in members],
        members=[
            MemberRead(
                character_id=m.character.id,
                name=m.character.name,
                talkativeness=m.talkativeness,
                muted=m.muted,
                start_message_id=m.start_message_id,
            )
            for m in members
        ],
        narrator_id=narrator,
        game_root_id=chat.game_root_id,
        persona_id=chat.persona_id,
        connection_id=chat.connection_id,
        settings=service.chat_settings(chat),
        created_at=chat.created_at,
        last_message_at=chat.last_message_at,
    )


def message_read(msg: Message) -> MessageRead:
    audience = audience_of(msg.hidden_for, msg.whisper_to, msg.character_id)
    return MessageRead(
        id=msg.id,
        kind=msg.kind,
        role=msg.role,
        name=msg.name,
        character_id=msg.character_id,
        content=msg.content,
        active_swipe=msg.active_swipe,
        swipes=[
            SwipeRead(
                content=s.get("content", ""),
                status=s.get("status", "ok"),
                error=s.get("error"),
                model=s.get("model"),
                **_reasoning(s),
                tool_calls=[c for c in s.get("tool_calls") or [] if isinstance(c, dict)],
                tool_notice=s.get("tool_notice") if isinstance(s.get("tool_notice"), str) else None,
            )
            for s in msg.swipes
        ],
        hidden=msg.hidden,
        status=msg.status,
        error=msg.error,
        created_at=msg.created_at,
        quote=msg.quote,
        chat_refs=[r for r in msg.chat_refs or () if isinstance(r, dict)],
        hidden_for=sorted(audience.hidden_for),
        whisper_to=audience.whisper_to,
    )


def _reasoning(version: dict) -> dict:
    text, ms = version.get("reasoning"), version.get("reasoning_ms")
    return {
        "reasoning": text if isinstance(text, str) else "",
        "reasoning_ms": ms if isinstance(ms, int) and not isinstance(ms, bool) else None,
    }
