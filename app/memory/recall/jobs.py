"""Background work for Memory Recall. Jobs take ids, open their own session, and are idempotent:
one that dies half-way is simply run again (after the next reply, by the sweep at start, or by the
periodic sweep)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select, update

from app.chats.models import Chat
from app.memory.recall.embedding import embedder_for_chat
from app.memory.recall.index import prune_tombstones
from app.memory.recall.models import MemoryChunk
from app.memory.recall.service import embed_chunks, embed_pending, list_chunk_ids, sync_chunks
from app.timeutil import utcnow

log = logging.getLogger(__name__)

SWEEP_MINUTES = 10
BATCH = 64
REBUILD_BATCH = 16  # smaller: the progress bar moves and Stop takes effect soon


def embed_chat(engine: Engine, chat_id: int) -> tuple[int, int, int]:
    """"memory.embed_chat": chunk what left the live window, drop stale chunks, embed waiting ones
    a batch at a time. Runs after every reply, whether or not recall is on for the chat."""
    with Session(engine) as session:
        if session.get(Chat, chat_id) is None:
            return 0, 0, 0
        added, removed = sync_chunks(session, chat_id)
        session.commit()
        embedder = embedder_for_chat(session, chat_id)
        embedded = 0
        while done := embed_pending(session, chat_id, embedder, limit=BATCH):
            session.commit()
            embedded += done
        session.commit()
    if added or removed or embedded:
        log.info("memory for chat %s: %d chunk(s) added, %d removed, %d embedded", chat_id, added, removed, embedded)
    return added, removed, embedded


def sweep(engine: Engine) -> None:
    """"memory.sweep": pick up work left by a restart, and try again where the source failed."""
    with Session(engine) as session:
        session.exec(update(MemoryChunk).where(col(MemoryChunk.status) == "unavailable")  # type: ignore[call-overload]
                     .values(status="waiting", error=None))  # fmt: skip
        prune_tombstones(session)
        session.commit()
        ids = list(session.exec(select(Chat.id)))
    for chat_id in ids:
        try:
            embed_chat(engine, chat_id)
        except Exception:  # one broken chat must not stop the others
            log.exception("memory sweep failed for chat %s", chat_id)


@dataclass
class Rebuild:
    """A running "Rebuild all": read by the viewer's progress bar, stopped by its Stop button."""

    total: int
    done: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    finished_at: datetime | None = None
    stopped: bool = False
    error: str | None = None

    @property
    def running(self) -> bool:
        return self.finished_at is None


_rebuilds: dict[tuple[str, int], Rebuild] = {}
_rebuilds_lock = threading.Lock()


def rebuild_state(engine: Engine, chat_id: int) -> Rebuild | None:
    return _rebuilds.get((str(engine.url), chat_id))


def start_rebuild(scheduler, engine: Engine, chat_id: int) -> Rebuild:
    """Embed every memory of the chat again with its current model, a batch at a time. Until a
    chunk's turn comes it keeps its old vectors, so a stopped rebuild loses nothing."""
    key = (str(engine.url), chat_id)
    with _rebuilds_lock:
        current = _rebuilds.get(key)
        if current is not None and current.running:
            return current
        with Session(engine) as session:
            ids = list_chunk_ids(session, chat_id)
        state = _rebuilds[key] = Rebuild(total=len(ids))
    if scheduler is not None and scheduler.running:
        scheduler.add_job(_rebuild, args=[engine, chat_id, ids, state], id=f"memory.rebuild:{chat_id}",
                          replace_existing=True, misfire_grace_time=None)  # fmt: skip
    else:
        _rebuild(engine, chat_id, ids, state)
    return state


def stop_rebuild(engine: Engine, chat_id: int) -> Rebuild | None:
    state = rebuild_state(engine, chat_id)
    if state is not None and state.running:
        state.stop.set()
    return state


def _rebuild(engine: Engine, chat_id: int, ids: list[int], state: Rebuild) -> None:
    try:
        with Session(engine) as session:
            embedder = embedder_for_chat(session, chat_id)
            for start in range(0, len(ids), REBUILD_BATCH):
                if state.stop.is_set():
                    state.stopped = True
                    break
                chunks = list(session.exec(select(MemoryChunk).where(col(MemoryChunk.id).in_(ids[start : start + REBUILD_BATCH]))))
                done, error = embed_chunks(session, chat_id, chunks, embedder)
                session.commit()
                if error:
                    state.error = error
                    break
                state.done += done + (len(ids[start : start + REBUILD_BATCH]) - len(chunks))  # forgotten meanwhile
    except Exception as err:  # the viewer must show that it ended, not spin forever
        log.exception("memory rebuild failed for chat %s", chat_id)
        state.error = str(err)
    finally:
        state.finished_at = utcnow()


def schedule_embed_chat(scheduler, engine: Engine, chat_id: int) -> None:
    if scheduler is None or not scheduler.running:
        return
    scheduler.add_job(embed_chat, args=[engine, chat_id], id=f"memory.embed_chat:{chat_id}", replace_existing=True,
                      misfire_grace_time=None)  # fmt: skip


def register(scheduler, engine: Engine) -> None:
    scheduler.add_job(sweep, "interval", minutes=SWEEP_MINUTES, args=[engine], id="memory.sweep", replace_existing=True)
    # Once at start as well: work cut off by a shutdown resumes without waiting for the interval.
    scheduler.add_job(sweep, args=[engine], id="memory.sweep_at_start", replace_existing=True, misfire_grace_time=None)
