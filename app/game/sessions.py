"""A Game chat's sessions (the manual's "No Game Mode"): a new session keeps the game's settings, its
members, persona, connection and lorebooks, but starts its own archive (a chat of its own, empty); the
Game Master still gets the earlier sessions' scene recaps (`earlier_recaps`, app/game/source.py).

Every later session names the game's first one (Chat.game_root_id); the sessions of a game are its
first chat and those naming it, in the order they were made. Ending a session with Advanced Memory on
closes the scene still open there, so its recap is written like the others' (in the background)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, or_, select

from app.chats import service as chats
from app.chats.models import Chat
from app.chats.turn_taking import group_members, set_muted
from app.lore.models import LorebookLink
from app.memory.scenes.checks import close_open_scene
from app.memory.scenes.jobs import schedule_processing
from app.memory.scenes.models import Scene
from app.platform.core.errors import UserError
from app.platform.db import chat_scope, lock_for_write
from app.platform.services import Services

log = logging.getLogger(__name__)

_NUMBERED = re.compile(r"\s+–\s+Session \d+$")


@dataclass(frozen=True)
class GameSession:
    chat_id: int
    number: int  # 1 for the game's first session
    name: str


@dataclass(frozen=True)
class EarlierRecap:
    session: int  # the session's number
    timeframe: str
    summary: str


def sessions_of(session: Session, chat: Chat) -> list[GameSession]:
    """The sessions of `chat`'s game, numbered in the order they were made (one for a game that never
    started another; none for a chat that is not a game)."""
    if chat.mode != "game":
        return []
    root = chat.game_root_id or chat.id
    rows = session.exec(
        select(Chat.id, Chat.name)
        .where(or_(col(Chat.id) == root, col(Chat.game_root_id) == root), Chat.mode == "game")
        .order_by(col(Chat.id))
    ).all()
    return [GameSession(cid, n, name) for n, (cid, name) in enumerate(rows, 1)]


def earlier_recaps(session: Session, chat: Chat) -> list[EarlierRecap]:
    """The written, enabled scene recaps of the sessions before `chat`'s, oldest first."""
    earlier = {s.chat_id: s.number for s in sessions_of(session, chat) if s.chat_id < (chat.id or 0)}
    if not earlier:
        return []
    rows = session.exec(
        select(Scene.chat_id, Scene.timeframe, Scene.summary)
        .where(col(Scene.chat_id).in_(list(earlier)), Scene.state == "written", col(Scene.enabled).is_(True))
        .order_by(col(Scene.chat_id), col(Scene.first_message_id))
    ).all()
    return [
        EarlierRecap(earlier[cid], timeframe, summary) for cid, timeframe, summary in rows if summary.strip()
    ]


def start_next_session(session: Session, services: Services, chat_id: int) -> Chat:
    """A new session of the game `chat_id` belongs to, flushed in `session` (the caller commits, then
    calls `session_started`). UserError for a chat that is not a game."""
    chat = chats.get_chat(session, chat_id)
    if chat.mode != "game":
        raise UserError("Only a Game chat has sessions: switch the chat to Game mode in Chat Settings first.")
    members = group_members(session, chat_id)
    if not members:
        raise UserError("This game has no characters left: add one in Chat Settings first.")
    number = len(sessions_of(session, chat)) + 1
    base = _NUMBERED.sub("", chat.name)[:180]
    new = chats.create_chat(
        session,
        character_ids=[m.character.id for m in members],
        name=f"{base} – Session {number}",
        mode="game",
        persona_id=chat.persona_id,
        connection_id=chat.connection_id,
        with_greetings=False,
    )
    new.settings = dict(chat.settings)
    new.game_root_id = chat.game_root_id or chat.id
    session.add(new)
    for member in members:
        if member.muted:
            set_muted(session, new.id, member.character.id, True)
    for link in session.exec(select(LorebookLink).where(LorebookLink.chat_id == chat_id)):
        session.add(LorebookLink(lorebook_id=link.lorebook_id, chat_id=new.id))
    session.flush()
    return new


def end_session(services: Services, chat_id: int) -> bool:
    """Close the scene still open in the session `chat_id` (Advanced Memory on), committed, and have its
    recap written in the background; False when there was none to close."""
    with Session(services.engine) as session:
        chat = session.get(Chat, chat_id)
        if chat is None or chat.mode != "game" or not chats.chat_settings(chat).advanced_memory_on(chat.mode):
            return False
        lock_for_write(session, chat_scope(chat_id))
        closed = close_open_scene(session, chat_id)
        if closed is None:
            return False
        try:
            session.commit()
        except IntegrityError:  # a scene check closed the same scene meanwhile: it is closed either way
            session.rollback()
            log.info("The open scene of chat %s was closed by a check meanwhile", chat_id)
    schedule_processing(services, chat_id)
    return True
