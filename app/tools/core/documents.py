"""read_document's pure rules: which pages a call reads, and where its text is cut."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_PAGES_PER_CALL = 50
MAX_CHARS_PER_CALL = 20_000

_RANGE = re.compile(r"^\s*(\d{1,6})\s*(?:[-–]\s*(\d{1,6})\s*)?$")


def page_span(spec: str | None, page_count: int) -> tuple[int, int]:
    """The first and last page (1-based, inclusive) a call reads. No range: from the first page, at
    most MAX_PAGES_PER_CALL. Raises ValueError with a sentence for the model."""
    if page_count < 1:
        raise ValueError("This PDF has no pages.")
    if spec is None or not spec.strip():
        return 1, min(page_count, MAX_PAGES_PER_CALL)
    match = _RANGE.match(spec)
    if not match:
        raise ValueError(f'Pages are one number ("3") or a range ("3-5"), not {spec!r}.')
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if first < 1 or last < first:
        raise ValueError(f"The page range {spec!r} is backwards or starts before page 1.")
    if first > page_count or last > page_count:
        raise ValueError(
            f"This PDF has {page_count} page{'s' if page_count != 1 else ''}; pages {first}-{last} are not all in it."
        )
    if last - first + 1 > MAX_PAGES_PER_CALL:
        raise ValueError(
            f"At most {MAX_PAGES_PER_CALL} pages per call: ask for pages {first}-{first + MAX_PAGES_PER_CALL - 1} first."
        )
    return first, last


@dataclass(frozen=True)
class Cut:
    text: str
    note: str | None  # what follows, when the text was cut ("… (cut at 20,000 characters; …)")


def cut_text(text: str, offset: int, limit: int = MAX_CHARS_PER_CALL) -> Cut:
    """`limit` characters of `text` from `offset`, with a note saying how to read on."""
    if offset < 0:
        raise ValueError("offset counts characters from the start: 0 or more.")
    if offset and offset >= len(text):
        raise ValueError(f"The text is {len(text):,} characters long; offset={offset} is past its end.")
    end = offset + limit
    if end >= len(text):
        return Cut(text[offset:], None)
    return Cut(
        text[offset:end],
        f"… (cut at {end:,} characters; call again with offset={end})",
    )
