"""Chat Summary entries: list, write, edit, toggle and delete them; read what the prompt needs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlmodel import Session, select

from app.chats.service import get_chat
from app.memory.summaries.core import transfer
from app.memory.summaries.core.coverage import (
    DEFAULT_BATCH,
    ChatMessage,
    SummaryRange,
    merged_spans,
    summarised_on_page,
    uncovered_gaps,
)
from app.memory.summaries.core.rules import live_positions_upto, range_label, scope_coverage
from app.memory.summaries.models import SummaryEntry
from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import utcnow
from app.prompt.core.tokens import count_tokens

MAX_TITLE = 200
MAX_CONTENT = 20_000
MAX_ENTRIES = 1_000
# Named binds and SQL both databases read (a boolean compared with true/false: SQLite reads them as
# 1/0, on the same index), except the covered spans: a JSON list of [lo, hi] pairs each database
# unpacks its own way, kept side by side in _SPANS.
_IDS_SQL = text("SELECT id FROM message WHERE chat_id = :chat_id AND kind = 'message' ORDER BY id")
_ALL_IDS_SQL = text(
    "SELECT id FROM message WHERE chat_id = :chat_id ORDER BY id"
)  # refresh marks too: a file's lines
# The active entries over a page of the chat view, and the readable messages after it (on the
# (chat_id, kind, id, status, hidden) index): what the view's fold needs.
_OVER_SQL = text(
    "SELECT first_message_id, last_message_id FROM summary_entry WHERE chat_id = :chat_id AND active = true"
    " AND awaiting_review = false AND first_message_id <= :last_id AND last_message_id >= :first_id"
)
_COUNT_SQL = text("SELECT count(*) FROM message WHERE chat_id = :chat_id AND kind = 'message'")
# Messages up to each entry bound (an entry's first id minus one, its last id), counted span by span
# between consecutive bounds so the index is walked once however many entries there are.
_BOUND_COUNTS_SQL = text(
    "WITH bounds(id) AS (SELECT first_message_id - 1 FROM summary_entry WHERE chat_id = :chat_id"
    " UNION SELECT last_message_id FROM summary_entry WHERE chat_id = :chat_id),"
    " steps AS (SELECT id, lag(id, 1, -1) OVER (ORDER BY id) AS prev FROM bounds)"
    " SELECT id, (SELECT count(*) FROM message WHERE chat_id = :chat_id AND kind = 'message'"
    " AND id > steps.prev AND id <= steps.id) FROM steps ORDER BY id"
)
_READABLE = "chat_id = :chat_id AND kind = 'message' AND hidden = false"
_OLDER_THAN_TAIL_SQL = text(f"SELECT id FROM message WHERE {_READABLE} ORDER BY id DESC LIMIT 1 OFFSET :tail")
_READABLE_UPTO_SQL = text(f"SELECT count(*) FROM message WHERE {_READABLE} AND id <= :upto")
_SPANS = {
    "sqlite": "(SELECT json_extract(value, '$[0]') AS lo, json_extract(value, '$[1]') AS hi FROM json_each(:spans))",
    "postgresql": (
        "(SELECT CAST(value->>0 AS bigint) AS lo, CAST(value->>1 AS bigint) AS hi"
        " FROM json_array_elements(CAST(:spans AS json)))"
    ),
}
_READABLE_IN_SPANS_SQL = {
    dialect: text(
        f"SELECT lo, hi, (SELECT count(*) FROM message WHERE {_READABLE} AND id BETWEEN lo AND hi)"
        f" FROM {spans} AS spans ORDER BY lo"
    )
    for dialect, spans in _SPANS.items()
}
_FIRST_UNCOVERED_SQL = {
    dialect: text(
        f"SELECT min((SELECT min(id) FROM message WHERE {_READABLE} AND id BETWEEN lo AND hi))"
        f" FROM {spans} AS spans"
    )
    for dialect, spans in _SPANS.items()
}
_BATCH_SQL = text(
    "SELECT min(id), max(id), count(*) FROM (SELECT id FROM message WHERE"
    f" {_READABLE} AND id BETWEEN :start AND :end ORDER BY id LIMIT :batch) AS batch"
)
_POSITIONS_SQL = text(
    "SELECT (SELECT count(*) FROM message WHERE chat_id = :chat_id AND kind = 'message' AND id < :first_id),"
    " (SELECT count(*) FROM message WHERE chat_id = :chat_id AND kind = 'message' AND id <= :last_id)"
)
_READABLE_AFTER_SQL = text(f"SELECT count(*) FROM message WHERE {_READABLE} AND id > :after")
_ENTRY_COUNT_SQL = text("SELECT count(*) FROM summary_entry WHERE chat_id = :chat_id")
# "Summarise them" takes the oldest uncovered stretch, at most this many messages per summary (Marinara's
# summaryContextSize), so one request stays a size a model summarises well; the panel says what remains.
UNCOVERED_BATCH = DEFAULT_BATCH


@dataclass(frozen=True)
class EntryView:
    """An entry as the panel shows it: with the message numbers it covers now."""

    entry: SummaryEntry
    positions: tuple[int, int] | None

    @property
    def label(self) -> str:
        return range_label(self.positions)

    @property
    def count(self) -> int:
        return 0 if self.positions is None else self.positions[1] - self.positions[0] + 1


def message_ids(session: Session, chat_id: int) -> list[int]:
    """The chat's message ids, oldest first: message number n is the n-th (refresh marks aside)."""
    return [row[0] for row in session.connection().execute(_IDS_SQL, {"chat_id": chat_id}).all()]


def entry_count(session: Session, chat_id: int) -> int:
    """How many entries the chat has (held for review and switched off ones too)."""
    return session.connection().execute(_ENTRY_COUNT_SQL, {"chat_id": chat_id}).scalar_one()


def list_entries(session: Session, chat_id: int, *, active_only: bool = False) -> list[SummaryEntry]:
    """The chat's entries in message order."""
    stmt = select(SummaryEntry).where(SummaryEntry.chat_id == chat_id)
    if active_only:
        stmt = stmt.where(SummaryEntry.active == True, SummaryEntry.awaiting_review == False)  # noqa: E712
    return list(session.exec(stmt.order_by(SummaryEntry.first_message_id, SummaryEntry.id)).all())


@dataclass(frozen=True)
class Uncovered:
    """Readable messages older than the recent tail that no entry (active or not) covers, and the
    stretch the panel's "Summarise" button writes a summary for next."""

    count: int
    next_positions: tuple[int, int] | None  # message numbers of the oldest stretch, one batch at most
    next_count: int  # readable messages in it

    @property
    def remaining(self) -> int:
        return self.count - self.next_count


def uncovered(session: Session, chat_id: int, entries: Sequence[SummaryEntry], *, tail: int) -> Uncovered:
    """What no summary covers yet; an entry held for review counts as covering (it is a summary the
    user has not decided on, not a gap). uncovered_batches' first batch and count, read as ranges and
    indexed counts: the newest readable message older than the tail, the readable messages each covered
    span holds, the oldest uncovered one and its batch, never the chat's messages one by one."""
    conn = session.connection()
    dialect = conn.dialect.name
    cut = conn.execute(_OLDER_THAN_TAIL_SQL, {"chat_id": chat_id, "tail": tail}).scalar()
    if cut is None:
        return Uncovered(0, None, 0)
    spans = merged_spans([SummaryRange(e.first_message_id, e.last_message_id) for e in entries], upto=cut)
    older = conn.execute(_READABLE_UPTO_SQL, {"chat_id": chat_id, "upto": cut}).scalar_one()
    in_spans = _READABLE_IN_SPANS_SQL[dialect]
    inside = conn.execute(in_spans, {"chat_id": chat_id, "spans": json.dumps(spans)}).all() if spans else []
    count = older - sum(n for _, _, n in inside)
    if count <= 0:
        return Uncovered(0, None, 0)
    gaps = uncovered_gaps([(first, last) for first, last, n in inside if n], upto=cut)
    start = conn.execute(
        _FIRST_UNCOVERED_SQL[dialect], {"chat_id": chat_id, "spans": json.dumps(gaps)}
    ).scalar_one()
    if start is None:  # the counts said a message is uncovered and none is: changed between the reads
        return Uncovered(0, None, 0)
    end = next(last for first, last in gaps if first <= start <= last)
    batch = {"chat_id": chat_id, "start": start, "end": end, "batch": UNCOVERED_BATCH}
    first, last, readable = conn.execute(_BATCH_SQL, batch).one()
    before, through = conn.execute(
        _POSITIONS_SQL, {"chat_id": chat_id, "first_id": first, "last_id": last}
    ).one()
    return Uncovered(count, (before + 1, through), readable)


def summarised_ids(
    session: Session, chat_id: int, page: Sequence[ChatMessage], *, hide: bool, tail: int
) -> frozenset[int]:
    """Which of `page` (consecutive messages in chat order, refresh marks left out) the prompt leaves out
    because an active entry covers them and they are older than the recent tail (none when the chat does
    not hide summarised messages): the chat view folds them. Reads the entries over the page and one
    indexed count of the readable messages after it, never the whole chat."""
    if not hide or not page:
        return frozenset()
    rows = (
        session.connection()
        .execute(_OVER_SQL, {"chat_id": chat_id, "last_id": page[-1].id, "first_id": page[0].id})
        .all()
    )
    ranges = [SummaryRange(first, last) for first, last in rows]
    if not ranges:
        return frozenset()
    after = (
        session.connection()
        .execute(_READABLE_AFTER_SQL, {"chat_id": chat_id, "after": page[-1].id})
        .scalar_one()
    )
    return frozenset(summarised_on_page(page, ranges, readable_after=int(after), tail=tail))


def entry_views(session: Session, chat_id: int) -> list[EntryView]:
    """The entries with the message numbers they cover now, from one indexed count per span between the
    entries' bounds (a running sum gives the messages up to each bound)."""
    entries = list_entries(session, chat_id)
    upto = dict(_running(session.connection().execute(_BOUND_COUNTS_SQL, {"chat_id": chat_id})))
    return [
        EntryView(e, live_positions_upto(upto, SummaryRange(e.first_message_id, e.last_message_id)))
        for e in entries
    ]


def _running(rows) -> list[tuple[int, int]]:
    total, out = 0, []
    for bound, count in rows:
        total += count
        out.append((bound, total))
    return out


def message_count(session: Session, chat_id: int) -> int:
    """The chat's messages (refresh marks aside): the highest message number."""
    return session.connection().execute(_COUNT_SQL, {"chat_id": chat_id}).scalar_one()


def get_entry(session: Session, chat_id: int, entry_id: int) -> SummaryEntry:
    entry = session.get(SummaryEntry, entry_id)
    if entry is None or entry.chat_id != chat_id:
        raise NotFound(f"Summary entry {entry_id} does not exist in this chat.")
    return entry


def _title(title: str | None) -> str:
    title = (title or "").strip()
    if len(title) > MAX_TITLE:
        raise UserError(f"The title is {len(title)} characters long; the limit is {MAX_TITLE}.")
    return title


def _content(content: str | None) -> str:
    content = (content or "").strip()
    if not content:
        raise UserError("Write the summary first: it cannot be empty.")
    if len(content) > MAX_CONTENT:
        raise UserError(f"The summary is {len(content)} characters long; the limit is {MAX_CONTENT}.")
    return content


def write_entry(
    session: Session,
    chat_id: int,
    *,
    content: str,
    title: str = "",
    scope: str = "last",
    last: int | None = None,
    start: int | None = None,
    end: int | None = None,
    origin: str = "user",
) -> SummaryEntry:
    """A summary the user typed for the `last` newest messages or the message numbers start–end."""
    chat = get_chat(session, chat_id)
    if chat.mode != "roleplay":
        raise UserError(
            "Chat Summary entries are for Roleplay chats; Conversation chats are summarised by day."
        )
    title, content = _title(title), _content(content)
    try:
        covered = scope_coverage(message_ids(session, chat_id), scope, last=last, start=start, end=end)
    except ValueError as err:
        raise UserError(str(err)) from None
    count = entry_count(session, chat_id)
    if count >= MAX_ENTRIES:
        raise UserError(f"This chat already has {MAX_ENTRIES} summary entries, the limit: delete some first.")
    entry = SummaryEntry(
        chat_id=chat_id,
        title=title,
        content=content,
        first_message_id=covered.first_id,
        last_message_id=covered.last_id,
        first_position=covered.first_position,
        last_position=covered.last_position,
        tokens=count_tokens(content),
        origin=origin,
    )
    session.add(entry)
    session.flush()
    return entry


def update_entry(
    session: Session,
    chat_id: int,
    entry_id: int,
    *,
    title: str | None = None,
    content: str | None = None,
    active: bool | None = None,
) -> SummaryEntry:
    """Change an entry's title, text or active state (None leaves a field as it is)."""
    entry = get_entry(session, chat_id, entry_id)
    if title is not None:
        entry.title = _title(title)
    if content is not None:
        entry.content = _content(content)
        entry.tokens = count_tokens(entry.content)
        entry.review_reason = ""  # the text is the user's now: what held it is gone
    if active is not None:
        entry.active = active
    entry.updated_at = utcnow()
    session.add(entry)
    session.flush()
    return entry


def delete_entry(session: Session, chat_id: int, entry_id: int) -> None:
    session.delete(get_entry(session, chat_id, entry_id))
    session.flush()


def set_active(session: Session, chat_id: int, active: bool, ids: Sequence[int] | None = None) -> int:
    """Activate or deactivate all the chat's entries, or those in `ids`; how many changed."""
    get_chat(session, chat_id)
    changed = 0
    wanted = None if ids is None else set(ids)
    for entry in list_entries(session, chat_id):
        if (wanted is None or entry.id in wanted) and entry.active != active:
            entry.active = active
            entry.updated_at = utcnow()
            session.add(entry)
            changed += 1
    session.flush()
    return changed


def approve_entry(session: Session, chat_id: int, entry_id: int) -> SummaryEntry:
    """Accept a model-written entry held for review: it becomes active."""
    entry = get_entry(session, chat_id, entry_id)
    if not entry.awaiting_review:
        raise UserError("This summary is not waiting for review.")
    entry.awaiting_review, entry.active, entry.review_reason, entry.updated_at = False, True, "", utcnow()
    session.add(entry)
    session.flush()
    return entry


def set_review(session: Session, chat_id: int, review: bool) -> None:
    """The chat's Review outputs switch, leaving its other settings as they are."""
    chat = get_chat(session, chat_id)
    chat.settings = {**(chat.settings or {}), "summary_review": review}
    chat.updated_at = utcnow()
    session.add(chat)
    session.flush()


def _line_ids(session: Session, chat_id: int) -> list[int]:
    return [row[0] for row in session.connection().execute(_ALL_IDS_SQL, {"chat_id": chat_id}).all()]


def file_entries(session: Session, chat_id: int) -> list[dict[str, Any]]:
    """The chat's entries as an exported chat file carries them (transfer.py says how)."""
    lines = _line_ids(session, chat_id)
    out = []
    for e in list_entries(session, chat_id):
        span = transfer.line_span(lines, e.first_message_id, e.last_message_id)
        if span is not None:
            out.append(
                transfer.FileEntry(
                    title=e.title,
                    content=e.content,
                    first_line=span[0],
                    last_line=span[1],
                    active=e.active,
                    awaiting_review=e.awaiting_review,
                    origin=e.origin,
                    tokens=e.tokens,
                    created_at=e.created_at,
                    updated_at=e.updated_at,
                    id=e.id,
                    review_reason=e.review_reason,
                )
            )
    return transfer.write_entries(out)


def import_file_entries(
    session: Session, chat_id: int, meta: Mapping[str, Any], line_ids: Sequence[int]
) -> list[str]:
    """Add the entries an imported file's chat_metadata carries, their lines mapped to the new messages'
    ids; what was left out, as notes. A bad entry never fails the import."""
    entries, notes = transfer.read_entries(
        meta, line_count=len(line_ids), limit=MAX_ENTRIES, max_title=MAX_TITLE, max_content=MAX_CONTENT
    )
    positions = {mid: n for n, mid in enumerate(message_ids(session, chat_id), start=1)}
    for f in entries:
        first_id, last_id = line_ids[f.first_line], line_ids[f.last_line]
        inside = [positions[i] for i in line_ids[f.first_line : f.last_line + 1] if i in positions]
        now = utcnow()
        session.add(
            SummaryEntry(
                chat_id=chat_id,
                title=f.title,
                content=f.content,
                first_message_id=first_id,
                last_message_id=last_id,
                first_position=inside[0] if inside else 0,
                last_position=inside[-1] if inside else 0,
                tokens=count_tokens(f.content),
                active=f.active,
                awaiting_review=f.awaiting_review,
                origin=f.origin,
                review_reason=f.review_reason if f.awaiting_review else "",
                created_at=f.created_at or now,
                updated_at=f.updated_at or now,
            )
        )
    session.flush()
    return notes


def copy_to_branch(session: Session, source_id: int, branch_id: int) -> None:
    """Copy the entries that lie within the branch: the branch holds copies of the source's first
    messages, in order. An entry reaching past the branch point is left out, because its text tells of
    events the branch does not have; cutting it would keep them."""
    old, new = _line_ids(session, source_id), _line_ids(session, branch_id)
    mapped = dict(zip(old[: len(new)], new, strict=True))
    last_copied = old[len(new) - 1] if new else None
    for e in list_entries(session, source_id):
        if last_copied is None or e.last_message_id > last_copied:
            continue
        span = transfer.line_span(old, e.first_message_id, e.last_message_id)
        if span is None:  # its messages were all deleted: nothing in the branch to cover
            continue
        data = e.model_dump(exclude={"id", "chat_id", "first_message_id", "last_message_id"})
        session.add(
            SummaryEntry(
                **data,
                chat_id=branch_id,
                first_message_id=mapped[old[span[0]]],
                last_message_id=mapped[old[span[1]]],
            )
        )
    session.flush()
