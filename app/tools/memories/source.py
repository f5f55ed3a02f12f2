"""Memories as prompt sources: the global long-term memories in the system part (slot
long_term_memory), the speaking character's own above the conversation (personal_memories), and the
chat's live short-term memory above the conversation (older_short_term_memory). Each memory carries
its id ("[#12] prefers tea") so the model can update it. A chat with no memories adds no block and
costs one indexed query per source.

Memories enter the prompt whatever the Memory permission says: the user may add them on the
Memories page without any tool, and a memory kept is meant to be remembered."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

from sqlalchemy import text
from sqlmodel import Session

from app.chats.models import Chat
from app.platform.jobs import run_soon
from app.platform.services import Services
from app.prompt.core.builder import DynamicBlock
from app.prompt.sources import Contribution, PromptSource, SettingsSection, Turn
from app.tools.memories import service
from app.tools.memories.core.rules import (
    MemoryLine,
    global_block,
    personal_block,
    short_term_block,
)

_replies = itertools.count()


# Most chats have no short-term notes: one probe on the chat's index tells, before any object is built.
_ANY_SHORT_TERM = text("SELECT 1 FROM short_term_memory WHERE chat_id = :chat_id LIMIT 1")
_ANY_LONG_TERM = text(
    "SELECT 1 FROM long_term_memory WHERE character_id IS NULL OR character_id = :character_id LIMIT 1"
)


class LongTermMemorySource(PromptSource):
    name = "long_term_memory"
    kinds = ("long_term_memory", "personal_memories")
    label = "Long-term memories"

    def contribute(self, turn: Turn) -> Contribution | None:
        probe = turn.session.connection().execute(_ANY_LONG_TERM, {"character_id": turn.speaker.id})
        if probe.first() is None:
            return None
        memories = service.prompt_long_term(turn.session, turn.speaker.id)
        if not memories:
            return None
        shared = [MemoryLine(id_, content) for id_, owner, content in memories if owner is None]
        own = [MemoryLine(id_, content) for id_, owner, content in memories if owner is not None]
        blocks = []
        if shared:
            blocks.append(DynamicBlock("long_term_memory", "Memories (all characters)", global_block(shared)))
        if own:
            name = turn.speaker.name
            blocks.append(DynamicBlock("personal_memories", f"{name}'s memories", personal_block(name, own)))
        return Contribution(
            fixed=tuple(blocks),
            note=f"Long-term memories: {len(shared)} for all characters, {len(own)} of {turn.speaker.name}'s.",
        )


class ShortTermMemorySource(PromptSource):
    name = "short_term_memory"
    kinds = ("older_short_term_memory",)
    label = "Short-term memory"

    def contribute(self, turn: Turn) -> Contribution | None:
        if turn.session.connection().execute(_ANY_SHORT_TERM, {"chat_id": turn.chat.id}).first() is None:
            return None
        live = service.live_short_term(turn.session, turn.chat.id, datetime.now(UTC))
        if not live:
            return None
        lines = [MemoryLine(item.id, item.content) for item in live]
        return Contribution(
            fixed=(DynamicBlock("older_short_term_memory", "Short-term memory", short_term_block(lines)),),
            note=f"Short-term memory: {len(lines)} live item{'s' if len(lines) != 1 else ''}.",
        )

    def after_reply(self, services: Services, chat_id: int) -> None:
        # Counted in the background: the reply never waits on a write.
        # One job per reply (a pending job with the same id would be replaced, and a reply lost).
        job_id = f"short_term_memory.count_reply.{chat_id}.{next(_replies)}"
        if not run_soon(services.scheduler, service.count_reply, services.engine, chat_id, job_id=job_id):
            service.count_reply(services.engine, chat_id)

    def settings_section(self, session: Session, chat: Chat, services: Services) -> SettingsSection:
        return SettingsSection("tools/_short_term_settings.html", short_term_context(session, chat.id))


def short_term_context(session: Session, chat_id: int) -> dict:
    """What Chat Settings shows: the live items (expired ones wait for the next sweep)."""
    now = datetime.now(UTC)
    return {"short_term": service.live_short_term(session, chat_id, now), "now": now}
