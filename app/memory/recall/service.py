"""Memory Recall: keep a chat's chunks in step with its messages, embed them, search them."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlmodel import Session, col, delete, select

from app.chats import service as chats
from app.chats.models import Message
from app.errors import NotFound, UserError
from app.memory.recall.chunking import (
    MessageText,
    StoredChunk,
    chunk_messages,
    embedding_windows,
    stale_chunks,
)
from app.memory.recall.embedders import Embedder, EmbeddingError, MiniLM
from app.memory.recall.formats import ChunkRecord, MemoryFileError, export_envelope, parse_import
from app.memory.recall.lexical import BM25, fuse
from app.memory.recall.models import MemoryChunk, MemoryVector
from app.memory.recall.recall import TOP_K, Candidate, memory_block, memory_budget, select_memories
from app.memory.recall.vectors import chunk_similarities, store_vectors, unpack
from app.timeutil import as_utc, utcnow

log = logging.getLogger(__name__)
WINDOW_WORDS = 96


def _texts(session: Session, chat_id: int, ids: list[int] | None = None, *, before: int | None = None) -> list[MessageText]:
    """Messages the AI could read (visible, not failed), with their active text."""
    stmt = select(Message.id, Message.name, Message.content, Message.created_at).where(
        Message.chat_id == chat_id, Message.kind == "message", Message.hidden == False,  # noqa: E712
        Message.status != "error", Message.status != "streaming",
    )  # fmt: skip
    if ids is not None:
        stmt = stmt.where(col(Message.id).in_(ids))
    if before is not None:
        stmt = stmt.where(col(Message.id) < before)
    return [MessageText(*row) for row in session.exec(stmt.order_by(Message.id))]


def live_window_start(session: Session, chat_id: int) -> int | None:
    """Id of the oldest message in the prompt's live window (past the pinned first message):
    only messages before it may be chunked, so recall never repeats what the prompt holds."""
    from app.prompt.service import history_window  # the prompt service calls back into recall

    chat = chats.get_chat(session, chat_id)
    window = history_window(session, chat_id, before_id=None, limit=chats.chat_settings(chat).recent_message_limit)
    recent = window.messages[window.plan.pinned :]
    return recent[0].id if recent else None


def sync_chunks(session: Session, chat_id: int) -> tuple[int, int]:
    """Drop chunks whose messages changed (and every later one, to rebuild in order), then chunk
    the messages that have left the live window. Returns (added, removed). Idempotent."""
    own = list(session.exec(select(MemoryChunk).where(MemoryChunk.chat_id == chat_id,
                                                      MemoryChunk.source_chat_id == None)  # noqa: E711
                            .order_by(MemoryChunk.id)))  # fmt: skip
    referenced = sorted({i for c in own for i in c.message_ids})
    current = {m.id: m for m in _texts(session, chat_id, referenced)} if referenced else {}
    stale = set(stale_chunks([StoredChunk(c.id, tuple(c.message_ids), c.fingerprint) for c in own], current))
    removed = 0
    if stale:
        first_stale = min(min(c.message_ids) for c in own if c.id in stale)
        doomed = [c.id for c in own if max(c.message_ids) >= first_stale]
        session.exec(delete(MemoryChunk).where(col(MemoryChunk.id).in_(doomed)))  # type: ignore[call-overload]
        own = [c for c in own if c.id not in doomed]
        removed = len(doomed)
    cursor = max((max(c.message_ids) for c in own), default=0)
    start = live_window_start(session, chat_id)
    if start is None:
        return 0, removed
    eligible = [m for m in _texts(session, chat_id, before=start) if m.id > cursor]
    pinned = _texts(session, chat_id)[:1]
    eligible = [m for m in eligible if not pinned or m.id != pinned[0].id]
    added = 0
    for draft in chunk_messages(eligible):
        session.add(MemoryChunk(
            chat_id=chat_id, content=draft.content, message_ids=list(draft.message_ids),
            fingerprint=draft.fingerprint, message_count=draft.message_count,
            first_message_at=draft.first_message_at, last_message_at=draft.last_message_at,
        ))  # fmt: skip
        added += 1
    session.flush()
    return added, removed


def embed_pending(session: Session, chat_id: int, embedder: Embedder, *, limit: int = 50) -> int:
    """Give waiting chunks their vectors; a failing source marks them unavailable, with the reason."""
    waiting = list(session.exec(select(MemoryChunk).where(MemoryChunk.chat_id == chat_id,
                                                          MemoryChunk.status == "waiting").limit(limit)))  # fmt: skip
    done = 0
    for chunk in waiting:
        sources = _texts(session, chat_id, list(chunk.message_ids)) if chunk.message_ids else _blocks(chunk)
        # Windows shorter than the model could read: a fact in a long message then dominates its
        # window instead of being averaged away with the filler around it.
        windows = embedding_windows(sources, max_words=min(embedder.max_words, WINDOW_WORDS)) or [chunk.content]
        try:
            vectors = embedder.embed_passages(windows)
        except EmbeddingError as err:
            chunk.status, chunk.error = "unavailable", str(err)
            session.add(chunk)
            log.warning("embedding failed in chat %s: %s", chat_id, err)
            break
        session.exec(delete(MemoryVector).where(MemoryVector.chunk_id == chunk.id))  # type: ignore[call-overload]
        store_vectors(session, chunk.id, embedder.space.id, vectors)
        chunk.status, chunk.error, chunk.embedding_space_id = "vectorized", None, embedder.space.id
        session.add(chunk)
        done += 1
    session.flush()
    return done


def _blocks(chunk: MemoryChunk) -> list[MessageText]:
    """An imported chunk has no local messages: its "Name: text" blocks stand in for them."""
    return [MessageText(0, "", block, chunk.first_message_at) for block in chunk.content.split("\n\n") if block.strip()]


@dataclass(frozen=True)
class Hit:
    chunk: MemoryChunk
    score: float
    similarity: float | None
    lexical: float


def search(session: Session, chat_id: int, query: str, embedder: Embedder | None, *, k: int = 8) -> tuple[list[Hit], str | None]:
    """Chunks ranked by vector similarity fused with lexical matching; (hits, why vectors were not
    used) — a failing embedding source falls back to text matching and says so."""
    chunks = list(session.exec(select(MemoryChunk).where(MemoryChunk.chat_id == chat_id).order_by(MemoryChunk.first_message_at)))
    if not chunks or not query.strip():
        return [], None
    lexical = BM25([c.content for c in chunks]).scores(query)
    dense = None
    note = None
    sims: dict[int, float] = {}
    if embedder is None:
        note = "No embedding source: ranked by text matching only."
    else:
        try:
            sims = chunk_similarities(session, chat_id, embedder.space.id, embedder.embed_query(query))
            dense = [sims.get(c.id, 0.0) for c in chunks]
        except EmbeddingError as err:
            note = f"The embedding source failed ({err}); ranked by text matching only."
    scores = fuse(dense, lexical)
    hits = [Hit(c, s, sims.get(c.id), lx) for c, s, lx in zip(chunks, scores, lexical, strict=True)]
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:k], note


@dataclass(frozen=True)
class RecallResult:
    block: str  # the prompt block, "" when nothing was recalled
    recalled: list  # Recalled
    note: str  # for the prompt inspector


def recall_for_prompt(
    session: Session, chat_id: int, query: str, *, context_size: int, window_start_id: int | None,
    count: Callable[[str], int], embedder: Embedder | None,
) -> RecallResult:
    """Memories for the next reply: ranked chunks of this chat, past the live window, above the
    similarity threshold, within 15% of the context (clamped 384–1,536 tokens)."""
    if not query.strip():
        return RecallResult("", [], "Memory Recall: no message to search with yet.")
    fallback = None
    if isinstance(embedder, MiniLM) and not MiniLM.loaded():
        MiniLM.warm_up_in_background()
        fallback = "the built-in model is still loading, so text matching was used"
        embedder = None
    hits, note = search(session, chat_id, query, embedder, k=TOP_K * 2)
    hits = [h for h in hits if window_start_id is None or max(h.chunk.message_ids or [0]) < window_start_id]
    candidates = [Candidate(h.chunk.id, h.chunk.content, h.similarity if embedder else None, h.lexical,
                            _span(h.chunk)) for h in hits]  # fmt: skip
    threshold = embedder.threshold if embedder else 0.0
    recalled, why = select_memories(candidates, budget=memory_budget(context_size), threshold=threshold, count=count)
    how = fallback or (note[:-1].lower() if note else "")
    if recalled:
        sims = ", ".join(f"{r.similarity:.2f}" for r in recalled if r.similarity is not None)
        text = f"Memory Recall: recalled {len(recalled)} memor{'y' if len(recalled) == 1 else 'ies'}"
        text += f" (similarity {sims})" if sims else " (by text matching)"
    else:
        text = f"Memory Recall: nothing recalled — {why}"
    if how:
        text += f"; {how}"
    return RecallResult(memory_block(recalled), recalled, text + ".")


def _span(chunk: MemoryChunk) -> str:
    first, last = chunk.first_message_at, chunk.last_message_at
    if first.date() == last.date():
        return f"{first:%Y-%m-%d}, {chunk.message_count} messages"
    return f"{first:%Y-%m-%d} to {last:%Y-%m-%d}, {chunk.message_count} messages"


def list_chunks(session: Session, chat_id: int) -> list[MemoryChunk]:
    return list(session.exec(select(MemoryChunk).where(MemoryChunk.chat_id == chat_id)
                             .order_by(MemoryChunk.first_message_at, MemoryChunk.id)))  # fmt: skip


def forget_chunk(session: Session, chat_id: int, chunk_id: int) -> None:
    chunk = session.get(MemoryChunk, chunk_id)
    if chunk is None or chunk.chat_id != chat_id:
        raise NotFound(f"Memory {chunk_id} is not in chat {chat_id}.")
    session.delete(chunk)
    session.flush()


def clear_chunks(session: Session, chat_id: int) -> int:
    """Remove every memory of the chat (its messages stay)."""
    chunks = list_chunks(session, chat_id)
    for chunk in chunks:
        session.delete(chunk)
    session.flush()
    return len(chunks)


def mark_for_rebuild(session: Session, chat_id: int) -> int:
    """Every memory goes back to "waiting" and is embedded again (after a model change)."""
    chunks = list_chunks(session, chat_id)
    for chunk in chunks:
        chunk.status, chunk.error, chunk.embedding_space_id = "waiting", None, None
        session.add(chunk)
    ids = [c.id for c in chunks]
    if ids:
        session.exec(delete(MemoryVector).where(col(MemoryVector.chunk_id).in_(ids)))  # type: ignore[call-overload]
    session.flush()
    return len(chunks)


def export_file(session: Session, chat_id: int) -> tuple[str, bytes]:
    from app.chats.service import get_chat

    chat = get_chat(session, chat_id)
    records = []
    for chunk in list_chunks(session, chat_id):
        windows = [unpack(v.embedding) for v in session.exec(
            select(MemoryVector).where(MemoryVector.chunk_id == chunk.id).order_by(MemoryVector.window))]  # fmt: skip
        records.append(ChunkRecord(
            content=chunk.content, embedding=_mean(windows), space_id=chunk.embedding_space_id,
            message_count=chunk.message_count, first_message_at=as_utc(chunk.first_message_at),
            last_message_at=as_utc(chunk.last_message_at), created_at=as_utc(chunk.created_at), windows=windows or None,
        ))  # fmt: skip
    doc = export_envelope(chat_id=chat.id, name=chat.name, mode=chat.mode, chunks=records, now=utcnow())
    safe = "".join(ch for ch in chat.name if ch.isalnum() or ch in " -_").strip() or "chat"
    return f"{safe}-memory-recall.marinara.json", json.dumps(doc, ensure_ascii=False).encode()


def _mean(windows: list[list[float]]) -> list[float] | None:
    if not windows:
        return None
    dims = len(windows[0])
    mean = [sum(w[i] for w in windows) / len(windows) for i in range(dims)]
    norm = sum(x * x for x in mean) ** 0.5 or 1.0
    return [x / norm for x in mean]


def import_file(session: Session, chat_id: int, raw: bytes, *, current_space: str) -> dict:
    """Merge a memory file into the chat: duplicates (same first and last time and content) are
    skipped, vectors in a known space are kept, the others queued for embedding. One transaction."""
    try:
        source, records = parse_import(raw, now=utcnow())
    except MemoryFileError as err:
        raise UserError(str(err)) from err
    existing = {(as_utc(c.first_message_at).isoformat(), as_utc(c.last_message_at).isoformat(), c.content)
                for c in list_chunks(session, chat_id)}  # fmt: skip
    imported = skipped = queued = 0
    for rec in records:
        if rec.key in existing:
            skipped += 1
            continue
        existing.add(rec.key)
        chunk = MemoryChunk(chat_id=chat_id, content=rec.content, message_ids=[], message_count=rec.message_count,
                            first_message_at=rec.first_message_at, last_message_at=rec.last_message_at,
                            created_at=rec.created_at, source_chat_id=source)  # fmt: skip
        session.add(chunk)
        session.flush()
        vectors = rec.windows or ([rec.embedding] if rec.embedding else [])
        if rec.space_id == current_space and vectors:
            store_vectors(session, chunk.id, rec.space_id, vectors)
            chunk.status, chunk.embedding_space_id = "vectorized", rec.space_id
        else:
            queued += 1
        imported += 1
    session.flush()
    return {"imported": imported, "skipped": skipped, "queued": queued}
