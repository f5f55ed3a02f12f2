"""Who answers a message in a group chat: the chat's members, its history's authors and its settings
read from the database, handed to the pure turn-taking rules (app/chats/core/turns.py).

A member's talkativeness is its card's (app/characters/service.py); whether it is muted belongs to
this chat."""

from __future__ import annotations

import random
from dataclasses import dataclass

from sqlalchemy import bindparam
from sqlmodel import Session, col, select

from app.characters.models import Character
from app.characters.service import card_talkativeness
from app.chats.core.turns import Member, Spoken, Strategy, Turn, speakers
from app.chats.models import Chat, ChatCharacter, Message
from app.chats.settings import read_settings
from app.platform.core.errors import UserError

# How far back turn-taking reads the history: pooled order looks back to the user's last message, and
# a group that talked among itself longer than this has had every member speak anyway.
HISTORY_READ = 200

_MEMBERS = (
    select(Character, ChatCharacter.muted, ChatCharacter.start_message_id)
    .join(ChatCharacter, col(ChatCharacter.character_id) == col(Character.id))
    .where(ChatCharacter.chat_id == bindparam("chat_id"))
    .order_by(ChatCharacter.position)
)


@dataclass(frozen=True)
class GroupMember:
    """A member as the chat's JSON and Chat Settings show it."""

    character: Character
    talkativeness: float
    muted: bool
    start_message_id: int | None = None


def group_members(session: Session, chat_id: int) -> list[GroupMember]:
    """The chat's members in the group's order."""
    return [
        GroupMember(character, card_talkativeness(character), bool(muted), start)
        for character, muted, start in session.exec(_MEMBERS, params={"chat_id": chat_id})
    ]


def _history(session: Session, chat_id: int) -> tuple[list[Spoken], str]:
    """The authors of the newest messages the AI reads, oldest first, and the newest one's text."""
    rows = session.exec(
        select(Message.role, Message.character_id, Message.content)
        .where(Message.chat_id == chat_id, Message.kind == "message", col(Message.hidden).is_(False))
        .where(col(Message.role).in_(("user", "assistant")))
        .order_by(col(Message.id).desc())
        .limit(HISTORY_READ)
    ).all()
    spoken = [
        Spoken(character_id if role == "assistant" else None) for role, character_id, _ in reversed(rows)
    ]
    return spoken, rows[0][2] if rows else ""


def choose_speakers(session: Session, chat: Chat, *, user_text: str | None, rng: random.Random) -> list[int]:
    """The ids of the members who answer, in order, when the user sends `user_text` (None or blank: an
    empty send, which asks the group to go on). Nobody in manual order, or when every member is muted."""
    settings = read_settings(chat.settings)
    members = [
        Member(m.character.id, m.character.name, m.talkativeness, m.muted)
        for m in group_members(session, chat.id)
    ]
    history, last_text = _history(session, chat.id)
    user_input = bool(user_text and user_text.strip())
    turn = Turn(text=user_text if user_input else last_text, user_input=user_input)
    # Smart order's pick needs the helper model (app/generation/smart_order.py); where a member must
    # answer without asking it (a reminder's own turn), natural order picks.
    strategy = Strategy.NATURAL if settings.reply_order == "smart" else Strategy(settings.reply_order)
    return speakers(
        strategy,
        members,
        history,
        turn,
        rng,
        allow_self_responses=settings.allow_self_responses,
    )


def member_starts(session: Session, chat_id: int) -> dict[int, int]:
    """The members' own "new start" messages, by character id (members without one left out)."""
    rows = session.exec(
        select(ChatCharacter.character_id, ChatCharacter.start_message_id).where(
            ChatCharacter.chat_id == chat_id, col(ChatCharacter.start_message_id).is_not(None)
        )
    ).all()
    return {cid: start for cid, start in rows if start is not None}


def set_start(session: Session, chat_id: int, character_id: int, message_id: int | None) -> bool:
    """A member's own new start (None: from the beginning again); False when the character is not in
    the chat. The message must be one of the chat's (UserError otherwise)."""
    link = session.get(ChatCharacter, (chat_id, character_id))
    if link is None:
        return False
    if message_id is not None:
        msg = session.get(Message, message_id)
        if msg is None or msg.chat_id != chat_id:
            raise UserError(f"Message {message_id} is not in this chat: a new start is one of its messages.")
    link.start_message_id = message_id
    session.add(link)
    return True


def set_muted(session: Session, chat_id: int, character_id: int, muted: bool) -> bool:
    """Mute or unmute a member; False when the character is not in the chat."""
    link = session.get(ChatCharacter, (chat_id, character_id))
    if link is None:
        return False
    link.muted = muted
    session.add(link)
    return True
