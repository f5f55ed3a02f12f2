"""Chat Summary's part of the prompt, read once per change of a chat's entries (issue 23).

Decisions:
- A chat's entries are read again only when their stamp changes: one aggregate over the chat's entries
  (count, newest updated_at, and sums of ids, bounds, flags, text lengths and edit times) that any write
  through service.py, generate.py, runs.py or an import changes, whichever server made it (issue 26).
  The edit times are summed, not only their newest taken: a server whose clock runs behind another's
  edits an entry at a time older than the newest, and a text of the same length would leave the rest
  of the stamp as it was. The stamp is read before the entries, so a write landing between the two is
  read again next turn. A turn then runs one statement that fetches one row, however many entries the
  chat has; the block is the cost of what is sent, not of reading it.
- What is held is plain values: the active entries' text in message order, whether any has a part for
  some characters only, and the covered ranges merged (active ones, and all), which select_messages reads
  exactly as it reads the entries (its coverage is the union of their ranges). The block as each speaker
  may read it is made once per speaker and stamp.
- One per app (Services), never a module global; the least recently used chats are let go past
  MAX_HELD_CHATS (read again when next used)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlmodel import Session

from app.memory.summaries.core.coverage import SummaryRange, merged_spans
from app.memory.summaries.core.prompts import has_conditions, visible_to
from app.memory.summaries.core.rules import EntryText, summary_block

MAX_HELD_CHATS = 256

# Changes with any insert, delete or edit of the chat's entries: an edit sets updated_at, and the sums
# move with a new id, a moved bound, a switched flag, a text of another length or a new edit time (in
# whole milliseconds since 1970, summed as integers: exact, where summing days as floats would round a
# chat's total). SQLite's total() and its 0/1 flags; PostgreSQL sums its booleans as integers (a stamp
# is only ever compared with another read from the same database).
_STAMP_SQL = {
    "sqlite": text(
        "SELECT count(*), max(updated_at), total(id), total(first_message_id), total(last_message_id),"
        " total(active), total(awaiting_review), total(length(title)), total(length(content)),"
        " sum(CAST(round((julianday(updated_at) - 2440587.5) * 86400000) AS INTEGER))"
        " FROM summary_entry WHERE chat_id = :chat_id"
    ),
    "postgresql": text(
        "SELECT count(*), max(updated_at), sum(id), sum(first_message_id), sum(last_message_id),"
        " sum(CAST(active AS integer)), sum(CAST(awaiting_review AS integer)), sum(length(title)),"
        " sum(length(content)), sum(CAST(round(extract(epoch FROM updated_at) * 1000) AS bigint))"
        " FROM summary_entry WHERE chat_id = :chat_id"
    ),
}
# Every entry's range, in message order; the text of the active ones only (the others are not sent).
_ENTRIES_SQL = text(
    "SELECT first_message_id, last_message_id, active AND NOT awaiting_review,"
    " CASE WHEN active AND NOT awaiting_review THEN title END,"
    " CASE WHEN active AND NOT awaiting_review THEN content END"
    " FROM summary_entry WHERE chat_id = :chat_id ORDER BY first_message_id, id"
)


@dataclass(frozen=True)
class SummaryPart:
    """What the prompt source sends for one speaker, and the ranges that say which messages it hides."""

    block: str
    count: int  # active entries (held for review ones are not)
    conditional: bool  # an active entry has a part meant for some characters only
    ranges: tuple[SummaryRange, ...]  # for select_messages: the active and the all-entries ranges, merged


@dataclass
class _Held:
    stamp: tuple
    texts: tuple[EntryText, ...]
    conditional: bool
    ranges: tuple[SummaryRange, ...]
    blocks: dict[str, str] = field(default_factory=dict)  # by speaker name


class SummaryBlocks:
    """Each chat's Chat Summary entries as the prompt reads them, read again only when they changed."""

    def __init__(self) -> None:
        self._chats: OrderedDict[int, _Held] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()

    def part(self, session: Session, chat_id: int, reader: str) -> SummaryPart | None:
        """The chat's active entries as `reader` may read them; None when it has none."""
        conn = session.connection()
        stamp = tuple(conn.execute(_STAMP_SQL[conn.dialect.name], {"chat_id": chat_id}).one())
        if not stamp[0]:
            return None  # no entries: the cheap answer for most Roleplay chats
        with self._lock:
            held = self._chats.get(chat_id)
            if held is not None and held.stamp == stamp:
                self._chats.move_to_end(chat_id)
        if held is None or held.stamp != stamp:
            held = _read(conn.execute(_ENTRIES_SQL, {"chat_id": chat_id}).all(), stamp)
            with self._lock:
                self._chats[chat_id] = held
                self._chats.move_to_end(chat_id)
                while len(self._chats) > MAX_HELD_CHATS:
                    self._chats.popitem(last=False)
        if not held.texts:
            return None
        block = held.blocks.get(reader)
        if block is None:
            texts = held.texts
            if held.conditional:
                texts = [EntryText(visible_to(t.title, reader), visible_to(t.content, reader)) for t in texts]
            block = held.blocks[reader] = summary_block(texts)
        return SummaryPart(block, len(held.texts), held.conditional, held.ranges)


def _read(rows, stamp: tuple) -> _Held:
    texts = tuple(EntryText(title, content) for _, _, sent, title, content in rows if sent)
    every = [SummaryRange(first, last) for first, last, _, _, _ in rows]
    upto = max((r.last_id for r in every), default=0)
    active = merged_spans([r for r, row in zip(every, rows, strict=True) if row[2]], upto=upto)
    spans = merged_spans(every, upto=upto)
    return _Held(
        stamp=stamp,
        texts=texts,
        conditional=any(has_conditions(t.title) or has_conditions(t.content) for t in texts),
        ranges=tuple(SummaryRange(a, b, True) for a, b in active)
        + tuple(SummaryRange(a, b, False) for a, b in spans),
    )
