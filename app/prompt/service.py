"""Gather the plain snapshot the builder needs from the database, then build."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import Session

from app.characters.models import Character
from app.chats import service as chats
from app.chats.models import Chat
from app.connections.models import Connection
from app.connections.providers.base import GenerationParams
from app.errors import UserError
from app.personas.models import Persona
from app.prompt.blocks import Prompt
from app.prompt.builder import CardSnapshot, HistoryMessage, PromptContext, build

# With no connection yet, Peek Prompt still works with these sizes.
FALLBACK_CONTEXT_SIZE = 8192
FALLBACK_MAX_TOKENS = 512


@dataclass(frozen=True)
class Effective:
    connection: Connection | None
    params: GenerationParams
    context_size: int


def effective_params(chat: Chat, connection: Connection | None) -> Effective:
    s = chats.chat_settings(chat)
    base_temp = connection.temperature if connection else None
    base_top_p = connection.top_p if connection else None
    max_tokens = s.max_tokens or (connection.max_tokens if connection else FALLBACK_MAX_TOKENS)
    context_size = s.context_size or (connection.context_size if connection else FALLBACK_CONTEXT_SIZE)
    stop = s.stop if s.stop is not None else list(connection.stop if connection else [])
    params = GenerationParams(
        temperature=s.temperature if s.temperature is not None else base_temp,
        top_p=s.top_p if s.top_p is not None else base_top_p,
        max_tokens=max_tokens,
        stop=tuple(stop),
    )
    return Effective(connection, params, context_size)


def card_snapshot(char: Character) -> CardSnapshot:
    return CardSnapshot(
        id=char.id, name=char.name, description=char.description, personality=char.personality,
        scenario=char.scenario, mes_example=char.mes_example, system_prompt=char.system_prompt,
        post_history_instructions=char.post_history_instructions,
    )  # fmt: skip


# The reply path's one hot query, in plain SQL through the driver: it runs before every reply and
# the ORM's per-statement overhead was most of its cost. Hidden messages come along (and are
# counted, not sent) so one statement usually suffices; a chat with many hidden messages among the
# newest ones takes a second, wider look.
_HISTORY_SQL = (
    "SELECT id, role, name, content, hidden FROM message "
    "WHERE chat_id = ? AND status != 'error' AND content != '' AND id < ? "
    "ORDER BY id DESC LIMIT ?"
)
_NO_UPPER_BOUND = 2**62


def history_rows(
    session: Session, chat_id: int, *, before_id: int | None, limit: int
) -> tuple[list[HistoryMessage], int]:
    """The newest `limit` messages the AI may read (oldest first) and how many hidden messages lie
    among them, over the (chat_id, id) index: a 5,000-message chat costs what an 80-message one does."""
    upper = before_id if before_id is not None else _NO_UPPER_BOUND
    fetch = limit + 16
    while True:
        rows = session.connection().exec_driver_sql(_HISTORY_SQL, (chat_id, upper, fetch)).all()
        visible = [r for r in rows if not r[4]]
        if len(visible) >= limit or len(rows) < fetch:
            break
        fetch *= 4
    visible = visible[:limit]
    if not visible:
        return [], 0
    oldest = visible[-1][0]
    hidden = sum(1 for r in rows if r[4] and r[0] > oldest)
    return [HistoryMessage(r[0], r[1], r[2], r[3]) for r in reversed(visible)], hidden


_UNSET = object()


def build_chat_prompt(
    session: Session,
    chat: Chat,
    *,
    speaker: Character | None = None,
    before_id: int | None = None,
    characters: list[Character] | None = None,
    persona: Persona | None | object = _UNSET,
) -> tuple[Prompt, Effective]:
    """The prompt for the next reply in `chat` (or for regenerating the message `before_id`).
    Callers that already loaded the chat's characters and persona pass them in (the reply path
    counts milliseconds)."""
    characters = characters if characters is not None else chats.chat_characters(session, chat.id)
    if not characters:
        raise UserError("This chat has no characters.")
    speaker = speaker or characters[chat.next_speaker % len(characters)]
    if persona is _UNSET:
        persona = chats.chat_persona(session, chat)
    effective = effective_params(chat, chats.chat_connection(session, chat))
    settings = chats.chat_settings(chat)
    rows, hidden = history_rows(session, chat.id, before_id=before_id, limit=settings.recent_message_limit)
    ctx = PromptContext(
        mode=chat.mode,
        characters=tuple(card_snapshot(c) for c in characters),
        speaker=card_snapshot(speaker),
        user_name=persona.name if persona else chats.FALLBACK_USER_NAME,
        persona_description=persona.description if persona else "",
        messages=tuple(rows),
        hidden_elsewhere=hidden,
        context_size=effective.context_size,
        reply_reserve=effective.params.max_tokens or FALLBACK_MAX_TOKENS,
        recent_limit=settings.recent_message_limit,
    )
    return build(ctx), effective
