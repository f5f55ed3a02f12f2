"""Chat Summary's pure decisions for entries the user writes: which messages a Write covers, the
numbers an entry covers now, and the stable text of the summary block (which messages the prompt
leaves out is coverage.py's). No I/O here."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.memory.summaries.core.coverage import SummaryRange

SCOPES = ("last", "range")
BLOCK_HEADING = "[Summary of earlier events, oldest first]"


@dataclass(frozen=True)
class Coverage:
    first_position: int  # message numbers as the chat shows them, 1 = the oldest message
    last_position: int
    first_id: int
    last_id: int

    @property
    def count(self) -> int:
        return self.last_position - self.first_position + 1


@dataclass(frozen=True)
class EntryText:
    title: str
    content: str


def scope_coverage(
    ids: Sequence[int],
    scope: str,
    *,
    last: int | None = None,
    start: int | None = None,
    end: int | None = None,
) -> Coverage:
    """The messages a summary covers: the `last` newest ones, or the numbers `start`–`end` (both
    counted from 1 as the chat shows them). `ids` are the chat's message ids, oldest first."""
    total = len(ids)
    if not total:
        raise ValueError("This chat has no messages to summarise yet.")
    if scope == "last":
        if last is None or last < 1:
            raise ValueError("Say how many of the newest messages the summary covers (1 or more).")
        start, end = max(1, total - last + 1), total
    elif scope == "range":
        if start is None or end is None:
            raise ValueError("Give the first and the last message number of the range.")
        if start < 1 or end < 1:
            raise ValueError("Message numbers start at 1.")
        if start > end:
            raise ValueError(
                f"The range {start}–{end} is backwards: the first number must not exceed the last."
            )
        if end > total:
            raise ValueError(f"This chat has {total} messages: message {end} does not exist.")
    else:
        raise ValueError("Scope must be Last or Range.")
    return Coverage(start, end, ids[start - 1], ids[end - 1])


def live_positions(ids: Sequence[int], span: SummaryRange) -> tuple[int, int] | None:
    """The message numbers the span covers now (after deletions shifted them), or None when every
    message it covered was deleted. `ids` sorted, oldest first."""
    lo = bisect_left(ids, span.first_id)
    hi = bisect_right(ids, span.last_id)
    return (lo + 1, hi) if hi > lo else None


def live_positions_upto(upto: Mapping[int, int], span: SummaryRange) -> tuple[int, int] | None:
    """live_positions from counts: `upto` gives, for the id just before the span and its last id, how
    many messages the chat has up to that id (a page reads counts, not the chat's every id)."""
    lo, hi = upto[span.first_id - 1], upto[span.last_id]
    return (lo + 1, hi) if hi > lo else None


def range_label(positions: tuple[int, int] | None) -> str:
    if positions is None:
        return "its messages were deleted"
    first, last = positions
    return f"message {first}" if first == last else f"messages {first}–{last}"


def summary_block(entries: Sequence[EntryText]) -> str:
    """The active entries as one block, in message order. Only their own words go in (no message
    numbers, which shift when messages are deleted), so the cached prefix changes only when an
    entry does."""
    parts = []
    for entry in entries:
        title, content = entry.title.strip(), entry.content.strip()
        if content:
            parts.append(f"## {title}\n{content}" if title else content)
    return f"{BLOCK_HEADING}\n\n" + "\n\n".join(parts) if parts else ""
