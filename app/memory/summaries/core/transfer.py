"""Chat Summary entries in a chat file: Marinara's `summaryEntries` (ChatSummaryEntry) in the header's
chat_metadata, written and read back. Pure functions.

Decisions:
- `rangeStartIndex` / `rangeEndIndex` are 0-based positions of the file's message lines (the lines after
  the header, refresh marks included), both ends included, as Marinara counts its messages from 0. An
  entry's range is the first and the last line its message ids cover; an entry whose messages were all
  deleted covers no line and is not written.
- origin: Sugo's "user" is Marinara's "manual", "model" is "automated"; Marinara's "legacy" (the old
  compiled summary) reads as "manual". `sourceMode` is always "range": the numbers are what counts.
- An entry held for review is written `enabled: false` with `awaitingReview: true` (Sugo's own key,
  which Marinara ignores), and comes back held; why it is held, when the overlap check held it, goes
  with it as `reviewReason` (at most MAX_REASON characters are read back).
- Reading never fails the import: an entry that is not an object, has no text, or whose range does not
  fit the file's lines is left out with a note; past `limit` entries the rest are left out with one note.
- Conversation day/week summaries (`daySummaries`, `weekSummaries`) are other keys of the same
  chat_metadata, written and read by day_transfer.py.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

ENTRIES_KEY = "summaryEntries"
HIDE_KEY = "hideSummarisedMessages"
_ORIGIN_OUT = {"user": "manual", "model": "automated"}
_ORIGIN_IN = {"manual": "user", "legacy": "user", "automated": "model"}
MAX_REASON = 500


@dataclass(frozen=True)
class FileEntry:
    """An entry as a chat file carries it; `first_line`/`last_line` index the file's message lines."""

    title: str
    content: str
    first_line: int
    last_line: int
    active: bool = True
    awaiting_review: bool = False
    origin: str = "user"
    tokens: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    id: int | None = None
    review_reason: str = ""


def line_span(line_ids: Sequence[int], first_id: int, last_id: int) -> tuple[int, int] | None:
    """The 0-based lines of the messages whose ids lie in first_id..last_id; `line_ids` sorted."""
    lo, hi = bisect_left(line_ids, first_id), bisect_right(line_ids, last_id)
    return (lo, hi - 1) if hi > lo else None


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def write_entries(entries: Sequence[FileEntry]) -> list[dict[str, Any]]:
    """The entries in Marinara's ChatSummaryEntry shape, in message order."""
    out = []
    for e in entries:
        item: dict[str, Any] = {
            "id": str(e.id) if e.id is not None else None,
            "kind": "rolling",
            "origin": _ORIGIN_OUT.get(e.origin, "manual"),
            "title": e.title,
            "content": e.content,
            "enabled": e.active and not e.awaiting_review,
            "sourceMode": "range",
            "rangeStartIndex": e.first_line,
            "rangeEndIndex": e.last_line,
            "tokenEstimate": e.tokens,
            "createdAt": _iso(e.created_at),
            "updatedAt": _iso(e.updated_at),
        }
        if e.awaiting_review:
            item["awaitingReview"] = True
            if e.review_reason:
                item["reviewReason"] = e.review_reason
        out.append(item)
    return out


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read_one(raw: Any, n: int, line_count: int, max_title: int, max_content: int) -> FileEntry | str:
    """The entry, or why it was left out (a sentence naming it by its place in the file)."""
    where = f"Summary entry {n}"
    if not isinstance(raw, Mapping):
        return f"{where} in the file is not an entry and was left out."
    content = raw.get("content")
    if not isinstance(content, str) or not content.strip():
        return f"{where} in the file has no text and was left out."
    if len(content.strip()) > max_content:
        return f"{where} in the file is longer than {max_content:,} characters and was left out."
    first, last = _index(raw.get("rangeStartIndex")), _index(raw.get("rangeEndIndex"))
    if first is None or last is None:
        return f"{where} in the file does not say which messages it covers and was left out."
    if not 0 <= first <= last < line_count:
        return (
            f"{where} in the file covers messages {first + 1}–{last + 1}, which do not fit the "
            f"{line_count} messages imported; it was left out."
        )
    title = raw.get("title")
    title = title.strip()[:max_title] if isinstance(title, str) else ""
    enabled = raw.get("enabled", True)
    review = raw.get("awaitingReview") is True
    reason = raw.get("reviewReason")
    return FileEntry(
        title=title,
        content=content.strip(),
        first_line=first,
        last_line=last,
        active=enabled is not False and not review,
        awaiting_review=review,
        origin=_ORIGIN_IN.get(raw.get("origin"), "user"),
        created_at=_time(raw.get("createdAt")),
        updated_at=_time(raw.get("updatedAt")),
        review_reason=reason.strip()[:MAX_REASON] if review and isinstance(reason, str) else "",
    )


def read_entries(
    meta: Mapping[str, Any], *, line_count: int, limit: int, max_title: int, max_content: int
) -> tuple[list[FileEntry], list[str]]:
    """The usable entries of a file's chat_metadata, and notes on those left out. Never raises."""
    raw = meta.get(ENTRIES_KEY)
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], ["The file's summary entries are not a list and were left out."]
    entries: list[FileEntry] = []
    notes: list[str] = []
    for n, item in enumerate(raw, start=1):
        if len(entries) == limit:
            notes.append(
                f"Only {limit:,} summary entries fit a chat; the file's other {len(raw) - n + 1:,} were left out."
            )
            break
        read = _read_one(item, n, line_count, max_title, max_content)
        (notes if isinstance(read, str) else entries).append(read)  # type: ignore[arg-type]
    return entries, notes


def read_hide(meta: Mapping[str, Any]) -> bool | None:
    """Marinara's "Hide summarised messages" switch, when the file has a usable one."""
    value = meta.get(HIDE_KEY)
    return value if isinstance(value, bool) else None
