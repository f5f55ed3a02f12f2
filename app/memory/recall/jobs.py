"""Background work for Memory Recall. Jobs take ids, open their own session, and are idempotent:
one that dies half-way is simply run again (after the next reply, or by the periodic sweep)."""

from __future__ import annotations

import logging

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from app.chats.models import Chat
from app.memory.recall.embedders import MiniLM
from app.memory.recall.service import embed_pending, sync_chunks

log = logging.getLogger(__name__)

SWEEP_MINUTES = 10


def default_embedder():
    """The embedding source used when a chat names none: the built-in MiniLM (later: the chat
    connection's embedding model and the global default, in that order)."""
    return MiniLM()


def embed_chat(engine: Engine, chat_id: int) -> tuple[int, int, int]:
    """"memory.embed_chat": chunk what left the live window, drop stale chunks, embed waiting ones.
    Runs after every reply, whether or not recall is on for the chat."""
    with Session(engine) as session:
        if session.get(Chat, chat_id) is None:
            return 0, 0, 0
        added, removed = sync_chunks(session, chat_id)
        session.commit()
        embedded = embed_pending(session, chat_id, default_embedder())
        session.commit()
    if added or removed or embedded:
        log.info("memory for chat %s: %d chunk(s) added, %d removed, %d embedded", chat_id, added, removed, embedded)
    return added, removed, embedded


def sweep(engine: Engine) -> None:
    """"memory.sweep": pick up work left by a restart or a failed source."""
    with Session(engine) as session:
        ids = list(session.exec(select(Chat.id)))
    for chat_id in ids:
        try:
            embed_chat(engine, chat_id)
        except Exception:  # one broken chat must not stop the others
            log.exception("memory sweep failed for chat %s", chat_id)


def schedule_embed_chat(scheduler, engine: Engine, chat_id: int) -> None:
    if scheduler is None or not scheduler.running:
        return
    scheduler.add_job(embed_chat, args=[engine, chat_id], id=f"memory.embed_chat:{chat_id}", replace_existing=True,
                      misfire_grace_time=None)  # fmt: skip


def register(scheduler, engine: Engine) -> None:
    scheduler.add_job(sweep, "interval", minutes=SWEEP_MINUTES, args=[engine], id="memory.sweep", replace_existing=True)
