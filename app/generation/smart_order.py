"""The "smart" order of a group chat: the chat's helper model picks who answers (app/generation/core/
smart_order.py says how). Asked after the user's message is stored and outside its transaction (a
helper may take seconds); a failure or a time-out never fails the send: the member after the last
speaker answers, and the log says why."""

from __future__ import annotations

import logging

from sqlmodel import Session, col, select

from app.chats import service as chats
from app.chats.core.turns import Member
from app.chats.models import Message
from app.chats.turn_taking import group_members
from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderError
from app.connections.service import provider_config
from app.generation.core import smart_order
from app.memory.scenes.messages import helper_connection
from app.memory.summaries.core.answers import Failure
from app.platform.services import Services

log = logging.getLogger(__name__)

# A turn waits for the pick: the helper gets this long at most, whatever the connection allows.
PICK_TIMEOUT_S = 20.0


def pick_speaker(services: Services, chat_id: int, user_text: str | None) -> int | None:
    """The member who answers the send: named with @, the helper's pick, or the next in turn."""
    with Session(services.engine) as session:
        chat = chats.get_chat(session, chat_id)
        group = group_members(session, chat_id)
        members = [Member(m.character.id, m.character.name, m.talkativeness, m.muted) for m in group]
        if (asked := smart_order.mentioned(members, user_text or "")) is not None:
            return asked
        rows = session.exec(
            select(Message.role, Message.character_id, Message.name, Message.content)
            .where(Message.chat_id == chat_id, Message.kind == "message", col(Message.hidden).is_(False))
            .where(Message.status != "error")
            .order_by(col(Message.id).desc())
            .limit(smart_order.CONTEXT_MESSAGES)
        ).all()
        last_speaker = next((cid for role, cid, _, _ in rows if role == "assistant"), None)
        fallback = smart_order.round_robin(members, last_speaker)
        lines = [smart_order.Line(name, content) for _, _, name, content in reversed(rows) if content.strip()]
        cards = {m.character.id: m.character.description for m in group}
        connection = helper_connection(session, chat)
        if connection is None:
            log.info(
                "smart order in chat %s: no connection for the helper; the next in turn answers", chat_id
            )
            return fallback
        try:
            config = provider_config(
                connection, services.keybox, timeout_s=min(PICK_TIMEOUT_S, services.settings.model_timeout_s)
            )
        except ValueError as err:
            log.info("smart order in chat %s: %s; the next in turn answers", chat_id, err)
            return fallback
    try:
        done = complete_chat_blocking(
            config,
            smart_order.request(members, cards, lines),
            GenerationParams(max_tokens=smart_order.ANSWER_TOKENS, temperature=0.2),
        )
    except ProviderError as err:
        log.info("smart order in chat %s: the helper failed (%s); the next in turn answers", chat_id, err)
        return fallback
    choice = smart_order.read_choice(
        done.text or "", done.finish_reason, members, reasoning=done.reasoning or ""
    )
    if isinstance(choice, Failure):
        log.info("smart order in chat %s: %s; the next in turn answers", chat_id, choice.reason)
        return fallback
    return choice
