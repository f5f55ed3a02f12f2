"""Background work for Memory Recall. Jobs take the app's services and ids, open their own
session, and are idempotent: one that dies half-way is simply run again (after the next reply, by
the sweep at start, or by the periodic sweep)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TypeVar

from sqlmodel import Session, col, select, update

from app.chats.models import Chat
from app.memory.recall.embedding import embedder_for_chat
from app.memory.recall.index import fill_postgres_index, on_postgres, prune_tombstones
from app.memory.recall.models import MemoryChunk
from app.memory.recall.service import embed_chunks, embed_pending, list_chunk_ids, sync_chunks, waiting_count
from app.platform.jobs import Job, lower_this_threads_priority, run_soon
from app.platform.services import Services
from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)
T = TypeVar("T")

SWEEP_MINUTES = 10
BATCH = 64
REBUILD_BATCH = 16  # smaller: the progress bar moves and Stop takes effect soon


class ChatSyncs:
    """Which chats' memories are being synced now: one sync per chat at a time, whether the
    per-chat job or the sweep asked for it. A background request that finds its chat busy does not
    wait (nor tie up a scheduler thread): it asks the running sync to go once more when done, so a
    change made meanwhile (a message deleted during a long embedding) is not left for the next
    sweep. A direct call may wait its turn instead."""

    def __init__(self) -> None:
        self._turn = threading.Condition()
        self._busy: set[int] = set()
        self._again: set[int] = set()

    def run(self, chat_id: int, work: Callable[[], T], *, wait: bool = False) -> T | None:
        """`work()`, and again while others asked meanwhile. When another sync of the chat is
        running: None at once (that one goes again for this request), or with `wait`, after it."""
        with self._turn:
            while chat_id in self._busy:
                if not wait:
                    self._again.add(chat_id)
                    return None
                self._turn.wait()
            self._busy.add(chat_id)
        try:
            while True:
                result = work()
                with self._turn:
                    if chat_id not in self._again:
                        return result
                    self._again.discard(chat_id)
        finally:
            with self._turn:
                self._busy.discard(chat_id)
                self._again.discard(chat_id)
                self._turn.notify_all()

    def busy(self, chat_id: int) -> bool:
        with self._turn:
            return chat_id in self._busy

    def asked_again(self, chat_id: int) -> bool:
        """The running sync of the chat will go once more (it was asked for meanwhile)."""
        with self._turn:
            return chat_id in self._again


def embed_chat(services: Services, chat_id: int) -> tuple[int, int, int]:
    """Drop stale chunks, chunk the messages after the last one (five at a time), embed waiting ones a
    batch at a time; (added, removed, embedded). Waits for a sync of the chat already running to end."""
    result = services.recall.syncs.run(chat_id, partial(_embed_chat, services, chat_id), wait=True)
    if result is None:  # a run that waits its turn always runs: this would be a bug in ChatSyncs
        raise RuntimeError(f"the memory sync of chat {chat_id} did not run")
    return result


def sync_chat(services: Services, chat_id: int) -> None:
    """ "memory.embed_chat": `embed_chat` in the background, after every reply and every change to
    a message, whether or not recall is on for the chat. When the chat's sync is running already,
    that one goes once more instead."""
    lower_this_threads_priority()  # a scheduler worker: background work only
    services.recall.syncs.run(chat_id, partial(_embed_chat, services, chat_id))


def _embed_chat(services: Services, chat_id: int) -> tuple[int, int, int]:
    # Chunking reads every message of the chat (~0.2-0.4 s of Python at 5,000 messages): like the
    # batches below, it waits while a reply is being written rather than share the GIL with its prompt.
    services.foreground.wait_for_quiet()
    with Session(services.engine) as session:
        if session.get(Chat, chat_id) is None:
            return 0, 0, 0
        added, removed = sync_chunks(session, chat_id)
        embedder = embedder_for_chat(session, chat_id, services.keybox, sizes=services.recall.sizes)
        session.commit()
        embedded = 0
        while True:
            # Each batch waits while a reply is being written: the built-in model would take the CPU the
            # reply's prompt and stream need (app/platform/foreground.py). Committed first, so no
            # transaction stays open meanwhile.
            services.foreground.wait_for_quiet()
            done = embed_pending(session, chat_id, embedder, limit=BATCH)
            session.commit()
            if not done:
                break
            embedded += done
    if added or removed or embedded:
        log.info(
            "memory for chat %s: %d chunk(s) added, %d removed, %d embedded",
            chat_id,
            added,
            removed,
            embedded,
        )
    return added, removed, embedded


def sweep(services: Services) -> None:
    """ "memory.sweep": pick up work left by a restart, and try again where the source failed."""
    with Session(services.engine) as session:
        session.exec(
            update(MemoryChunk)
            .where(col(MemoryChunk.status) == "unavailable")  # type: ignore[call-overload]
            .values(status="waiting", error=None)
        )
        prune_tombstones(session)
        if on_postgres(session):  # memories copied in by plain inserts get their words and indexes
            fill_postgres_index(session.connection())
        session.commit()
        ids = list(session.exec(select(Chat.id)))
    shared = services.queue is not None and services.queue.shared
    for chat_id in ids:
        try:
            if shared:  # several servers: each chat's sync is a queued job, never two of a chat at once
                schedule_embed_chat(services, chat_id)
            else:
                sync_chat(services, chat_id)
        except Exception:  # one broken chat must not stop the others
            log.exception("memory sweep failed for chat %s", chat_id)


EMBED_CHAT = "memory.embed_chat"
JOBS = (
    Job("memory.sweep", sweep, every_minutes=SWEEP_MINUTES, at_start=True),
    Job(EMBED_CHAT, sync_chat, every_minutes=None),
)


def schedule_embed_chat(services: Services, chat_id: int) -> None:
    """Bring the chat's memories in step with its messages in the background, soon: chunk and
    embed new ones, drop those whose messages changed (one such job waiting per chat)."""
    if services.queue is not None:
        services.queue.defer(EMBED_CHAT, chat_id=chat_id)


def building(services: Services, chat_id: int) -> bool:
    """The chat's memories are being made or embedded, or will be as soon as the scheduler can
    (an import or a branch just asked): the viewer says so rather than "0 memories"."""
    return services.recall.syncs.busy(chat_id) or (
        services.queue is not None and services.queue.pending(EMBED_CHAT, chat_id=chat_id)
    )


@dataclass
class Rebuild:
    """A running "Rebuild all": read by the viewer's progress bar, stopped by its Stop button."""

    total: int
    done: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    finished_at: datetime | None = None
    stopped: bool = False
    error: str | None = None
    # The chat had no memories: this one makes them from the messages first (total is then known).
    making: bool = False

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
            state = self._by_chat[chat_id] = Rebuild(total=len(ids), making=not ids)
        work = (
            partial(_make, services, chat_id, state)
            if state.making
            else partial(_rebuild, services, chat_id, ids, state)
        )
        if not run_soon(services.scheduler, work, job_id=f"memory.rebuild:{chat_id}"):
            work()
        return state

    def stop(self, chat_id: int) -> Rebuild | None:
        state = self._by_chat.get(chat_id)
        if state is not None and state.running:
            state.stop.set()
        return state


def _rebuild(services: Services, chat_id: int, ids: list[int], state: Rebuild) -> None:
    try:
        with Session(services.engine) as session:
            # A rebuild takes the size the server's vectors have now: it is how the user moves the
            # chat to a model that changed behind its name (whose vectors syncs refuse meanwhile).
            embedder = embedder_for_chat(
                session, chat_id, services.keybox, sizes=services.recall.sizes, new_size=True
            )
            for start in range(0, len(ids), REBUILD_BATCH):
                if state.stop.is_set():
                    state.stopped = True
                    break
                services.foreground.wait_for_quiet()  # as the memory job's batches do
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


def _make(services: Services, chat_id: int, state: Rebuild) -> None:
    """Rebuild on a chat without memories: make them from its messages and embed them, with the
    rebuild's progress and Stop. It is the chat's sync, so it never runs beside another one."""
    try:
        services.recall.syncs.run(chat_id, partial(_make_now, services, chat_id, state), wait=True)
    except Exception:  # the viewer must show that it ended, not spin forever
        log.exception("making memories failed for chat %s", chat_id)
        state.error = (
            "Making the memories stopped because of an internal error; the server log has the details."
        )
    finally:
        state.finished_at = utcnow()


def _make_now(services: Services, chat_id: int, state: Rebuild) -> None:
    with Session(services.engine) as session:
        if session.get(Chat, chat_id) is None:
            return
        sync_chunks(session, chat_id)
        session.commit()
        # Added to, not set: ChatSyncs runs this again when a change came meanwhile.
        state.total = state.done + waiting_count(session, chat_id)
        embedder = embedder_for_chat(
            session, chat_id, services.keybox, sizes=services.recall.sizes, new_size=True
        )
        while not state.stop.is_set():
            services.foreground.wait_for_quiet()  # as the memory job's batches do
            done = embed_pending(session, chat_id, embedder, limit=REBUILD_BATCH)
            session.commit()
            if not done:
                break
            state.done += done
        state.stopped = state.stop.is_set() and state.done < state.total
        if not state.stopped and state.done < state.total:
            state.error = "the embedding model could not be reached; the memories without vectors say why."
