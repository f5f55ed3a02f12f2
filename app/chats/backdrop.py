"""A chat's background (issue 29): its own choice, else its first character's default."""

from __future__ import annotations

from sqlmodel import Session

from app.backgrounds import service as backgrounds
from app.chats import service
from app.chats.models import Chat


def _character_default(session: Session, chat: Chat) -> str | None:
    characters = service.chat_characters(session, chat.id)
    return characters[0].background if characters else None


def chat_backdrop(session: Session, chat: Chat) -> backgrounds.Backdrop | None:
    """What the chat page shows behind the messages (None: nothing)."""
    own = service.chat_settings(chat).background
    return backgrounds.chat_backdrop(session, own, _character_default(session, chat))


def background_ctx(session: Session, chat: Chat, **extra) -> dict:
    """What Chat Settings' Background section and the backdrop need."""
    own = service.chat_settings(chat).background
    default = _character_default(session, chat)
    return {
        "chat": chat,
        "bg": backgrounds.picker(session, own, default),
        "backdrop": backgrounds.chat_backdrop(session, own, default),
        **extra,
    }


def choose(session: Session, chat: Chat, value: str) -> Chat:
    """Set the chat's background alone (an upload from Chat Settings is chosen at once)."""
    settings = service.chat_settings(chat).model_copy(update={"background": value})
    return service.update_chat_options(
        session,
        chat.id,
        settings=settings,
        connection_id=chat.connection_id,
        persona_id=chat.persona_id,
    )
