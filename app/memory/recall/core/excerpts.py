"""What the memory viewer's search shows of a memory: whether it is worth showing at all, and an
excerpt around the words the query matched. Pure functions.

Search ranks by relative scores, so the weakest query still has a "best" memory; the viewer shows
a memory only if it shares a word with the query or its meaning is clearly closer than unrelated
text gets (the embedder's `search_floor`, measured: see bench/search_floor.py). Prompt recall has
its own rule (recall.py) and is not changed by this one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.memory.recall.core.lexical import STOPWORDS, fold, stem, tokenize

EXCERPT_CHARS = 300
# Context kept before the first matched word, so it reads as part of a sentence.
LEAD_CHARS = 60
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Piece:
    text: str
    matched: bool  # a word of the query (after stemming), shown highlighted


@dataclass(frozen=True)
class Excerpt:
    pieces: tuple[Piece, ...]
    cut_before: bool  # text left out before the excerpt
    cut_after: bool

    @property
    def matched(self) -> bool:
        return any(p.matched for p in self.pieces)


def _stems(query: str) -> frozenset[str]:
    return frozenset(tokenize(query))


def _matches(text: str, stems: frozenset[str]) -> list[tuple[int, int]]:
    """Spans of the words of `text` that are words of the query, as the index reads words."""
    spans = []
    for m in _WORD.finditer(text):
        word = fold(m.group())
        if len(word) > 1 and word not in STOPWORDS and stem(word) in stems:
            spans.append(m.span())
    return spans


def _window(text: str, first: int, size: int) -> tuple[int, int]:
    """A window of about `size` characters starting a little before `first`, cut at spaces."""
    if len(text) <= size:
        return 0, len(text)
    start = max(0, min(first - LEAD_CHARS, len(text) - size))
    if start > 0:
        space = text.find(" ", start, first)
        start = space + 1 if space != -1 else start
    end = min(len(text), start + size)
    if end < len(text):
        space = text.rfind(" ", start + size // 2, end)
        end = space if space != -1 else end
    return start, end


def excerpt(text: str, query: str, *, size: int = EXCERPT_CHARS) -> Excerpt:
    """About `size` characters of `text` around the first word it shares with `query` (the start
    when none), split into pieces with the query's words marked."""
    spans = _matches(text, _stems(query))
    start, end = _window(text, spans[0][0] if spans else 0, size)
    pieces: list[Piece] = []
    at = start
    for s, e in spans:
        if s < start or e > end:
            continue
        if s > at:
            pieces.append(Piece(text[at:s], False))
        pieces.append(Piece(text[s:e], True))
        at = e
    if at < end:
        pieces.append(Piece(text[at:end], False))
    return Excerpt(tuple(pieces), start > 0, end < len(text))


def worth_showing(*, shares_word: bool, similarity: float | None, floor: float) -> bool:
    """A search hit the viewer shows: it shares a word with the query, or is at least `floor`
    similar in meaning (None: no vector to compare, so words alone decide)."""
    return shares_word or (similarity is not None and similarity >= floor)
