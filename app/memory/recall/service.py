"""Memory Recall: keep a chat's chunks in step with its messages, embed them, search them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlmodel import Session, col, delete, select

from app.chats import service as chats
from app.chats.models import Message
from app.memory.recall.chunking import (
    MessageText,
    StoredChunk,
    chunk_messages,
    embedding_windows,
    stale_chunks,
)
from app.memory.recall.embedders import Embedder, EmbeddingError, MiniLM
from app.memory.recall.lexical import BM25, fuse
from app.memory.recall.models import MemoryChunk, MemoryVector
from app.memory.recall.recall import TOP_K, Candidate, memory_block, memory_budget, select_memories
from app.memory.recall.vectors import chunk_similarities, store_vectors

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
        sources = _texts(session, chat_id, list(chunk.message_ids))
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
