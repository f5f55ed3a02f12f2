"""Lorebooks in the prompt: which books a chat uses, their scan for the next reply, and what the
scan leaves with the chat (timed effects, the last scan for Active Context). The entries' macros
write the chat's variables, which the prompt service keeps after a real reply."""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from sqlmodel import Session

from app.chats.models import Chat
from app.lore import service
from app.lore.core.activation import (
    ActiveEntry,
    CompiledBook,
    LoreBook,
    LoreEntry,
    ScanRequest,
    ScanResult,
    TimedState,
    compile_book,
    scan,
    scan_text,
)
from app.lore.report import inspector_note, snapshot
from app.platform.timeutil import utcnow
from app.prompt.core.builder import DepthNote, DynamicBlock
from app.prompt.core.macros import MacroContext, ToolView, expand_macros

# Constant entries stay in the stable, cached part of the prompt, placed by their position;
# entries found by keys change from turn to turn, so they go just above the newest turns.
CONSTANT_KINDS = {
    "before_char": ("lore_before_char", "Lore before the character"),
    "after_char": ("constant_lore", "Constant lore"),
    "before_examples": ("lore_before_examples", "Lore before the examples"),
    "after_examples": ("lore_after_examples", "Lore after the examples"),
}
POSITION_RANK = {
    p: i for i, p in enumerate(("before_char", "after_char", "before_examples", "after_examples"))
}

MAX_NAMED = 64  # books with {{char}} / {{user}} keys, compiled per speaker and persona, kept
# Entries held compiled, all books together (~3 KB each with their matchers: ~60 MB); past it the least
# recently used books are let go (compiled again when next used). The books a scan needs are always held.
MAX_HELD_ENTRIES = 20_000


class CompiledBooks:
    """The lorebooks' settings, entries and compiled matchers, read and compiled again only when a
    book's stamp changed: a big book costs its scan, not its loading. One per app; the stamps are read
    every turn, so a book another server changed is read again on the next (issue 26)."""

    def __init__(self) -> None:
        # book id -> (stamp, the book, its entries, compiled matchers, whether keys hold macros), least
        # recently used first
        self._books: OrderedDict[int, tuple[Hashable, LoreBook, list[LoreEntry], CompiledBook, bool]] = (
            OrderedDict()
        )
        # (book id, speaker, persona) -> the same, for books whose keys hold {{char}} / {{user}}
        self._named: dict[tuple[int, str, str], tuple[Hashable, list[LoreEntry], CompiledBook]] = {}
        self._lock = threading.Lock()

    def load(self, session: Session, versions: Sequence[tuple[int, Hashable]], *, char: str, user: str):
        """(books, entries, compiled matchers by book id) for these (lorebook id, stamp) pairs, the
        stamp being what `service.book_versions_for_chat` read (the book's version and creation time);
        a book whose keys hold macros is compiled once per speaker and persona name as well.

        What is read is held under the stamp read before it, never the one on the row read after:
        another server's edit committed between the reads is then read again next turn, where the
        row's newer version would hold the older entries for good."""
        with self._lock:
            stamps = dict(versions)
            stale = [book_id for book_id, stamp in versions if self._books.get(book_id, (None,))[0] != stamp]
            if stale:
                fresh: dict[int, list[LoreEntry]] = {book_id: [] for book_id in stale}
                for entry in service.entries_of(session, stale):
                    fresh[entry.lorebook_id].append(service.entry_data(entry))
                for book_id in stale:
                    self._books.pop(book_id, None)
                for row in service.books_by_id(session, stale):
                    data, book_entries = service.book_data(row), fresh[row.id]
                    self._books[row.id] = (
                        stamps[row.id],
                        data,
                        book_entries,
                        compile_book(data, book_entries),
                        any(_has_key_macros(e) for e in book_entries),
                    )
            books, entries, compiled = [], [], {}
            for book_id, _ in versions:
                if book_id not in self._books:
                    continue  # deleted since its version was read
                self._books.move_to_end(book_id)
                version, data, book_entries, book_compiled, key_macros = self._books[book_id]
                if key_macros:
                    book_entries, book_compiled = self._named_for(
                        book_id, version, data, book_entries, char=char, user=user
                    )
                books.append(data)
                entries.extend(book_entries)
                compiled[book_id] = book_compiled
            self._keep_within_budget({book_id for book_id, _ in versions})
            return books, entries, compiled

    def _keep_within_budget(self, in_use: set[int]) -> None:
        held = sum(len(held[2]) for held in self._books.values())
        for book_id in list(self._books):
            if held <= MAX_HELD_ENTRIES:
                break
            if book_id not in in_use:
                held -= len(self._books.pop(book_id)[2])
                for key in [k for k in self._named if k[0] == book_id]:
                    del self._named[key]

    def _named_for(
        self,
        book_id: int,
        version: Hashable,
        data: LoreBook,
        entries: list[LoreEntry],
        *,
        char: str,
        user: str,
    ):
        named = self._named.get((book_id, char, user))
        if named is None or named[0] != version:
            resolved = with_key_macros(entries, char=char, user=user)
            named = self._named[(book_id, char, user)] = (version, resolved, compile_book(data, resolved))
            while len(self._named) > MAX_NAMED:
                self._named.pop(next(iter(self._named)))
        return named[1], named[2]

    def held_books(self) -> list[int]:
        """Ids of the books held compiled now."""
        with self._lock:
            return sorted(self._books)


@dataclass
class LoreOutcome:
    fixed: list[DynamicBlock] = field(default_factory=list)
    dynamic: list[DynamicBlock] = field(default_factory=list)
    depth_notes: list[DepthNote] = field(default_factory=list)
    note: str = ""
    snapshot: dict = field(default_factory=dict)
    timed: dict = field(default_factory=dict)


def with_key_macros(entries: Sequence[LoreEntry], *, char: str, user: str) -> list[LoreEntry]:
    """Keys written with {{char}} or {{user}} (as character books often are) as they read for this
    speaker and persona, as SillyTavern matches them."""
    out = []
    for entry in entries:
        if _has_key_macros(entry):
            entry = dataclasses.replace(
                entry,
                keys=tuple(expand_macros(k, char=char, user=user) for k in entry.keys),
                secondary_keys=tuple(expand_macros(k, char=char, user=user) for k in entry.secondary_keys),
            )
        out.append(entry)
    return out


def _has_key_macros(entry: LoreEntry) -> bool:
    return any("{{" in k or "<" in k for k in (*entry.keys, *entry.secondary_keys))


def _renderer(
    pick_prefix: str, *, char: str, user: str, seed: int, variables: dict, tools: ToolView | None = None
) -> Callable[[LoreEntry], str]:
    """Entry text through the macros: {{pick}} stays put per chat and entry, {{random}} and dice
    follow the reply's seed, {{setvar}} writes into `variables`; {{if tool:…}} blocks and {…_tool}
    macros read the turn's tools."""

    def render(entry: LoreEntry) -> str:
        context = MacroContext(
            variables=variables,
            pick_seed=f"{pick_prefix}:{entry.id}",
            random_seed=seed ^ entry.id,
            tools=tools,
        )
        return expand_macros(entry.content, char=char, user=user, context=context).strip()

    return render


def lore_for_prompt(
    session: Session,
    chat: Chat,
    *,
    compiled_books: CompiledBooks,
    messages: Sequence[str],
    message_count: Callable[[], int],
    character_ids: Sequence[int],
    persona_id: int | None,
    char: str,
    user: str,
    seed: int,
    chat_budget: int,
    count: Callable[[str], int],
    variables: dict,
    tools: ToolView | None = None,
) -> LoreOutcome | None:
    """The scan for the next reply, as prompt blocks. None when the chat uses no lorebook.
    `variables` are the chat's macro variables, changed in place by the entries' macros.
    `message_count` counts the chat's messages (the clock of timed effects): asked only when a book
    is in use, so a chat without lorebooks pays one small query, whatever its length."""
    versions = service.book_versions_for_chat(session, chat.id, character_ids, persona_id)
    books, entries, compiled = compiled_books.load(session, versions, char=char, user=user)
    if not books:
        return None
    timed = {int(k): TimedState(**v) for k, v in (chat.lore_timed or {}).items() if isinstance(v, dict)}
    request = ScanRequest(
        messages=list(messages),
        books=books,
        entries=entries,
        chat_token_budget=chat_budget,
        timed=timed,
        message_count=message_count(),
        seed=seed,
    )
    result = scan(
        request,
        count=count,
        render=_renderer(
            f"{chat.id}:lore", char=char, user=user, seed=seed, variables=variables, tools=tools
        ),
        compiled=compiled,
    )
    outcome = _blocks(result)
    outcome.snapshot = snapshot(result, chat_budget=chat_budget, at=utcnow())
    outcome.note = inspector_note(outcome.snapshot)
    outcome.timed = {
        str(k): {
            "started_at": v.started_at,
            "sticky_until": v.sticky_until,
            "cooldown_until": v.cooldown_until,
        }
        for k, v in result.timed.items()
    }
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
        items = sorted(
            items, key=lambda a: (POSITION_RANK.get(a.entry.position, 9), a.entry.order, a.entry.id)
        )
        return "\n\n".join(a.text for a in items)

    for position, items in constant.items():
        kind, label = CONSTANT_KINDS.get(position, CONSTANT_KINDS["after_char"])
        outcome.fixed.append(DynamicBlock(kind, label, text(items)))
    if keyword:
        outcome.dynamic.append(DynamicBlock("keyword_lore", "Lorebook entries", text(keyword)))
    for (depth, role), items in sorted(at_depth.items()):
        outcome.depth_notes.append(DepthNote(text(items), depth, role, kind="lore_at_depth", label="Lore"))
    return outcome


def record_scan(session: Session, chat: Chat, outcome: LoreOutcome | None) -> None:
    """Keep what the scan for a real reply leaves: timed effects, and the scan itself for Active
    Context."""
    if outcome is None:
        if chat.lore_last_scan:
            chat.lore_last_scan = {}
    else:
        chat.lore_timed = outcome.timed
        chat.lore_last_scan = outcome.snapshot
    session.add(chat)


def keyword_test(
    session: Session,
    chat: Chat | None,
    book_ids: Sequence[int],
    text: str,
    *,
    char: str,
    user: str,
    chat_budget: int,
    count: Callable[[str], int],
) -> dict:
    """The keyword test panel: which entries of these books fire on a pasted text, which are
    skipped and why. Nothing is stored; variables set by macros are thrown away."""
    rows = [service.get_book(session, b) for b in book_ids]
    books = [service.book_data(r) for r in rows]
    entries = [service.entry_data(e) for e in service.entries_of(session, [r.id for r in rows])]
    variables = dict(chat.variables or {}) if chat else {}
    render = _renderer(
        f"{chat.id}:lore" if chat else "test", char=char, user=user, seed=0, variables=variables
    )
    result = scan_text(text, books, entries, count=count, render=render, chat_token_budget=chat_budget)
    return snapshot(result, chat_budget=chat_budget, at=utcnow())
