"""Shaping chats, messages and prompts for JSON answers."""

from sqlmodel import Session

from app.chats import service
from app.chats.models import Chat, Message
from app.chats.schemas import ChatRead, MessageRead, PromptBlockRead, PromptRead, SwipeRead
from app.prompt.blocks import Prompt


def chat_read(session: Session, chat: Chat) -> ChatRead:
    return ChatRead(
        id=chat.id, name=chat.name, mode=chat.mode,
        character_ids=[c.id for c in service.chat_characters(session, chat.id)],
        persona_id=chat.persona_id, connection_id=chat.connection_id, settings=service.chat_settings(chat),
        created_at=chat.created_at, last_message_at=chat.last_message_at,
    )  # fmt: skip


def message_read(msg: Message) -> MessageRead:
    return MessageRead(
        id=msg.id, kind=msg.kind, role=msg.role, name=msg.name, character_id=msg.character_id, content=msg.content,
        active_swipe=msg.active_swipe,
        swipes=[SwipeRead(content=s.get("content", ""), status=s.get("status", "ok"), error=s.get("error"),
                          model=s.get("model")) for s in msg.swipes],
        hidden=msg.hidden, status=msg.status, error=msg.error, created_at=msg.created_at,
    )  # fmt: skip


def prompt_read(prompt: Prompt) -> PromptRead:
    return PromptRead(
        blocks=[PromptBlockRead(name=b.name, label=b.label, group=b.group, role=b.role, tokens=b.tokens,
                                text=b.text, message_id=b.message_id) for b in prompt.blocks],
        messages=[{k: v for k, v in m.items()} for m in prompt.messages],
        total_tokens=prompt.total_tokens, context_size=prompt.context_size, reply_reserve=prompt.reply_reserve,
        history_available=prompt.history_available, history_included=prompt.history_included,
        hidden_skipped=prompt.hidden_skipped, notes=list(prompt.notes),
    )  # fmt: skip
