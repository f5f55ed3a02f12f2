"""Chats and their messages: the I/O shell around the pure prompt and window code."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, bindparam, cast, func, or_
from sqlmodel import Session, col, delete, select

from app.characters.models import Character
from app.characters.service import greetings
from app.chats.attachments import link_attachments
from app.chats.core.audience import checked_hidden_for
from app.chats.core.limits import message_too_long
from app.chats.core.quoting import MAX_REFERENCES, excerpt_problem
from app.chats.models import CHAT_MODES, Chat, ChatCharacter, Message
from app.chats.settings import ChatSettings, read_settings
from app.connections.models import Connection
from app.connections.service import default_connection
from app.personas.models import Persona
from app.personas.service import FALLBACK_USER_NAME, default_persona
from app.platform.core.errors import NotFound, UserError
from app.platform.core.names import refuse_control_characters
from app.platform.core.speech import Member, speakers_css
from app.platform.db import chat_scope, lock_for_write
from app.platform.timeutil import utcnow


@dataclass
class ChatSummary:
    chat: Chat
    characters: list[Character]
    last_message: Message | None
    message_count: int


def get_chat(session: Session, chat_id: int) -> Chat:
    chat = session.get(Chat, chat_id)
    if chat is None:
        raise NotFound(f"Chat {chat_id} does not exist.")
    return chat


# Built once: every prompt build reads the chat's characters, and building the statement each time
# cost more than running it.
_CHAT_CHARACTERS = (
    select(Character)
    .join(ChatCharacter, col(ChatCharacter.character_id) == col(Character.id))
    .where(ChatCharacter.chat_id == bindparam("chat_id"))
    .order_by(ChatCharacter.position)
)


def chat_characters(session: Session, chat_id: int) -> list[Character]:
    return list(session.exec(_CHAT_CHARACTERS, params={"chat_id": chat_id}))


def chat_persona(session: Session, chat: Chat) -> Persona | None:
    if chat.persona_id:
        persona = session.get(Persona, chat.persona_id)
        if persona:
            return persona
    return default_persona(session)


def speech_stylesheet(characters: Sequence[Character], persona: Persona | None) -> str:
    """The chat's speech colours as CSS, from members and persona already loaded (the chat page has
    them: no query of its own)."""
    return speakers_css(
        [Member(c.id, c.colour, c.name) for c in characters if c.id is not None],
        persona.colour if persona else None,
    )


def user_name(session: Session, chat: Chat) -> str:
    persona = chat_persona(session, chat)
    return persona.name if persona else FALLBACK_USER_NAME


def chat_connection(session: Session, chat: Chat) -> Connection | None:
    if chat.connection_id:
        conn = session.get(Connection, chat.connection_id)
        if conn:
            return conn
    return default_connection(session)


def list_chats(session: Session, *, query: str | None = None) -> list[ChatSummary]:
    stmt = select(Chat).order_by(col(Chat.last_message_at).desc(), col(Chat.id).desc())
    if query and query.strip():
        stmt = stmt.where(col(Chat.name).icontains(query.strip()))
    chats = list(session.exec(stmt))
    if not chats:
        return []
    ids = [c.id for c in chats]
    # Message counts for the listed chats, counted on the (chat_id, id) index: one row per chat, none per
    # message. Decision (issue 23): no stored per-chat count, since every path that adds or deletes
    # messages (replies, imports, branches, deletes) would have to keep it in step and a missed one shows
    # a wrong number forever. The index count costs ~0.8 ms per 10,000 messages (38 ms for 50 chats of
    # 10,000 on a laptop-class machine): the list shows every chat today, and paging it (counts for the
    # page's chats only) is the next step if libraries of many long chats make the home page slow.
    counts = dict(
        session.exec(
            select(Message.chat_id, func.count(Message.id))
            .where(col(Message.chat_id).in_(ids))
            .group_by(Message.chat_id)
        ).all()
    )
    last_ids = session.exec(
        select(func.max(Message.id)).where(col(Message.chat_id).in_(ids)).group_by(Message.chat_id)
    ).all()
    last = {m.chat_id: m for m in session.exec(select(Message).where(col(Message.id).in_(last_ids)))}
    # Every listed chat's characters in one query, not one per chat.
    cast: dict[int, list[Character]] = {}
    for chat_id, character in session.exec(
        select(ChatCharacter.chat_id, Character)
        .join(ChatCharacter, col(ChatCharacter.character_id) == col(Character.id))
        .where(col(ChatCharacter.chat_id).in_(ids))
        .order_by(ChatCharacter.chat_id, ChatCharacter.position)
    ):
        cast.setdefault(chat_id, []).append(character)
    return [ChatSummary(c, cast.get(c.id, []), last.get(c.id), counts.get(c.id, 0)) for c in chats]


def create_chat(
    session: Session,
    *,
    character_ids: list[int],
    name: str | None = None,
    mode: str = "roleplay",
    persona_id: int | None = None,
    connection_id: int | None = None,
    with_greetings: bool = True,
) -> Chat:
    if not character_ids:
        raise UserError("Pick at least one character for the chat.")
    if mode not in CHAT_MODES:
        raise UserError("Mode must be roleplay, conversation or game.")
    chars = []
    for cid in dict.fromkeys(character_ids):
        char = session.get(Character, cid)
        if char is None:
            raise UserError(f"Character {cid} does not exist.")
        chars.append(char)
    default_name = chars[0].name if len(chars) == 1 else ", ".join(c.name for c in chars[:3])
    now = utcnow()
    chat = Chat(
        name=(name or "").strip() or f"{default_name} – {now:%Y-%m-%d %H:%M}",
        mode=mode,
        persona_id=persona_id,
        connection_id=connection_id,
        created_at=now,
        updated_at=now,
        last_message_at=now,
    )
    if mode == "game":
        # The first character picked runs the game (its Game Master; Chat Settings changes it); the
        # others are the party. Only the Game Master opens the game.
        chat.settings = {"narrator_id": chars[0].id}
    session.add(chat)
    session.flush()
    for pos, char in enumerate(chars):
        session.add(ChatCharacter(chat_id=chat.id, character_id=char.id, position=pos))
    if with_greetings:
        for char in chars[:1] if mode == "game" else chars:
            options = greetings(char)
            if options:
                session.add(new_message(chat.id, "assistant", char.name, options, character_id=char.id))
    session.flush()
    return chat


def new_message(
    chat_id: int, role: str, name: str, alternatives: list[str], *, character_id: int | None = None
) -> Message:
    now = utcnow()
    swipes = [swipe_record(text) for text in alternatives] or [swipe_record("")]
    return Message(
        chat_id=chat_id,
        role=role,
        name=name,
        character_id=character_id,
        content=swipes[0]["content"],
        swipes=swipes,
        active_swipe=0,
        created_at=now,
        updated_at=now,
    )


def swipe_record(content: str, *, status: str = "ok", error: str | None = None, **extra) -> dict:
    return {"content": content, "status": status, "error": error, "created_at": utcnow().isoformat(), **extra}


def rename_chat(session: Session, chat_id: int, name: str) -> Chat:
    chat = get_chat(session, chat_id)
    if not name.strip():
        raise UserError("A chat needs a name.")
    refuse_control_characters(name, "A chat name")
    chat.name = name.strip()[:200]
    chat.updated_at = utcnow()
    session.add(chat)
    return chat


def update_chat_options(
    session: Session,
    chat_id: int,
    *,
    settings: ChatSettings,
    connection_id: int | None,
    persona_id: int | None,
    mode: str | None = None,
) -> Chat:
    chat = get_chat(session, chat_id)
    if connection_id is not None and session.get(Connection, connection_id) is None:
        raise UserError(f"Connection {connection_id} does not exist.")
    if persona_id is not None and session.get(Persona, persona_id) is None:
        raise UserError(f"Persona {persona_id} does not exist.")
    if mode is not None:
        if mode not in CHAT_MODES:
            raise UserError("Mode must be roleplay, conversation or game.")
        chat.mode = mode
    if chat.mode == "game" and settings.group_merged:  # the Game Master speaks, never the group as one
        settings = settings.model_copy(update={"group_merged": False})
    chat.connection_id = connection_id
    chat.persona_id = persona_id
    chat.settings = settings.model_dump(exclude_none=True)
    chat.updated_at = utcnow()
    session.add(chat)
    session.flush()
    return chat


def chat_settings(chat: Chat) -> ChatSettings:
    return read_settings(chat.settings)


def delete_chat(session: Session, chat_id: int) -> None:
    session.exec(delete(Message).where(Message.chat_id == chat_id))  # type: ignore[call-overload]
    session.delete(get_chat(session, chat_id))
    session.flush()


def list_messages(session: Session, chat_id: int) -> list[Message]:
    return list(session.exec(select(Message).where(Message.chat_id == chat_id).order_by(Message.id)))


def get_message(session: Session, chat_id: int, message_id: int, *, fresh: bool = False) -> Message:
    """The message; `fresh` reads it again even when this session holds it (after taking the lock)."""
    msg = session.get(Message, message_id, populate_existing=fresh)
    if msg is None or msg.chat_id != chat_id:
        raise NotFound(f"Message {message_id} is not in chat {chat_id}.")
    return msg


def last_message(session: Session, chat_id: int) -> Message | None:
    # limit(1): the ORM fetches every row a statement returns, .first() only keeps one of them.
    return session.exec(
        select(Message).where(Message.chat_id == chat_id).order_by(col(Message.id).desc()).limit(1)
    ).first()


def add_user_message(
    session: Session,
    chat: Chat,
    content: str,
    *,
    name: str | None = None,
    flush: bool = True,
    attachment_ids: Sequence[int] = (),
    quote: str | None = None,
    chat_refs: Sequence[Mapping[str, Any]] = (),
    whisper_to: int | None = None,
) -> Message:
    """The user's message; `attachment_ids` are uploads waiting in this chat, linked to it here, in
    the same transaction (app/chats/attachments.py); `quote` an excerpt of a reply it answers and
    `chat_refs` other chats' memories attached with @, as sent (app/chats/core/quoting.py);
    `whisper_to` a member of a group only it (and the narrator) will read."""
    if not content.strip():
        if attachment_ids:
            # Files alone would leave the model without the user's turn (empty messages are not sent).
            raise UserError("Write a few words to go with the file: what should happen with it?")
        raise UserError("The message is empty.")
    if problem := message_too_long(content):
        raise UserError(problem)
    if problem := excerpt_problem(quote):
        raise UserError(problem)
    if len(chat_refs) > MAX_REFERENCES:
        raise UserError(f"A message takes at most {MAX_REFERENCES} other chats' memories.")
    msg = new_message(chat.id, "user", name or user_name(session, chat), [content])
    if quote and quote.strip():
        msg.quote = quote.strip()
    if chat_refs:
        msg.chat_refs = [dict(ref) for ref in chat_refs]
    if whisper_to is not None:
        set_message_audience(msg, [c.id for c in chat_characters(session, chat.id)], whisper_to=whisper_to)
    session.add(msg)
    touch_chat(session, chat)
    if attachment_ids:
        session.flush()
        link_attachments(session, chat.id, msg.id, attachment_ids)
    if flush:
        session.flush()
    return msg


def touch_chat(session: Session, chat: Chat) -> None:
    chat.last_message_at = chat.updated_at = utcnow()
    session.add(chat)


def _sync_active(msg: Message) -> None:
    active = msg.swipes[msg.active_swipe]
    msg.content = active.get("content", "")
    msg.status = active.get("status", "ok")
    msg.error = active.get("error")
    msg.tool_calls = active.get("tool_calls") or None
    msg.updated_at = utcnow()


def edit_message(session: Session, chat_id: int, message_id: int, content: str) -> Message:
    if problem := message_too_long(content):
        raise UserError(problem)
    lock_for_write(session, chat_scope(chat_id))  # a reply being written rewrites the versions too
    msg = get_message(session, chat_id, message_id, fresh=True)
    swipes = [dict(s) for s in msg.swipes] or [swipe_record("")]
    swipes[msg.active_swipe] = {
        **swipes[msg.active_swipe],
        "content": content,
        "status": "ok",
        "error": None,
        "edited_at": utcnow().isoformat(),
    }
    msg.swipes = swipes
    _sync_active(msg)
    session.add(msg)
    session.flush()
    return msg


def set_hidden(session: Session, chat_id: int, message_id: int, hidden: bool) -> Message:
    msg = get_message(session, chat_id, message_id)
    msg.hidden = hidden
    msg.audience_manual = True  # the user's choice: Decide who sees new messages never changes it
    msg.updated_at = utcnow()
    session.add(msg)
    session.flush()
    return msg


_KEEP = object()


def set_audience(
    session: Session,
    chat_id: int,
    message_id: int,
    *,
    hidden_for: Sequence[int] | None | object = _KEEP,
    whisper_to: int | None | object = _KEEP,
) -> Message:
    """Who in a group can see the message: hidden from these characters (an empty list: from none),
    whispered to this one (None: to nobody). What is not passed stays. The ids must be the chat's
    members (a whisper's recipient is fixed by id here: a rename cannot redirect it)."""
    msg = get_message(session, chat_id, message_id)
    set_message_audience(
        msg,
        [c.id for c in chat_characters(session, chat_id)],
        hidden_for=hidden_for,
        whisper_to=whisper_to,
    )
    msg.audience_manual = True  # the user's choice: Decide who sees new messages never changes it
    msg.updated_at = utcnow()
    session.add(msg)
    session.flush()
    return msg


def set_message_audience(
    msg: Message,
    members: list[int],
    *,
    hidden_for: Sequence[int] | None | object = _KEEP,
    whisper_to: int | None | object = _KEEP,
) -> None:
    """The one place a message's audience and its `private` mark are written."""
    if hidden_for is not _KEEP:
        try:
            msg.hidden_for = checked_hidden_for(hidden_for or (), members)  # type: ignore[arg-type]
        except ValueError as err:
            raise UserError(str(err)) from err
    if whisper_to is not _KEEP:
        if whisper_to is not None and whisper_to not in members:
            raise UserError(f"Character {whisper_to} is not in this chat: a whisper goes to a member.")
        if whisper_to is not None and len(members) < 2:
            raise UserError(
                "Whispers are for group chats: with one character there is nobody to keep it from."
            )
        msg.whisper_to = whisper_to  # type: ignore[assignment]
    msg.private = bool(msg.hidden_for) or msg.whisper_to is not None


def delete_message(session: Session, chat_id: int, message_id: int) -> None:
    session.delete(get_message(session, chat_id, message_id))
    session.flush()


def delete_message_from_page(session: Session, chat_id: int, message_id: int) -> Message | None:
    """Delete a message; the reply left last when the deleted message was the last (a reply's controls
    change then: its new-version arrow, Regenerate), else None: the page re-renders only that one.
    The chat's write lock comes first: two deletes sent together each read the chat before the other's
    was written, and neither found the message left last. A user's message left last is not sent again:
    its controls stay as they are, and re-rendering it would detach its Delete button from a request
    already on its way (the message would stay on the page, deleted)."""
    lock_for_write(session, chat_scope(chat_id))
    was_last = last_message(session, chat_id)
    delete_message(session, chat_id, message_id)
    last = last_message(session, chat_id)
    if last is None or last.role != "assistant" or was_last is None or was_last.id != message_id:
        return None
    return last


def select_swipe(session: Session, chat_id: int, message_id: int, index: int) -> Message:
    lock_for_write(session, chat_scope(chat_id))  # a reply being written rewrites the versions too
    msg = get_message(session, chat_id, message_id, fresh=True)
    if not 0 <= index < len(msg.swipes):
        raise UserError(f"This message has {len(msg.swipes)} alternative(s); there is no number {index + 1}.")
    msg.active_swipe = index
    _sync_active(msg)
    session.add(msg)
    session.flush()
    return msg


def delete_swipe(session: Session, chat_id: int, message_id: int, index: int | None = None) -> Message:
    """Delete one version of a message (the shown one by default); the shown one stays shown."""
    lock_for_write(session, chat_scope(chat_id))  # a reply being written rewrites the versions too
    msg = get_message(session, chat_id, message_id, fresh=True)
    if len(msg.swipes) < 2:
        raise UserError("This is the only version of the message; delete the message instead.")
    index = msg.active_swipe if index is None else index
    if not 0 <= index < len(msg.swipes):
        raise UserError(f"This message has {len(msg.swipes)} alternative(s); there is no number {index + 1}.")
    swipes = list(msg.swipes)
    swipes.pop(index)
    msg.swipes = swipes
    if index < msg.active_swipe:
        msg.active_swipe -= 1
    msg.active_swipe = min(msg.active_swipe, len(swipes) - 1)
    _sync_active(msg)
    session.add(msg)
    session.flush()
    return msg


def branch_chat(session: Session, chat_id: int, message_id: int) -> Chat:
    """A new chat holding copies of every message up to and including `message_id`."""
    source = get_chat(session, chat_id)
    get_message(session, chat_id, message_id)
    now = utcnow()
    branch = Chat(
        name=f"{source.name} (branch)"[:200],
        mode=source.mode,
        connection_id=source.connection_id,
        persona_id=source.persona_id,
        settings=dict(source.settings),
        st_header=dict(source.st_header),
        next_speaker=source.next_speaker,
        game_root_id=source.game_root_id,  # a later session's branch still reads the earlier ones
        created_at=now,
        updated_at=now,
        last_message_at=now,
    )
    session.add(branch)
    session.flush()
    for link in session.exec(select(ChatCharacter).where(ChatCharacter.chat_id == chat_id)):
        session.add(ChatCharacter(chat_id=branch.id, character_id=link.character_id, position=link.position))
    stmt = (
        select(Message).where(Message.chat_id == chat_id, col(Message.id) <= message_id).order_by(Message.id)
    )
    for msg in session.exec(stmt):
        data = msg.model_dump(exclude={"id", "chat_id"})
        session.add(Message(**data, chat_id=branch.id))
    session.flush()
    return branch


def next_speaker(
    session: Session, chat: Chat, characters: list[Character], requested_id: int | None
) -> Character:
    """The member asked for, or the chat's one character. A group's own pick is turn-taking's
    (app/chats/turn_taking.py)."""
    if not characters:
        raise UserError("This chat has no character left to answer; add one in Chat Settings.")
    if requested_id is not None:
        for char in characters:
            if char.id == requested_id:
                return char
        raise UserError(f"Character {requested_id} is not in this chat.")
    return characters[0]


INTERRUPTED = "Sugo stopped before this reply was finished."


def finish_interrupted_replies(session: Session, *, writing: Callable[[], Collection[int]] = tuple) -> int:
    """Replies still marked "streaming" whose writer is gone (a stop or crash of the server; on
    PostgreSQL, another server that died): keep what was written and mark them, so no message waits
    forever for a stream that is gone. At start, and now and then with several servers.

    `writing()` names the chats whose reply a live server writes now (their live reply claims): those
    are left alone. It is asked after the replies are read, under the write lock: a reply is stored
    "streaming" only after its claim is taken, so a reply read here whose claim is not in that answer
    has no writer (given back, its reply would have been finished first). The caller commits."""
    candidates = [msg.id for msg in _streaming_replies(session)]
    if not candidates:
        return 0  # the usual case: no write lock taken
    lock_for_write(session)
    fresh = select(Message).where(col(Message.id).in_(candidates)).execution_options(populate_existing=True)
    cut_off = [msg for msg in session.exec(fresh) if _is_streaming(msg)]
    live = set(writing()) if cut_off else set()
    count = 0
    for msg in cut_off:
        if msg.chat_id in live:
            continue
        swipes = [dict(s) for s in msg.swipes]
        for swipe in swipes:
            if swipe.get("status") == "streaming":
                swipe["status"] = "partial" if swipe.get("content") else "error"
                swipe["error"] = INTERRUPTED
        msg.swipes = swipes
        _sync_active(msg)
        session.add(msg)
        count += 1
    return count


def _streaming_replies(session: Session) -> list[Message]:
    # A reply may be streaming into a version that is not the one shown (the user switched away
    # meanwhile): the message's own status is then "ok", so its versions are looked at too.
    maybe = or_(col(Message.status) == "streaming", cast(Message.swipes, String).contains('"streaming"'))
    return [msg for msg in session.exec(select(Message).where(maybe)) if _is_streaming(msg)]


def _is_streaming(msg: Message) -> bool:
    """False when "streaming" was only a word in a message's text."""
    return msg.status == "streaming" or any(s.get("status") == "streaming" for s in msg.swipes)


REFRESH_TEXT = "Refresh: the AI reads nothing above this line."


def add_refresh_mark(session: Session, chat: Chat) -> Message:
    """Cut the recent messages here. Long-term parts (card, persona, notes) stay; deleting the mark
    undoes the cut."""
    msg = new_message(chat.id, "system", "Refresh", [REFRESH_TEXT])
    msg.kind = "refresh"
    session.add(msg)
    touch_chat(session, chat)
    session.flush()
    return msg
