"""Decide who sees new messages (issue 27): before each reply of a turn-by-turn group chat with the
option on, the messages stored since the last decision are each decided once, by the helper model
(the pure part, the rules and the request are in core/visibility.py).

Decided where the manual is silent:
- When: on the reply's worker thread, before its prompt is built, so the user's message is decided
  before the first reply and each reply before the next member answers (a split reply's parts are
  messages of their own, each decided). A send nobody answers is decided at the next reply.
- The first decision after the option is turned on starts after the newest character reply: older
  messages are never decided (turning it on does not hide a chat's past).
- Each request may take DECIDE_TIMEOUT_S; a failure, a time-out or an unreadable answer hides
  nothing, is logged, and the message counts as decided (never asked again). With Use Decision
  model on, the decision model decides in the helper's place.
- A decision only adds to the message's `hidden_for`; it never shows a message to anyone."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

from sqlalchemy import text
from sqlmodel import Session, col, func, select

from app.chats.core.audience import audience_of
from app.chats.history import message_numbers
from app.chats.models import Chat, Message
from app.chats.service import chat_characters, chat_persona, set_message_audience
from app.chats.settings import read_settings
from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderError
from app.memory.scenes.core import visibility as rules
from app.memory.scenes.messages import decision_config, helper_config
from app.memory.scenes.models import Scene, SceneState
from app.memory.summaries.core.answers import Failure
from app.platform.core.errors import UserError
from app.platform.services import Services
from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)

DECIDE_TIMEOUT_S = 20.0
MAX_PER_TURN = 8  # new messages decided before one reply (more: the rest count as decided, unhidden)

_NEW = text(
    "SELECT id, role, name, content, character_id, hidden, hidden_for, whisper_to, audience_manual, status"
    " FROM message WHERE chat_id = :chat_id AND kind = 'message' AND id > :after ORDER BY id"
)
_BEFORE = text(
    "SELECT id, role, name, content FROM message WHERE chat_id = :chat_id AND kind = 'message'"
    " AND hidden = false AND status NOT IN ('error', 'streaming') AND id < :before ORDER BY id DESC LIMIT :most"
)


def applies(chat: Chat | None, members: int) -> bool:
    """Only turn-by-turn Roleplay groups with Advanced Memory and the option on."""
    if chat is None or chat.mode != "roleplay" or members < 2:
        return False
    s = read_settings(chat.settings)
    return s.advanced_memory and s.adv_decide_visibility and not s.group_merged


def decide_new_messages(services: Services, chat_id: int) -> int:
    """Decide the chat's new messages; how many were hidden from someone."""
    with Session(services.engine) as session:
        chat = session.get(Chat, chat_id)
        if not applies(chat, 2):  # the settings first: every reply asks, nearly all say no here
            return 0
        characters = chat_characters(session, chat_id)
        if not applies(chat, len(characters)):
            return 0
        assert chat is not None
        state = session.get(SceneState, chat_id)
        after = state.visibility_through_id if state is not None else None
        if after is None:  # the first decision: from the newest finished character reply on
            after = (
                session.exec(
                    select(func.max(Message.id)).where(
                        Message.chat_id == chat_id,
                        Message.kind == "message",
                        Message.role == "assistant",
                        col(Message.status).not_in(("streaming", "error")),
                    )
                ).one()
                or 0
            )
        rows = list(session.connection().execute(_NEW, {"chat_id": chat_id, "after": after}))
        settled = [r for r in rows if r.status != "streaming"]
        # Up to the first message still being written (the reply this decision comes before).
        streaming = next((r.id for r in rows if r.status == "streaming"), None)
        if streaming is not None:
            settled = [r for r in settled if r.id < streaming]
        if not settled:
            return 0
        members = {c.id: c.name for c in characters if c.id is not None}
        narrator = read_settings(chat.settings).narrator_id
        persona = chat_persona(session, chat)
        try:
            # The decision model when the chat uses one, else the helper.
            chosen = decision_config(session, services, chat) or helper_config(session, services, chat)
            config = replace(chosen, timeout_s=DECIDE_TIMEOUT_S)
        except UserError as err:
            config = None
            log.warning("deciding who sees new messages in chat %s: %s", chat_id, err)
        hidden = 0
        for n, row in enumerate(settled):
            if config is None or n >= MAX_PER_TURN:
                break
            if row.hidden or row.audience_manual or row.whisper_to is not None or row.status == "error":
                continue
            if not (row.content or "").strip():
                continue
            author = row.character_id if row.role == "assistant" else None
            raw = json.loads(row.hidden_for) if isinstance(row.hidden_for, str) else row.hidden_for
            already = audience_of(raw, None, author).hidden_for
            asked = rules.to_ask(members, author, narrator, sorted(already))
            if not asked:
                continue
            chosen = _ask(
                session, config, chat_id, row, list(asked.values()), persona.name if persona else None
            )
            if not chosen:
                continue
            ids = [i for i, name in asked.items() if name in chosen]
            msg = session.get(Message, row.id)
            if msg is None or msg.audience_manual:  # the user set it meanwhile: theirs wins
                continue
            set_message_audience(msg, list(members), hidden_for=sorted({*(msg.hidden_for or []), *ids}))
            msg.updated_at = utcnow()
            session.add(msg)
            hidden += 1
        state = session.get(SceneState, chat_id) or SceneState(chat_id=chat_id)
        state.visibility_through_id = settled[-1].id
        session.add(state)
        session.commit()
    if hidden:
        services.sources.messages_changed(services, chat_id)
    return hidden


def _ask(session: Session, config, chat_id: int, row, asked: list[str], persona: str | None) -> list[str]:
    """The names the helper is sure cannot see the message; [] on any failure (logged)."""
    start = session.exec(
        select(func.max(Scene.last_message_id)).where(
            Scene.chat_id == chat_id, col(Scene.last_message_id) < row.id, Scene.state != "deleted"
        )
    ).one()
    before = list(
        session.connection().execute(
            _BEFORE, {"chat_id": chat_id, "before": row.id, "most": rules.MAX_CONTEXT_MESSAGES}
        )
    )[::-1]
    keep = [
        m
        for k, m in enumerate(before)
        if start is None or m.id > start or k >= len(before) - rules.CONTEXT_BEFORE
    ]
    numbers = message_numbers(session, chat_id, {m.id for m in keep} | {row.id})
    scene = [rules.Line(numbers.get(m.id, 0), m.name or m.role, m.content or "") for m in keep]
    spoke = list(dict.fromkeys(m.name or m.role for m in keep if start is None or m.id > start))
    new = rules.Line(numbers.get(row.id, 0), row.name or row.role, row.content or "")
    request = rules.visibility_request(scene, new, asked, spoke)
    try:
        done = complete_chat_blocking(config, request, GenerationParams(max_tokens=rules.ANSWER_TOKENS))
    except ProviderError as err:
        log.warning("deciding who sees message %s in chat %s failed: %s", row.id, chat_id, err.message)
        return []
    got = rules.read_visibility(done.text or "", done.finish_reason, done.reasoning, asked, persona)
    if isinstance(got, Failure):
        log.warning(
            "deciding who sees message %s in chat %s: %s Nothing hidden.", row.id, chat_id, got.reason
        )
        return []
    return got
