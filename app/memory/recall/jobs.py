"""Background work for Memory Recall. Jobs take the app's services and ids, open their own
session, and are idempotent: one that dies half-way is simply run again (after the next reply, by
the sweep at start, or by the periodic sweep)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TypeVar

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select, update

from app.chats.models import Chat
from app.chats.service import get_chat
from app.memory.recall.embedding import embedder_for_chat
from app.memory.recall.index import fill_postgres_index, on_postgres, prune_tombstones
from app.memory.recall.models import MemoryChunk
from app.memory.recall.rebuild_runs import (
    RebuildRun,
    latest_rebuild,
    new_rebuild,
    running_rebuild_chats,
    stop_requested,
)
from app.memory.recall.service import embed_chunks, embed_pending, list_chunk_ids, sync_chunks
from app.platform.jobs import Job, lower_this_threads_priority
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


# "Rebuild all" ---------------------------------------------------------------------------------------
#
# A rebuild is a row of rebuild_run (app/memory/recall/rebuild_runs.py) worked by the thread holding the
# chat's "rebuilds" claim in the database: one per chat across every server. Progress and the last memory
# embedded are written with each batch's vectors; Stop sets the row's stop_requested, read before each
# batch, on whichever server asked. A run left "running" with no live claim (a restart, a dead server) is
# resumed by `resume_cut_short` (a RunKind of the recall source) from its last memory.

INTERNAL_REBUILD = "The rebuild stopped because of an internal error; the server log has the details."
INTERNAL_MAKING = "Making the memories stopped because of an internal error; the server log has the details."
UNREACHABLE = "the embedding model could not be reached; the memories without vectors say why."


@dataclass(frozen=True)
class Rebuild:
    """A chat's newest rebuild as the viewer and the API show it, read from its row."""

    id: int
    status: str
    total: int
    done: int
    making: bool
    error: str | None
    stop_requested: bool
    finished_at: datetime | None

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def stopped(self) -> bool:
        return self.status == "stopped"

    @classmethod
    def of(cls, run: RebuildRun) -> Rebuild:
        assert run.id is not None
        return cls(
            run.id,
            run.status,
            run.total,
            run.done,
            run.making,
            run.error,
            run.stop_requested,
            run.finished_at,
        )


class Rebuilds:
    """The app's view of the rebuild runs (`services.recall.rebuilds`): one per chat across servers."""

    def __init__(self, engine: Engine | None = None) -> None:
        self.engine = engine  # None: an app runtime made without a database (a unit test); nothing to read

    def get(self, chat_id: int, session: Session | None = None) -> Rebuild | None:
        """The chat's newest rebuild, from whichever server runs or ran it. `session`: the caller's (a
        request's), so it never waits for a second connection of the pool while holding one."""
        if self.engine is None:
            return None
        if session is None:
            with Session(self.engine) as own:
                return self.get(chat_id, own)
        run = latest_rebuild(session, chat_id)
        return None if run is None else Rebuild.of(run)

    def start(self, services: Services, chat_id: int) -> Rebuild:
        """Embed every memory of the chat again with its current model, a batch at a time (or make them
        first, for a chat without any). Until a memory's turn comes it keeps its old vectors, so a
        stopped rebuild loses nothing. A rebuild of the chat running already, on this server or another,
        is returned as it is. Its row is committed on a session of its own before its thread starts: a
        request calls this before it uses its own session (holding that one's connection, it would
        wait for a second connection of the pool). NotFound for a chat that is not there."""
        with Session(services.engine) as session:
            get_chat(session, chat_id)
        claims = services.claims.rebuilds
        if not claims.claim(chat_id):
            with Session(services.engine) as session:
                run = latest_rebuild(session, chat_id)
                if run is not None:
                    return Rebuild.of(run)
            # The claim's holder has not written its row yet: report it as just started.
            return Rebuild(0, "running", 0, 0, False, None, False, None)
        with claims.holding(chat_id), Session(services.engine) as session:
            ids = list_chunk_ids(session, chat_id)
            run = new_rebuild(session, chat_id, total=len(ids), making=not ids)
            session.commit()
            session.refresh(run)
            started = Rebuild.of(run)
        # Without a scheduler (a test app) the work runs inside the request, as the jobs then do.
        inline = not services.settings.start_scheduler
        _launch(services, chat_id, started.id, inline=inline)
        return (self.get(chat_id) or started) if inline else started

    def stop(self, services: Services, chat_id: int) -> Rebuild | None:
        """Ask the chat's running rebuild to stop after the batch in hand, whichever server works it. One
        nobody works (cut short by a restart and not resumed yet) is closed as stopped at once. Committed
        on a session of its own: a request calls this before it uses its own. NotFound for a chat that
        is not there."""
        with Session(services.engine) as session:
            get_chat(session, chat_id)
            run = latest_rebuild(session, chat_id)
            if run is None or run.status != "running":
                return None if run is None else Rebuild.of(run)
            run.stop_requested, run.updated_at = True, utcnow()
            if not services.claims.rebuilds.held(chat_id):
                run.status, run.finished_at = "stopped", utcnow()
            session.add(run)
            session.commit()
            session.refresh(run)
            return Rebuild.of(run)


def _launch(services: Services, chat_id: int, run_id: int, *, inline: bool) -> None:
    """Work the run holding the chat's claim (taken by the caller), given back when the work ends."""
    # The claim's own mark: the work checks it before each write, and stops once another server took
    # the run over (this server judged dead meanwhile).
    token = services.claims.table.token(services.claims.rebuilds.kind, chat_id)
    if inline:
        try:
            _work(services, chat_id, run_id, token)
        finally:
            if token is not None:
                services.claims.table.give_back(services.claims.rebuilds.kind, chat_id, token)
        return

    def work() -> None:
        lower_this_threads_priority()  # background work only, on a thread of its own
        _work(services, chat_id, run_id, token)

    services.claims.rebuilds.start(chat_id, work, name=f"memory-rebuild-{chat_id}")


def resume_cut_short(services: Services) -> int:
    """Resume the rebuilds a restart (or a server that died) left "running" with no live claim, from the
    last memory each embedded; one whose Stop was asked meanwhile is closed as stopped. How many."""
    with Session(services.engine) as session:
        chats = running_rebuild_chats(session)
    settled = 0
    for chat_id in chats:
        claims = services.claims.rebuilds
        if not claims.claim(chat_id):
            continue  # worked now, here or on another server
        with claims.holding(chat_id), Session(services.engine) as session:
            run = latest_rebuild(session, chat_id)
            if run is None or run.status != "running":
                claims.release(chat_id)
                continue
            settled += 1
            if run.stop_requested:
                run.status, run.finished_at, run.updated_at = "stopped", utcnow(), utcnow()
                session.add(run)
                session.commit()
                claims.release(chat_id)
                continue
            run_id = run.id
        assert run_id is not None
        _launch(services, chat_id, run_id, inline=False)
    return settled


def _stopped(services: Services) -> bool:
    """The app this run belongs to has shut down (its scheduler stopped)."""
    return services.scheduler is not None and not services.scheduler.running


class _Lost(Exception):
    """This thread's claim of the chat is gone (another server took the run over): it writes nothing more."""


def _still_ours(services: Services, chat_id: int, token: str | None) -> None:
    if token is not None and not services.claims.table.holds(services.claims.rebuilds.kind, chat_id, token):
        raise _Lost


def _work(services: Services, chat_id: int, run_id: int, token: str | None) -> None:
    with Session(services.engine) as session:
        run = session.get(RebuildRun, run_id)
        making = run is not None and run.making
    try:
        if run is None:
            return
        if making:
            ended = services.recall.syncs.run(
                chat_id, partial(_make, services, chat_id, run_id, token), wait=True
            )
        else:
            ended = _rebuild(services, chat_id, run_id, token)
        if ended:
            _end(services, run_id, "done")
    except _Lost:
        log.warning("the memory rebuild of chat %s was taken over by another server", chat_id)
    except Exception:  # the viewer must show that it ended, not spin forever
        log.exception("memory rebuild failed for chat %s", chat_id)
        _end(services, run_id, "failed", INTERNAL_MAKING if making else INTERNAL_REBUILD)


def _end(services: Services, run_id: int, status: str, error: str | None = None) -> None:
    with Session(services.engine) as session:
        run = session.get(RebuildRun, run_id)
        if run is None or run.status != "running":
            return
        run.status, run.error, run.finished_at, run.updated_at = status, error, utcnow(), utcnow()
        session.add(run)
        session.commit()


def _rebuild(services: Services, chat_id: int, run_id: int, token: str | None) -> bool:
    """Embed the memories the run has not reached; True when it got to the end (False: it ended
    otherwise, or the app shut down and leaves it "running" for the next start)."""
    with Session(services.engine) as session:
        run = session.get(RebuildRun, run_id)
        if run is None:
            return False
        # Only what the run has not reached yet: a resumed run goes on after its last memory.
        ids = [
            i for i in list_chunk_ids(session, chat_id) if run.last_chunk_id is None or i > run.last_chunk_id
        ]
        run.total = max(run.total, run.done + len(ids))
        session.add(run)
        # A rebuild takes the size the server's vectors have now: it is how the user moves the chat to a
        # model that changed behind its name (whose vectors syncs refuse meanwhile).
        embedder = embedder_for_chat(
            session, chat_id, services.keybox, sizes=services.recall.sizes, new_size=True
        )
        session.commit()
        for start in range(0, len(ids), REBUILD_BATCH):
            if _stopped(services):
                return False  # the app shut down: the row stays "running" for the next start to resume
            _still_ours(services, chat_id, token)
            if stop_requested(session, run_id):
                _end(services, run_id, "stopped")
                return False
            services.foreground.wait_for_quiet()  # as the memory job's batches do
            batch = ids[start : start + REBUILD_BATCH]
            chunks = list(session.exec(select(MemoryChunk).where(col(MemoryChunk.id).in_(batch))))
            done, error = embed_chunks(session, chat_id, chunks, embedder)
            if error:
                session.commit()
                _end(services, run_id, "failed", error)
                return False
            _still_ours(services, chat_id, token)  # a run taken over keeps the new holder's progress
            # The batch's vectors and the run's mark in one transaction: a resume starts after them.
            run.done += done + (len(batch) - len(chunks))  # forgotten meanwhile
            run.last_chunk_id, run.updated_at = batch[-1], utcnow()
            session.add(run)
            session.commit()
    return True


def _make(services: Services, chat_id: int, run_id: int, token: str | None) -> bool:
    """Rebuild on a chat without memories: make them from its messages and embed them, with the
    rebuild's progress and Stop. It is the chat's sync, so it never runs beside another one here. True
    when every memory got its vectors, as `_rebuild`. Its progress is the chat's memories with vectors
    of all its memories, counted afresh: a resume (or a sync that ran between two lives) goes on from
    whatever is embedded, and what was embedded is never asked again (only waiting memories are)."""
    with Session(services.engine) as session:
        run = session.get(RebuildRun, run_id)
        if run is None or session.get(Chat, chat_id) is None:
            return False
        sync_chunks(session, chat_id)
        embedder = embedder_for_chat(
            session, chat_id, services.keybox, sizes=services.recall.sizes, new_size=True
        )
        while True:
            run.total, run.done, waiting = _made(session, chat_id)
            run.updated_at = utcnow()
            session.add(run)
            session.commit()
            if not waiting:
                break
            if _stopped(services):
                return False  # the row stays "running" for the next start to resume
            _still_ours(services, chat_id, token)
            if stop_requested(session, run_id):
                _end(services, run_id, "stopped")
                return False
            services.foreground.wait_for_quiet()  # as the memory job's batches do
            done = embed_pending(session, chat_id, embedder, limit=REBUILD_BATCH)
            _still_ours(services, chat_id, token)
            if not done:  # the source failed: the memories it did not reach say why
                session.commit()
                run.total, run.done, _ = _made(session, chat_id)
                session.add(run)
                session.commit()
                _end(services, run_id, "failed", UNREACHABLE)
                return False
        return True


def _made(session: Session, chat_id: int) -> tuple[int, int, int]:
    """(the chat's memories, those with vectors, those waiting for them)."""
    rows = session.exec(
        select(MemoryChunk.status, func.count())
        .where(MemoryChunk.chat_id == chat_id)
        .group_by(col(MemoryChunk.status))
    ).all()
    by_status = dict(rows)
    return sum(by_status.values()), by_status.get("vectorized", 0), by_status.get("waiting", 0)
