"""Lorebooks in the prompt: which books a chat uses, their scan for the next reply, and what the
scan leaves with the chat (timed effects, macro variables, the last scan for Active Context)."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlmodel import Session

from app.chats.models import Chat
from app.lore import service
from app.lore.activation import (
    ActiveEntry,
    CompiledBook,
    LoreEntry,
    ScanRequest,
    ScanResult,
    TimedState,
    compile_book,
    scan,
    scan_text,
)
from app.lore.report import inspector_note, snapshot
from app.prompt.builder import DepthNote, DynamicBlock
from app.prompt.macros import MacroContext, expand_macros
from app.timeutil import utcnow

# Constant entries stay in the stable, cached part of the prompt, placed by their position;
# entries found by keys change from turn to turn, so they go just above the newest turns.
CONSTANT_KINDS = {
    "before_char": ("lore_before_char", "Lore before the character"),
    "after_char": ("constant_lore", "Constant lore"),
    "before_examples": ("lore_before_examples", "Lore before the examples"),
    "after_examples": ("lore_after_examples", "Lore after the examples"),
}
POSITION_RANK = {p: i for i, p in enumerate(("before_char", "after_char", "before_examples", "after_examples"))}

# (database, book id) -> (version, entries, compiled matchers)
_cache: dict[tuple[str, int], tuple[int, list[LoreEntry], CompiledBook]] = {}
_cache_lock = threading.Lock()
# (database, book id, speaker, persona) -> the same, for books whose keys hold {{char}} / {{user}}
_named: dict[tuple[str, int, str, str], tuple[int, list[LoreEntry], CompiledBook]] = {}
MAX_NAMED = 64


@dataclass
class LoreOutcome:
    fixed: list[DynamicBlock] = field(default_factory=list)
    dynamic: list[DynamicBlock] = field(default_factory=list)
    depth_notes: list[DepthNote] = field(default_factory=list)
    note: str = ""
    snapshot: dict = field(default_factory=dict)
    timed: dict = field(default_factory=dict)


def generation_seed(chat_id: int, message_id: int | None, swipe_index: int) -> int:
    """One seed per reply version: the same swipe rolls the same, another swipe rolls anew."""
    digest = hashlib.sha256(f"{chat_id}:{message_id}:{swipe_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def with_key_macros(entries: Sequence[LoreEntry], *, char: str, user: str) -> list[LoreEntry]:
    """Keys written with {{char}} or {{user}} (as character books often are) as they read for this
    speaker and persona, as SillyTavern matches them."""
    out = []
    for entry in entries:
        if _has_key_macros(entry):
            entry = dataclasses.replace(
                entry, keys=tuple(expand_macros(k, char=char, user=user) for k in entry.keys),
                secondary_keys=tuple(expand_macros(k, char=char, user=user) for k in entry.secondary_keys),
            )  # fmt: skip
        out.append(entry)
    return out


def _has_key_macros(entry: LoreEntry) -> bool:
    return any("{{" in k or "<" in k for k in (*entry.keys, *entry.secondary_keys))


def _load(session: Session, chat: Chat, character_ids: Sequence[int], persona_id: int | None, *, char: str, user: str):
    """The chat's books with their entries and compiled matchers. Entries are read and compiled
    again only when a book's version changed: a big book costs its scan, not its loading. A book
    whose keys hold macros is compiled once per speaker and persona name as well."""
    rows = service.books_for_chat(session, chat.id, character_ids, persona_id)
    url = str(session.get_bind().url)
    with _cache_lock:
        stale = [row.id for row in rows if _cache.get((url, row.id), (None,))[0] != row.version]
        fresh: dict[int, list[LoreEntry]] = {row_id: [] for row_id in stale}
        for entry in service.entries_of(session, stale):
            fresh[entry.lorebook_id].append(service.entry_data(entry))
        books, entries, compiled = [], [], {}
        for row in rows:
            data = service.book_data(row)
            if row.id in fresh:
                _cache[(url, row.id)] = (row.version, fresh[row.id], compile_book(data, fresh[row.id]))
            _, book_entries, book_compiled = _cache[(url, row.id)]
            if any(_has_key_macros(e) for e in book_entries):
                named = _named.get((url, row.id, char, user))
                if named is None or named[0] != row.version:
                    resolved = with_key_macros(book_entries, char=char, user=user)
                    named = _named[(url, row.id, char, user)] = (row.version, resolved, compile_book(data, resolved))
                    while len(_named) > MAX_NAMED:
                        _named.pop(next(iter(_named)))
                _, book_entries, book_compiled = named
            books.append(data)
            entries.extend(book_entries)
            compiled[row.id] = book_compiled
    return books, entries, compiled


def message_count(session: Session, chat_id: int, before_id: int | None) -> int:
    """Messages of the chat before the reply: the clock of sticky, cooldown and delay."""
    sql = "SELECT count(*) FROM message WHERE chat_id = ? AND kind = 'message'"
    params: tuple = (chat_id,)
    if before_id is not None:
        sql, params = sql + " AND id < ?", (chat_id, before_id)
    return int(session.connection().exec_driver_sql(sql, params).scalar_one())


def _renderer(pick_prefix: str, *, char: str, user: str, seed: int, variables: dict) -> Callable[[LoreEntry], str]:
    """Entry text through the macros: {{pick}} stays put per chat and entry, {{random}} and dice
    follow the reply's seed, {{setvar}} writes into `variables`."""

    def render(entry: LoreEntry) -> str:
        context = MacroContext(variables=variables, pick_seed=f"{pick_prefix}:{entry.id}", random_seed=seed ^ entry.id)
        return expand_macros(entry.content, char=char, user=user, context=context).strip()

    return render


def lore_for_prompt(
    session: Session, chat: Chat, *, messages: Sequence[str], message_count: int, character_ids: Sequence[int],
    persona_id: int | None, char: str, user: str, seed: int, chat_budget: int, count: Callable[[str], int],
    variables: dict,
) -> LoreOutcome | None:
    """The scan for the next reply, as prompt blocks. None when the chat uses no lorebook.
    `variables` are the chat's macro variables, changed in place by the entries' macros."""
    books, entries, compiled = _load(session, chat, character_ids, persona_id, char=char, user=user)
    if not books:
        return None
    timed = {int(k): TimedState(**v) for k, v in (chat.lore_timed or {}).items() if isinstance(v, dict)}
    request = ScanRequest(messages=list(messages), books=books, entries=entries,
                          chat_token_budget=chat_budget, timed=timed, message_count=message_count, seed=seed)  # fmt: skip
    result = scan(request, count=count, render=_renderer(f"{chat.id}:lore", char=char, user=user, seed=seed, variables=variables),
                  compiled=compiled)  # fmt: skip
    outcome = _blocks(result)
    outcome.snapshot = snapshot(result, chat_budget=chat_budget, at=utcnow())
    outcome.note = inspector_note(outcome.snapshot)
    outcome.timed = {str(k): {"started_at": v.started_at, "sticky_until": v.sticky_until,
                              "cooldown_until": v.cooldown_until} for k, v in result.timed.items()}  # fmt: skip
    return outcome


def _blocks(result: ScanResult) -> LoreOutcome:
    outcome = LoreOutcome()
    constant: dict[str, list[ActiveEntry]] = {}
    keyword: list[ActiveEntry] = []
    at_depth: dict[tuple[int, str], list[ActiveEntry]] = {}
    for active in result.active:
        entry = active.entry
        if entry.position == "at_depth":
            at_depth.setdefault((entry.depth, entry.role), []).append(active)
        elif active.reason == "constant":
            constant.setdefault(entry.position, []).append(active)
        else:
            keyword.append(active)

    def text(items: list[ActiveEntry]) -> str:
        # Within one place, lower Order first (as SillyTavern and Marinara write them).
        items = sorted(items, key=lambda a: (POSITION_RANK.get(a.entry.position, 9), a.entry.order, a.entry.id))
        return "\n\n".join(a.text for a in items)

    for position, items in constant.items():
        kind, label = CONSTANT_KINDS.get(position, CONSTANT_KINDS["after_char"])
        outcome.fixed.append(DynamicBlock(kind, label, text(items)))
    if keyword:
        outcome.dynamic.append(DynamicBlock("keyword_lore", "Lorebook entries", text(keyword)))
    for (depth, role), items in sorted(at_depth.items()):
        outcome.depth_notes.append(DepthNote(text(items), depth, role, kind="lore_at_depth", label="Lore"))
    return outcome


def record_scan(session: Session, chat: Chat, outcome: LoreOutcome | None, variables: dict) -> None:
    """Keep what building the prompt for a reply leaves: macro variables, timed effects, and the
    scan itself for Active Context."""
    if variables != (chat.variables or {}):
        chat.variables = variables
    if outcome is None:
        if chat.lore_last_scan:
            chat.lore_last_scan = {}
    else:
        chat.lore_timed = outcome.timed
        chat.lore_last_scan = outcome.snapshot
    session.add(chat)


def keyword_test(session: Session, chat: Chat | None, book_ids: Sequence[int], text: str, *, char: str, user: str,
                 chat_budget: int, count: Callable[[str], int]) -> dict:  # fmt: skip
    """The keyword test panel: which entries of these books fire on a pasted text, which are
    skipped and why. Nothing is stored; variables set by macros are thrown away."""
    rows = [service.get_book(session, b) for b in book_ids]
    books = [service.book_data(r) for r in rows]
    entries = [service.entry_data(e) for e in service.entries_of(session, [r.id for r in rows])]
    variables = dict(chat.variables or {}) if chat else {}
    render = _renderer(f"{chat.id}:lore" if chat else "test", char=char, user=user, seed=0, variables=variables)
    result = scan_text(text, books, entries, count=count, render=render, chat_token_budget=chat_budget)
    return snapshot(result, chat_budget=chat_budget, at=utcnow())
