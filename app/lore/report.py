"""What a lorebook scan did, said for people: the Active Context panel, the keyword test panel and
the prompt inspector. Pure functions over app.lore.core.activation's ScanResult."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from app.lore.core.activation import (
    SAME_TEXT,
    SKIP_BOOK,
    SKIP_BOTH,
    SKIP_CHAT,
    SKIP_LIMIT,
    LoreBook,
    RejectedEntry,
    ScanResult,
)
from app.platform.rendering import plural

POSITION_LABELS = {
    "before_char": "before the character",
    "after_char": "after the character",
    "before_examples": "before the examples",
    "after_examples": "after the examples",
    "at_depth": "at depth",
}
BUDGET_REASONS = (SKIP_BOOK, SKIP_CHAT, SKIP_BOTH)


KEYWORD_PLACE = "just above the newest turns"  # Peek Prompt's name for that place


def position_label(position: str, depth: int, role: str, *, constant: bool) -> str:
    """Where an entry's text goes, in the words Peek Prompt uses. Only constant entries are placed by
    their position (in the cached part of the prompt); an entry found by its keys changes from turn
    to turn, so it goes just above the newest turns whatever its position says (app/lore/prompting.py)."""
    if position == "at_depth":
        return f"at depth {depth} ({role})"
    if not constant:
        return KEYWORD_PLACE
    return POSITION_LABELS.get(position, position)


def snapshot(result: ScanResult, *, chat_budget: int, at: datetime) -> dict:
    """A JSON-able record of one scan, stored with the chat for Active Context."""

    def where(book: LoreBook) -> dict:
        return {"book_id": book.id, "book": book.name}

    return {
        "at": at.isoformat(),
        "chat_budget": chat_budget,
        "chat_used": result.chat_used,
        "passes": result.passes,
        "books": {
            str(b.id): {
                "name": b.name,
                "budget": b.token_budget,
                "entry_limit": b.entry_limit,
                "used": result.book_used.get(b.id, 0),
            }
            for b in {a.book.id: a.book for a in (*result.active, *result.skipped)}.values()
        },
        "active": [
            {
                **where(a.book),
                "entry_id": a.entry.id,
                "title": a.entry.title or _first_key(a.entry.keys),
                "matched_keys": list(a.matched_keys),
                "tokens": a.tokens,
                "reason": a.reason,
                "depth_found": a.found_at_depth,
                "position": position_label(
                    a.entry.position, a.entry.depth, a.entry.role, constant=a.reason == "constant"
                ),
            }
            for a in result.active
        ],
        "skipped": [
            {
                **where(s.book),
                "entry_id": s.entry.id,
                "title": s.entry.title or _first_key(s.entry.keys),
                "matched_keys": list(s.matched_keys),
                "tokens": s.tokens,
                "book_used": s.book_used,
                "chat_used": s.chat_used,
                "reason": s.reason,
                "book_budget": s.book.token_budget,
                "depth_found": s.found_at_depth,
            }
            for s in result.skipped
        ],
        "rejected": [
            {
                **where(r.book),
                "entry_id": r.entry.id,
                "title": r.entry.title or _first_key(r.entry.keys),
                "matched_keys": list(r.matched_keys),
                "reason": _rejected_reason(r),
                "same_as": r.same_as.entry.id if r.same_as else None,
            }
            for r in result.rejected
            if r.reason != "empty"
        ],
        "problems": [{"entry_id": p.entry_id, "key": p.key, "message": p.message} for p in result.problems],
    }


def _rejected_reason(r: RejectedEntry) -> str:
    if r.reason == SAME_TEXT and r.same_as is not None:
        first = r.same_as
        return f"same text as “{first.entry.title or _first_key(first.entry.keys)}” in {first.book.name}, sent once"
    return r.reason


def _first_key(keys) -> str:
    return keys[0] if keys else "(untitled)"


def skipped_notice(snap: Mapping) -> str | None:
    """ "N matching lore entries were skipped by token budget." with the limits that caused it and
    where to change them; None when nothing was skipped by a budget."""
    by_budget = [s for s in snap.get("skipped", []) if s["reason"] in BUDGET_REASONS]
    if not by_budget:
        return None
    n = len(by_budget)
    text = f"{n} matching lore entr{'y was' if n == 1 else 'ies were'} skipped by token budget."
    limits = []
    for book_id, book in snap.get("books", {}).items():
        if any(s["book_id"] == int(book_id) and s["reason"] in (SKIP_BOOK, SKIP_BOTH) for s in by_budget):
            limits.append(
                f"the Token Budget of “{book['name']}” ({book['budget']} tokens; Lorebooks → "
                f"{book['name']} → Overview)"
            )
    if any(s["reason"] in (SKIP_CHAT, SKIP_BOTH) for s in by_budget):
        limits.append(
            f"this chat's Lorebook Token Budget ({snap.get('chat_budget')} tokens; Chat Settings → Lorebooks)"
        )
    return text + " Limits reached: " + "; ".join(limits) + "."


def limit_notice(snap: Mapping) -> str | None:
    n = sum(1 for s in snap.get("skipped", []) if s["reason"] == SKIP_LIMIT)
    if not n:
        return None
    return (
        f"{n} matching lore entr{'y was' if n == 1 else 'ies were'} skipped by a lorebook's Entry Limit "
        "(Lorebooks → Overview)."
    )


def inspector_note(snap: Mapping) -> str:
    active, skipped = snap.get("active", []), snap.get("skipped", [])
    if not active and not skipped:
        return "Lorebooks: no entry fired."
    kinds = {}
    for a in active:
        kinds[a["reason"]] = kinds.get(a["reason"], 0) + 1
    # "constant" and "sticky" say how an entry came in; "key" is what found it, counted as keys.
    detail = ", ".join(
        plural(n, reason) if reason == "key" else f"{n} {reason}" for reason, n in sorted(kinds.items())
    )
    text = f"Lorebooks: {plural(len(active), 'entry', 'entries')} active ({detail}), {plural(snap.get('chat_used', 0), 'token')}"
    if skipped:
        text += f"; {len(skipped)} skipped (see Chat Settings → Active Context)"
    if once := sum(1 for r in snap.get("rejected", []) if r.get("same_as") is not None):
        text += f"; {once} left out (same text as an entry already sent)"
    return text + "."
