"""Telling when lore comes twice: a lorebook whose entries are those of a book already stored (the
card's embedded book, then the same book as a World Info file), a name already taken, and one
entry text found in two books. Pure: plain data in, values out."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence

from app.lore.core.entries import LoreEntry

_NUMBERED = re.compile(r"^(?P<base>.*\S)\s+\((?P<n>\d+)\)$")


def same_text(text: str) -> str:
    """Entry text as compared for sameness: runs of whitespace are one space, ends trimmed."""
    return " ".join(text.split())


def _entry_print(entry: LoreEntry) -> list:
    # What the entry says and when it fires, not where it came from: ids, extras and switches each
    # format spells its own way (SillyTavern's group scoring "use the global setting"...) differ
    # between a card's book and the same book as a World Info file.
    at_depth = entry.position == "at_depth"
    return [
        entry.title.strip(),
        same_text(entry.content),
        [k.strip() for k in entry.keys],
        [k.strip() for k in entry.secondary_keys],
        entry.selective_logic,
        entry.constant,
        entry.position,
        entry.depth if at_depth else None,
        entry.role if at_depth else None,
        entry.order,
    ]


def book_fingerprint(entries: Sequence[LoreEntry]) -> str | None:
    """A digest of a book's entries, the same whatever order, ids or file format they came in;
    None for a book without entries (two empty books are not the same book)."""
    if not entries:
        return None
    prints = sorted(json.dumps(_entry_print(e), ensure_ascii=False) for e in entries)
    return hashlib.sha256("\n".join(prints).encode()).hexdigest()


def free_name(name: str, taken: Iterable[str], *, limit: int = 200) -> str:
    """`name` if no book has it (ignoring case and outer spaces), else the first free "Name (2)",
    "Name (3)"…; a name that already ends in a number is counted on from its base. The answer fits
    in `limit` characters (the base is shortened to make room for the number)."""
    name = name.strip()[:limit].strip()
    used = {t.strip().casefold() for t in taken}
    if name.casefold() not in used:
        return name
    match = _NUMBERED.match(name)
    base = match["base"] if match else name
    n = 2
    while True:
        suffix = f" ({n})"
        candidate = base[: limit - len(suffix)].rstrip() + suffix
        if candidate.casefold() not in used:
            return candidate
        n += 1
