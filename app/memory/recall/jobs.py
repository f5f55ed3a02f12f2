"""Background work for Memory Recall. Jobs take the app's services and ids, open their own
session, and are idempotent: one that dies half-way is simply run again (after the next reply, by
the sweep at start, or by the periodic sweep)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime

from sqlmodel import Session, col, select, update

from app.chats.models import Chat
from app.jobs import Job, run_soon
from app.memory.recall.embedding import embedder_for_chat
from app.memory.recall.index import prune_tombstones
from app.memory.recall.models import MemoryChunk
from app.memory.recall.service import embed_chunks, embed_pending, list_chunk_ids, sync_chunks
from app.services import Services
from app.timeutil import utcnow

log = logging.getLogger(__name__)

SWEEP_MINUTES = 10
BATCH = 64
REBUILD_BATCH = 16  # smaller: the progress bar moves and Stop takes effect soon


def embed_chat(services: Services, chat_id: int) -> tuple[int, int, int]:
    """"memory.embed_chat": chunk what left the live window, drop stale chunks, embed waiting ones
    a batch at a time. Runs after every reply, whether or not recall is on for the chat."""
    with Session(services.engine) as session:
        if session.get(Chat, chat_id) is None:
            return 0, 0, 0
        added, removed = sync_chunks(session, chat_id)
        session.commit()
        embedder = embedder_for_chat(session, chat_id, services.keybox)
        embedded = 0
        while done := embed_pending(session, chat_id, embedder, limit=BATCH):
            session.commit()
            embedded += done
        session.commit()
    if added or removed or embedded:
        log.info("memory for chat %s: %d chunk(s) added, %d removed, %d embedded", chat_id, added, removed, embedded)
    return added, removed, embedded


def sweep(services: Services) -> None:
    """"memory.sweep": pick up work left by a restart, and try again where the source failed."""
    with Session(services.engine) as session:
        session.exec(update(MemoryChunk).where(col(MemoryChunk.status) == "unavailable")  # type: ignore[call-overload]
                     .values(status="waiting", error=None))  # fmt: skip
        prune_tombstones(session)
        session.commit()
        ids = list(session.exec(select(Chat.id)))
    for chat_id in ids:
        try:
            embed_chat(services, chat_id)
        except Exception:  # one broken chat must not stop the others
            log.exception("memory sweep failed for chat %s", chat_id)


JOBS = (Job("memory.sweep", sweep, every_minutes=SWEEP_MINUTES, at_start=True),)


def schedule_embed_chat(services: Services, chat_id: int) -> None:
    """Chunk and embed the chat's new memories in the background, soon."""
    run_soon(services.scheduler, embed_chat, services, chat_id, job_id=f"memory.embed_chat:{chat_id}")


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


class Rebuilds:
    """The app's rebuilds, one per chat (the last one is kept for the viewer to report on)."""

    def __init__(self) -> None:
        self._by_chat: dict[int, Rebuild] = {}
        self._lock = threading.Lock()

    def get(self, chat_id: int) -> Rebuild | None:
        return self._by_chat.get(chat_id)

    def start(self, services: Services, chat_id: int) -> Rebuild:
        """Embed every memory of the chat again with its current model, a batch at a time. Until
        a chunk's turn comes it keeps its old vectors, so a stopped rebuild loses nothing."""
        with self._lock:
            current = self._by_chat.get(chat_id)
            if current is not None and current.running:
                return current
            with Session(services.engine) as session:
                ids = list_chunk_ids(session, chat_id)
            state = self._by_chat[chat_id] = Rebuild(total=len(ids))
        if not run_soon(services.scheduler, _rebuild, services, chat_id, ids, state, job_id=f"memory.rebuild:{chat_id}"):
            _rebuild(services, chat_id, ids, state)
        return state

    def stop(self, chat_id: int) -> Rebuild | None:
        state = self._by_chat.get(chat_id)
        if state is not None and state.running:
            state.stop.set()
        return state


def _rebuild(services: Services, chat_id: int, ids: list[int], state: Rebuild) -> None:
    try:
        with Session(services.engine) as session:
            embedder = embedder_for_chat(session, chat_id, services.keybox)
            for start in range(0, len(ids), REBUILD_BATCH):
                if state.stop.is_set():
                    state.stopped = True
                    break
                batch = ids[start : start + REBUILD_BATCH]
                chunks = list(session.exec(select(MemoryChunk).where(col(MemoryChunk.id).in_(batch))))
                done, error = embed_chunks(session, chat_id, chunks, embedder)
                session.commit()
                if error:
                    state.error = error
                    break
                state.done += done + (len(batch) - len(chunks))  # forgotten meanwhile
    except Exception:  # the viewer must show that it ended, not spin forever
        log.exception("memory rebuild failed for chat %s", chat_id)
        state.error = "The rebuild stopped because of an internal error; the server log has the details."
    finally:
        state.finished_at = utcnow()
