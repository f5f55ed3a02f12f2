"""A new character reply saved as one message per scene (Advanced Memory Recall, issue 14): the
service around the pure `breaks.split_reply`.

Called once a new reply (a send, not Continue, Impersonate, a swipe or a regeneration) has ended
normally and its final text is stored; a stopped or broken reply keeps its text in one message. The
stored message becomes the first part and keeps its id; each further part is a new message of the
same character, added after it. The message info (model, usage, timing) moves to the last part; the
reply's reasoning (kept apart from its text, app/generation/reasoning.py) stays with the first part, and
reasoning tags left in an older reply's text stay at the top of the first part (`split_reply`).

A swipe or regeneration never splits: it makes a new version of the one message it is asked for,
which is always the chat's last message, i.e. the last part (an earlier part is not the last reply
and cannot get new versions; `breaks.first_part` is for when it can)."""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.chats import service as chats
from app.chats.models import SCENE_MODES, Chat, Message
from app.chats.settings import read_settings
from app.memory.scenes.core.breaks import split_reply
from app.platform.db import chat_scope, lock_for_write

# What a version records about its generation: it goes with the last part only.
MESSAGE_INFO = ("model", "usage", "gen_started", "gen_finished")


def splits_replies(chat: Chat) -> bool:
    """Whether a new reply in this chat is split at its scene breaks: a Roleplay chat with Advanced
    Memory on."""
    return chat.mode in SCENE_MODES and read_settings(chat.settings).advanced_memory


def split_stored_reply(engine: Engine, message_id: int, swipe_id: str) -> list[int]:
    """Split the finished reply stored in `message_id` (its version `swipe_id`) at its scene breaks;
    the ids of the messages that hold it, in order (`[message_id]` when nothing splits, and when the
    reply is no longer there as written: deleted, given another version, or no longer the chat's
    last message, where parts added after it would land after later messages)."""
    with Session(engine) as session:
        chat_id = session.exec(select(Message.chat_id).where(Message.id == message_id)).first()
        if chat_id is None:
            return [message_id]
        lock_for_write(session, chat_scope(chat_id))  # a message's chat never changes: read before it
        msg = session.get(Message, message_id)
        if msg is None or len(msg.swipes) != 1 or msg.swipes[0].get("id") != swipe_id:
            return [message_id]
        if msg.swipes[0].get("status") != "ok" or chats.last_message(session, msg.chat_id).id != msg.id:
            return [message_id]
        parts = split_reply(msg.content)
        if len(parts) < 2:
            return [message_id]
        version = dict(msg.swipes[0])
        info = {k: version.pop(k) for k in MESSAGE_INFO if k in version}
        msg.swipes = [{**version, "content": parts[0]}]
        msg.content = parts[0]
        session.add(msg)
        added = []
        for n, part in enumerate(parts[1:], start=2):
            new = chats.new_message(msg.chat_id, "assistant", msg.name, [part], character_id=msg.character_id)
            if n == len(parts):
                new.swipes = [{**new.swipes[0], **info}]
            session.add(new)
            added.append(new)
        session.flush()
        ids = [message_id, *(m.id for m in added)]
        session.commit()
        return ids
