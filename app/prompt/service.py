"""Gather the plain snapshot the builder needs from the database, then build."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from app.characters.models import Character
from app.characters.service import character_note
from app.chats import service as chats
from app.chats.models import Chat
from app.connections.models import Connection
from app.connections.providers.base import GenerationParams
from app.errors import UserError
from app.personas.models import Persona
from app.prompt.blocks import Prompt
from app.prompt.builder import CardSnapshot, DepthNote, DynamicBlock, HistoryMessage, PromptContext, build
from app.prompt.macros import MacroContext
from app.prompt.tokens import count_tokens
from app.prompt.window import WindowPlan, plan_window

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


# The reply path's hot queries, in plain SQL through the driver: they run before every reply and
# the ORM's per-statement overhead was most of their cost. All use the (chat_id, id) index.
# Messages with empty text are counted but never sent (the builder skips them); leaving
# `content` out of the filter lets the count run on an index alone.
_SENDABLE = "chat_id = ? AND kind = 'message' AND status != 'error' AND id > ? AND id < ?"
_LAST_REFRESH_SQL = "SELECT coalesce(max(id), 0) FROM message WHERE chat_id = ? AND kind = 'refresh' AND id < ?"
_COUNT_SQL = f"SELECT count(*), coalesce(sum(hidden), 0) FROM message WHERE {_SENDABLE}"
_FIRST_SQL = f"SELECT id, role, name, content FROM message WHERE {_SENDABLE} AND hidden = 0 ORDER BY id LIMIT 1"
_NEWEST_SQL = (
    f"SELECT id, role, name, content FROM message WHERE {_SENDABLE} AND hidden = 0 ORDER BY id DESC LIMIT ?"
)
_HIDDEN_AFTER_SQL = f"SELECT count(*) FROM message WHERE {_SENDABLE} AND hidden = 1 AND id > ?"
_NO_UPPER_BOUND = 2**62


@dataclass(frozen=True)
class History:
    messages: list[HistoryMessage]  # the window: the pinned first message, then the newest ones
    plan: WindowPlan
    hidden: int  # hidden messages inside the window's span (counted for Peek Prompt, never sent)
    refreshed: bool = False  # a refresh mark cut the history


def history_window(session: Session, chat_id: int, *, before_id: int | None, limit: int) -> History:
    """The recent-message window of a chat, read without touching the messages it leaves out: a
    5,000-message chat costs what an 80-message one does."""
    conn = session.connection()
    upper = before_id if before_id is not None else _NO_UPPER_BOUND
    # After a refresh mark the AI reads only what follows it, and the chat's first message is not
    # pinned any more: the refresh is a fresh start.
    lower = conn.exec_driver_sql(_LAST_REFRESH_SQL, (chat_id, upper)).scalar_one()
    span = (chat_id, lower, upper)
    total, hidden_total = conn.exec_driver_sql(_COUNT_SQL, span).one()
    plan = plan_window(total - hidden_total, limit, keep_first=not lower)
    rows = []
    if plan.pinned:
        rows.extend(conn.exec_driver_sql(_FIRST_SQL, span).all())
    if plan.recent:
        rows.extend(reversed(conn.exec_driver_sql(_NEWEST_SQL, (*span, plan.recent)).all()))
    messages = [HistoryMessage(*row) for row in rows]
    hidden = 0
    if hidden_total and messages:
        # Without drops every hidden message lies inside the window's span; with drops, those
        # among the dropped ones are not counted.
        start = messages[plan.pinned].id - 1 if plan.dropped else 0
        hidden = conn.exec_driver_sql(_HIDDEN_AFTER_SQL, (*span, start)).scalar_one()
    return History(messages, plan, hidden, refreshed=bool(lower))


_UNSET = object()


def _recall_query(messages: list[HistoryMessage]) -> str:
    """The newest user message, with the message before it when it is very short ("and then?")."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            text = messages[i].content
            if len(text.split()) < 4 and i > 0:
                text = f"{messages[i - 1].content}\n{text}"
            return text
    return ""


def _recall(session: Session, chat: Chat, history: History, context_size: int):
    from app.memory.recall.embedding import embedder_for_chat
    from app.memory.recall.service import recall_for_prompt

    recent = history.messages[history.plan.pinned :]
    return recall_for_prompt(
        session, chat.id, _recall_query(history.messages), context_size=context_size,
        window_start_id=recent[0].id if recent else None, count=count_tokens, embedder=embedder_for_chat(session, chat.id),
    )  # fmt: skip


def _lore(session: Session, chat: Chat, history: History, characters, persona, speaker, *, before_id: int | None,
          seed: int, chat_budget: int, variables: dict):  # fmt: skip
    from app.lore.prompting import lore_for_prompt, message_count

    visible = [m for m in history.messages if not m.hidden]
    user = persona.name if persona else chats.FALLBACK_USER_NAME
    return lore_for_prompt(
        session, chat, messages=[f"{m.name}: {m.content}" for m in visible],
        message_count=message_count(session, chat.id, before_id), character_ids=[c.id for c in characters],
        persona_id=persona.id if persona else None, char=speaker.name, user=user,
        seed=seed, chat_budget=chat_budget, count=count_tokens, variables=variables,
    )  # fmt: skip


def _now_text() -> str:
    now = datetime.now().astimezone()
    return f"{now:%A, %d %B %Y, %H:%M} ({now.tzname()})"


def build_chat_prompt(
    session: Session,
    chat: Chat,
    *,
    speaker: Character | None = None,
    before_id: int | None = None,
    characters: list[Character] | None = None,
    persona: Persona | None | object = _UNSET,
    lore_seed: int | None = None,
    record_lore: bool = False,
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
    history = history_window(session, chat.id, before_id=before_id, limit=settings.recent_message_limit)
    notes = []
    extra: list[str] = []
    if history.refreshed:
        extra.append("A refresh mark cuts the conversation: nothing above it is sent. Delete the mark to undo.")
    dynamic: list[DynamicBlock] = []
    if settings.recall_enabled(chat.mode):
        recall = _recall(session, chat, history, effective.context_size)
        extra.append(recall.note)
        if recall.block:
            dynamic.append(DynamicBlock("recalled_memories", "Recalled memories", recall.block))
    else:
        extra.append("Memory Recall is off for this chat (Chat Settings → Memory Recall); memories are still kept.")
    from app.lore.prompting import generation_seed

    seed = lore_seed if lore_seed is not None else generation_seed(chat.id, before_id, 0)
    # One set of variables for the lorebook scan and the prompt; kept only after a real reply.
    variables = dict(chat.variables or {})
    lore = _lore(session, chat, history, characters, persona, speaker, before_id=before_id, seed=seed,
                 chat_budget=settings.lore_token_budget, variables=variables)  # fmt: skip
    fixed: list[DynamicBlock] = []
    if lore is not None:
        extra.append(lore.note)
        fixed.extend(lore.fixed)
        dynamic.extend(lore.dynamic)
        notes.extend(lore.depth_notes)
    macros = MacroContext(variables=variables, pick_seed=f"chat:{chat.id}", random_seed=seed)
    note_text, note_depth, note_role = character_note(speaker)
    if note_text.strip():
        notes.append(DepthNote(note_text, note_depth, note_role, label=f"{speaker.name}'s note"))
    if settings.context_note.strip():
        notes.append(DepthNote(settings.context_note, settings.context_note_depth, settings.context_note_role))
    ctx = PromptContext(
        mode=chat.mode,
        characters=tuple(card_snapshot(c) for c in characters),
        speaker=card_snapshot(speaker),
        user_name=persona.name if persona else chats.FALLBACK_USER_NAME,
        persona_description=persona.description if persona else "",
        messages=tuple(history.messages),
        hidden_elsewhere=history.hidden,
        window=history.plan,
        depth_notes=tuple(notes),
        fixed=tuple(fixed),
        macros=macros,
        current_time=_now_text() if settings.time_awareness else None,
        extra_notes=tuple(extra),
        dynamic=tuple(dynamic),
        context_size=effective.context_size,
        reply_reserve=effective.params.max_tokens or FALLBACK_MAX_TOKENS,
        recent_limit=settings.recent_message_limit,
    )
    prompt = build(ctx)
    if record_lore:
        from app.lore.prompting import record_scan

        record_scan(session, chat, lore, variables)
    return prompt, effective
