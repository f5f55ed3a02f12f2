"""A group's standalone narrator (issue 27): a narrator that is none of the story's characters.

Decided here (the manual names a "standalone narrator" beside a member one, and says no more): it is a
card Sugo writes once, named "Narrator" and marked as Sugo's (extensions.sugo.narrator), which joins
the group muted and becomes its narrator. So it is the narrator the rest of Sugo knows (it reads every
message, whisper and memory: app/chats/core/audience.py), speaks only when you pick it under the
message box, and its voice is yours to change by editing its card — one card for every chat that
uses it. Removing it from the narrator's place leaves it a muted member."""

from __future__ import annotations

from sqlmodel import Session, col, select

from app.characters.models import Character
from app.chats.models import Chat, ChatCharacter
from app.chats.settings import read_settings
from app.platform.core.errors import UserError

NARRATOR_NAME = "Narrator"
NARRATOR_DESCRIPTION = (
    "{{char}} is the story's narrator, not one of its characters: {{char}} describes the places, the "
    "weather, what happens and what it costs, in third person, and never speaks or decides for {{user}} "
    "or for the characters, who speak for themselves."
)


def is_sugos_narrator(char: Character) -> bool:
    sugo = (char.extensions or {}).get("sugo")
    return isinstance(sugo, dict) and sugo.get("narrator") is True


def narrator_card(session: Session) -> Character:
    """Sugo's narrator card, written the first time one is asked for."""
    for char in session.exec(
        select(Character).where(Character.name == NARRATOR_NAME).order_by(col(Character.id))
    ):
        if is_sugos_narrator(char):
            return char
    char = Character(
        name=NARRATOR_NAME,
        description=NARRATOR_DESCRIPTION,
        creator_notes="Written by Sugo: a group's standalone narrator. Edit it to change the narrator's voice.",
        extensions={"sugo": {"narrator": True}, "talkativeness": "0"},
    )
    session.add(char)
    session.flush()
    return char


def add_standalone_narrator(session: Session, chat: Chat) -> Character:
    """Make Sugo's narrator card this group's narrator: it joins muted (once) and takes the narrator's
    place. Only a group chat has a narrator (UserError otherwise). Flushed, not committed."""
    members = session.exec(
        select(ChatCharacter, Character)
        .join(Character, col(Character.id) == col(ChatCharacter.character_id))
        .where(ChatCharacter.chat_id == chat.id)
    ).all()
    if sum(not is_sugos_narrator(char) for _, char in members) < 2:
        raise UserError("A narrator reads a group: this chat needs two characters or more besides it.")
    card = narrator_card(session)
    if all(link.character_id != card.id for link, _ in members):
        last = max(link.position for link, _ in members)
        session.add(ChatCharacter(chat_id=chat.id, character_id=card.id, position=last + 1, muted=True))
    settings = read_settings(chat.settings)
    chat.settings = settings.model_copy(update={"narrator_id": card.id}).model_dump(exclude_none=True)
    session.add(chat)
    session.flush()
    return card
