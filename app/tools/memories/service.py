"""Long-term and short-term memory: reads and writes, with their limits. Used by the memory tools,
the prompt sources, the Memories page and Chat Settings alike; services flush, the caller commits.

Decisions:
- A limit reached refuses the new memory with a sentence naming the limit; nothing is replaced.
- Expired short-term items are left out of every read and deleted lazily: when a reply is counted
  (`count_reply`), when items are added, and when Chat Settings lists them.
- The character's own memories and the global ones are read in one query per prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.characters.models import Character
from app.chats.models import Chat
from app.platform.core.errors import NotFound, UserError
from app.platform.db import LONG_TERM_MEMORY_LOCK_CLASS, chat_scope, lock_for_write
from app.platform.modelbase import MAX_ROW_ID, parse_row_id
from app.platform.timeutil import utcnow
from app.tools.memories.core.rules import (
    MAX_EXPIRY_REPLIES,
    MAX_GLOBAL,
    MAX_LONG_TERM_CHARS,
    MAX_PER_CHARACTER,
    MAX_SHORT_TERM_CHARS,
    MAX_SHORT_TERM_ITEMS,
    aware,
    limit_sentence,
    short_term_limit_sentence,
    short_term_live,
)
from app.tools.memories.models import LongTermMemory, ShortTermMemory

PAGE_SIZE = 50


# ---- long-term ----------------------------------------------------------------------------------


def clean_content(text: str, *, limit: int = MAX_LONG_TERM_CHARS) -> str:
    """The memory's text as kept: trimmed, not empty, within its limit."""
    text = (text or "").strip()
    if not text:
        raise UserError("A memory needs some text.")
    if len(text) > limit:
        raise UserError(f"A memory holds at most {limit:,} characters (this one has {len(text):,}).")
    return text


def get_long_term(session: Session, memory_id: int) -> LongTermMemory:
    memory = session.get(LongTermMemory, memory_id)
    if memory is None:
        raise NotFound(f"Memory #{memory_id} does not exist.")
    return memory


@dataclass(frozen=True)
class MemoryPage:
    memories: list[LongTermMemory]
    total: int  # matching the filter, all pages
    offset: int
    limit: int


def list_long_term(
    session: Session, *, scope: str = "all", offset: int = 0, limit: int = PAGE_SIZE
) -> MemoryPage:
    """Memories newest first: all of them, the global ones ("global") or one character's (its id as text)."""
    where = []
    if scope == "global":
        where.append(col(LongTermMemory.character_id).is_(None))
    elif scope != "all":
        character_id = parse_row_id(scope)
        if character_id is None:
            raise UserError("Show: choose all, global, or a character.")
        where.append(col(LongTermMemory.character_id) == character_id)
    offset = min(max(0, offset), MAX_ROW_ID)
    total = session.exec(select(func.count()).select_from(LongTermMemory).where(*where)).one()
    rows = session.exec(
        select(LongTermMemory)
        .where(*where)
        .order_by(col(LongTermMemory.id).desc())
        .offset(offset)
        .limit(limit)
    ).all()
    return MemoryPage(list(rows), total, offset, limit)


def count_long_term(session: Session, character_id: int | None) -> int:
    owner = (
        col(LongTermMemory.character_id).is_(None)
        if character_id is None
        else col(LongTermMemory.character_id) == character_id
    )
    return session.exec(select(func.count()).select_from(LongTermMemory).where(owner)).one()


def add_long_term(
    session: Session, *, content: str, character_id: int | None, chat_id: int | None = None
) -> LongTermMemory:
    """Keep a memory for one character (its id) or for all (None), within the limits."""
    content = clean_content(content)
    name = ""
    if character_id is not None:
        character = session.get(Character, character_id)
        if character is None:
            raise NotFound(f"Character {character_id} does not exist.")
        name = character.name
    # The count and the insert see the same rows (the character's, or the shared ones: 0).
    lock_for_write(session, (LONG_TERM_MEMORY_LOCK_CLASS, character_id or 0))
    limit = MAX_GLOBAL if character_id is None else MAX_PER_CHARACTER
    if count_long_term(session, character_id) >= limit:
        raise UserError(limit_sentence("global" if character_id is None else "character", name))
    memory = LongTermMemory(character_id=character_id, content=content, created_in_chat_id=chat_id)
    session.add(memory)
    session.flush()
    return memory


def update_long_term(session: Session, memory_id: int, content: str) -> LongTermMemory:
    memory = get_long_term(session, memory_id)
    memory.content = clean_content(content)
    memory.updated_at = utcnow()
    session.add(memory)
    session.flush()
    return memory


def delete_long_term(session: Session, memory_id: int) -> LongTermMemory:
    """Delete a memory; the row returned (detached) lets the page offer Undo."""
    memory = get_long_term(session, memory_id)
    session.delete(memory)
    session.flush()
    return memory


def restore_long_term(
    session: Session, *, content: str, character_id: int | None, created_at: datetime | None = None
) -> LongTermMemory:
    """Undo a delete: the memory back (a new id), its date kept, within the limits again."""
    memory = add_long_term(session, content=content, character_id=character_id)
    if created_at is not None:
        memory.created_at = created_at
        session.add(memory)
        session.flush()
    return memory


def prompt_long_term(session: Session, character_id: int) -> list[tuple[int, int | None, str]]:
    """(id, character_id, content) of the global memories and the character's own, oldest first (a
    stable prompt prefix): one query, plain rows (no objects to build for 400 memories)."""
    return list(
        session.exec(
            select(LongTermMemory.id, LongTermMemory.character_id, LongTermMemory.content)
            .where(
                or_(
                    col(LongTermMemory.character_id).is_(None),
                    col(LongTermMemory.character_id) == character_id,
                )
            )
            .order_by(col(LongTermMemory.id))
        ).all()
    )


def character_names(session: Session) -> dict[int, str]:
    return {c.id: c.name for c in session.exec(select(Character).order_by(Character.name)).all()}


# ---- short-term ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShortTermIn:
    content: str
    expires_after_replies: int | None = None
    expires_at: datetime | None = None


def chat_short_term(session: Session, chat_id: int) -> list[ShortTermMemory]:
    """Every item the chat keeps, live or not yet swept, oldest first (one query)."""
    return list(
        session.exec(
            select(ShortTermMemory)
            .where(ShortTermMemory.chat_id == chat_id)
            .order_by(col(ShortTermMemory.id))
        ).all()
    )


def is_live(item: ShortTermMemory, now: datetime) -> bool:
    return short_term_live(
        expires_after_replies=item.expires_after_replies,
        replies_seen=item.replies_seen,
        expires_at=item.expires_at,
        now=now,
    )


def live_short_term(session: Session, chat_id: int, now: datetime) -> list[ShortTermMemory]:
    return [item for item in chat_short_term(session, chat_id) if is_live(item, now)]


def sweep_short_term(session: Session, chat_id: int, now: datetime) -> list[ShortTermMemory]:
    """Delete the chat's expired items; the live ones, oldest first."""
    live = []
    for item in chat_short_term(session, chat_id):
        if is_live(item, now):
            live.append(item)
        else:
            session.delete(item)
    session.flush()
    return live


def change_short_term(
    session: Session,
    chat_id: int,
    *,
    add: Sequence[ShortTermIn] = (),
    remove: Sequence[int] = (),
    now: datetime,
    during_reply: bool = False,
) -> tuple[list[ShortTermMemory], list[int]]:
    """Remove, then add (so removing makes room); all or nothing. Returns (added, removed ids)."""
    if session.get(Chat, chat_id) is None:
        raise NotFound(f"Chat {chat_id} does not exist.")
    lock_for_write(session, chat_scope(chat_id))
    live = {item.id: item for item in sweep_short_term(session, chat_id, now)}
    unknown = [i for i in remove if i not in live]
    if unknown:
        listed = ", ".join(f"#{i}" for i in unknown)
        raise UserError(f"This chat's short-term memory has no item {listed}; nothing was changed.")
    for i in dict.fromkeys(remove):
        session.delete(live.pop(i))
    if len(live) + len(add) > MAX_SHORT_TERM_ITEMS:
        raise UserError(short_term_limit_sentence())
    added = []
    for item in add:
        content = clean_content(item.content, limit=MAX_SHORT_TERM_CHARS)
        if (
            item.expires_after_replies is not None
            and not 1 <= item.expires_after_replies <= MAX_EXPIRY_REPLIES
        ):
            raise UserError(f"expires_after_replies must be between 1 and {MAX_EXPIRY_REPLIES}.")
        if item.expires_at is not None and aware(item.expires_at) <= aware(now):
            raise UserError("expires_at is in the past; give a later date or a number of replies.")
        row = ShortTermMemory(
            chat_id=chat_id,
            content=content,
            expires_after_replies=item.expires_after_replies,
            # The reply being written ends (and is counted) before any prompt has read the item.
            replies_seen=-1 if during_reply else 0,
            expires_at=aware(item.expires_at) if item.expires_at else None,
        )
        session.add(row)
        added.append(row)
    session.flush()
    return added, list(dict.fromkeys(remove))


def delete_short_term(session: Session, chat_id: int, item_id: int) -> None:
    item = session.get(ShortTermMemory, item_id)
    if item is None or item.chat_id != chat_id:
        raise NotFound(f"Short-term memory item #{item_id} is not in this chat.")
    session.delete(item)
    session.flush()


def clear_short_term(session: Session, chat_id: int) -> int:
    result = session.exec(delete(ShortTermMemory).where(col(ShortTermMemory.chat_id) == chat_id))  # type: ignore[call-overload]
    return result.rowcount or 0


def count_reply(engine: Engine, chat_id: int) -> None:
    """A reply was written in the chat: every item counts it; those whose count or date ran out go.
    A chat without short-term memory costs one read and no write."""
    with Session(engine) as session:
        items = chat_short_term(session, chat_id)
        if not items:
            return
        now = utcnow()
        for item in items:
            item.replies_seen += 1
            if is_live(item, now):
                session.add(item)
            else:
                session.delete(item)
        session.commit()
