"""Memory Recall chunks: a chat's messages grouped five at a time. Pure functions.

Decisions:
- A chunk is made after every five new messages, whatever the recent-message window and whether recall
  is on (Marinara's way): the memory viewer fills from a chat's first replies, and a user who turns
  recall on later finds the memories made. The prompt's recall leaves out the memories of messages
  still in the window (the prompt holds them already), before it picks candidates (service.py).
- The open end waits: fewer than five messages after the last chunk make no chunk yet (Marinara's
  chunks of 5), so a chunk never changes size as a chat grows; those messages are in the window anyway.
- Never from hidden or failed messages, discarded swipes (the caller passes each message's active
  text) or the pinned first message, which is always in the prompt.
- Each chunk keeps a fingerprint of its sources, so an edit, swipe, hide or delete of any of them shows
  the chunk as stale (then it and every later chunk are made again, in order).
- A message that becomes readable among chunked ones (shown to the AI again, a failed reply written after
  all) is in no chunk: `missed_messages` finds it, and the chunks from it on are made again. A gap of a
  whole chunk or more between chunks is a memory the user forgot: it stays forgotten.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

CHUNK_SIZE = 5


@dataclass(frozen=True)
class MessageText:
    id: int
    name: str
    content: str
    created_at: datetime


@dataclass(frozen=True)
class ChunkDraft:
    message_ids: tuple[int, ...]
    content: str  # "Name: text" blocks joined by blank lines
    first_message_at: datetime
    last_message_at: datetime
    fingerprint: str

    @property
    def message_count(self) -> int:
        return len(self.message_ids)


def fingerprint(messages: Iterable[MessageText]) -> str:
    digest = hashlib.sha256()
    for msg in messages:
        digest.update(f"{msg.id}\x1f{msg.name}\x1f{msg.content}\x1e".encode())
    return digest.hexdigest()[:32]


def chunk_text(messages: Sequence[MessageText]) -> str:
    return "\n\n".join(f"{m.name}: {m.content.strip()}" for m in messages)


def chunk_messages(messages: Sequence[MessageText], *, size: int = CHUNK_SIZE) -> list[ChunkDraft]:
    """Complete groups of `size` from `messages` (oldest first, already unchunked and eligible)."""
    drafts = []
    usable = [m for m in messages if m.content.strip()]
    for start in range(0, len(usable) - size + 1, size):
        group = usable[start : start + size]
        drafts.append(
            ChunkDraft(
                message_ids=tuple(m.id for m in group),
                content=chunk_text(group),
                first_message_at=group[0].created_at,
                last_message_at=group[-1].created_at,
                fingerprint=fingerprint(group),
            )
        )
    return drafts


@dataclass(frozen=True)
class StoredChunk:
    id: int
    message_ids: tuple[int, ...]
    fingerprint: str


def stale_chunks(stored: Sequence[StoredChunk], current: dict[int, MessageText]) -> list[int]:
    """Chunks whose sources changed: a message was deleted, hidden (absent from `current`), edited
    or swiped (its text differs). `current` maps message id to its active, visible text."""
    stale = []
    for chunk in stored:
        sources = [current.get(i) for i in chunk.message_ids]
        if any(s is None for s in sources) or fingerprint(sources) != chunk.fingerprint:  # type: ignore[arg-type]
            stale.append(chunk.id)
    return stale


def missed_messages(
    readable: Sequence[int], chunks: Sequence[Sequence[int]], *, size: int = CHUNK_SIZE
) -> list[int]:
    """The readable messages (ids, oldest first: visible, not empty, not the pinned one) that no chunk holds
    although chunks were made past them: inside a chunk's span (a chunk is `size` consecutive readable
    messages when it is made, so one inside it became readable later), or in a gap before or between
    chunks too small to have been a chunk of its own. A gap of `size` or more is a forgotten memory."""
    spans = sorted((min(c), max(c)) for c in chunks if c)
    if not spans:
        return []
    held = {i for c in chunks for i in c}
    loose = [i for i in readable if i not in held and i < spans[-1][1]]
    missed: list[int] = []
    gap: list[int] = []
    edges = iter(spans)
    span = next(edges)
    for i in loose:
        while i > span[1]:  # past this chunk: the gap before the next one starts
            if len(gap) < size:
                missed.extend(gap)
            gap = []
            span = next(edges)
        if i > span[0]:  # inside the chunk's span
            missed.append(i)
        else:
            gap.append(i)
    if len(gap) < size:
        missed.extend(gap)
    return sorted(missed)


def embedding_windows(messages: Sequence[MessageText], *, max_words: int) -> list[str]:
    """Texts to embed for one chunk so nothing is cut off unseen: small embedding models read only
    the first few hundred word pieces, so each message is embedded on its own, and a message longer
    than the model reads is split into overlapping windows. A chunk's score is then the best of its
    windows (the caller combines)."""
    windows = []
    overlap = max(1, max_words // 4)
    for msg in messages:
        words = (f"{msg.name}: " if msg.name else "").split() + msg.content.strip().split()
        if len(words) <= max_words:
            windows.append(" ".join(words))
            continue
        step = max_words - overlap
        for start in range(0, len(words), step):
            windows.append(" ".join(words[start : start + max_words]))
            if start + max_words >= len(words):
                break
    return windows
