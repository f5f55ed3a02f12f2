"""A character renamed keeps the scenes it took part in (issue 27): a scene names its participants,
and a recap its private parts' readers (`{{#if character == "Aria"}}`), by card name, as the helper
wrote them; a new name would otherwise recall none of them and read none of its private parts. The
scenes of the chats it is a member of are told the new name when the card is saved. (Messages keep
the name they were written under, as SillyTavern's do.)"""

from __future__ import annotations

import re

from sqlmodel import Session, col, select

from app.chats.models import ChatCharacter
from app.memory.scenes.models import Scene
from app.platform.timeutil import utcnow


def _condition(name: str) -> re.Pattern[str]:
    # A reader named in a condition (app/memory/summaries/core/prompts.py reads them): char == "Aria"
    # or character == 'Aria'.
    return re.compile(r"((?:char|character)\s*==\s*)([\"'])" + re.escape(name) + r"\2", re.IGNORECASE)


def _quoted(name: str) -> str | None:
    """`name` as a condition writes it; None when it holds both quote marks (no condition can)."""
    if '"' not in name:
        return f'"{name}"'
    return f"'{name}'" if "'" not in name else None


def character_renamed(session: Session, character_id: int, old: str, new: str) -> int:
    """Give `new` for `old` in the scenes of the character's chats (participants and recap conditions);
    how many scenes changed. Not committed."""
    old_key = old.strip().casefold()
    if not old_key or old_key == new.strip().casefold():
        return 0
    chats = select(ChatCharacter.chat_id).where(ChatCharacter.character_id == character_id)
    condition, quoted = _condition(old.strip()), _quoted(new.strip())
    changed = 0
    for scene in session.exec(select(Scene).where(col(Scene.chat_id).in_(chats))):
        participants = [new if p.strip().casefold() == old_key else p for p in scene.participants]
        summary = (
            scene.summary if quoted is None else condition.sub(lambda m: m.group(1) + quoted, scene.summary)
        )
        if participants != scene.participants or summary != scene.summary:
            scene.participants, scene.summary, scene.updated_at = participants, summary, utcnow()
            session.add(scene)
            changed += 1
    session.flush()
    return changed
