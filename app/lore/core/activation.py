"""Which lorebook entries enter the prompt for one generation.

A pure function over plain data: `scan()` takes the chat's messages, the lorebooks and their
entries, the timed state stored with the chat, a seed, a token counter and the caller's macro
renderer, and returns the active entries, the entries skipped by a budget (with the reason), the
entries that matched but lost a roll, a group or their timing, and the new timed state to store.

The steps, in the order SillyTavern's World Info runs them (reference/sillytavern.md §2.5):
1. Pass 0 scans the newest messages (each entry's scan depth, else its book's). Candidates are
   constants, entries still sticky from an earlier turn, and entries whose keys match.
2. Each candidate then goes through delay and cooldown, inclusion groups, the probability roll,
   and the budgets: per lorebook Token Budget and Entry Limit, and the chat's Lorebook Token
   Budget on top. An entry that does not fit is skipped and the next ones are still tried.
3. When a book is Recursive, passes 1..Max Depth scan the text of the entries admitted by the
   previous pass whose own Recursion switch is on; what they find counts against the same budgets.

Matching is compiled once per lorebook version (`compile_book`, in `matching.py`) so a scan costs
a dictionary lookup per distinct word of the scanned text, not a regex per key. The data types
live in `entries.py`; they and the matching names are re-exported here, so callers import the
whole scan API from this module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.lore.core.entries import (
    DEFAULT_CHAT_TOKEN_BUDGET,
    MAX_ENTRY_LIMIT,
    MAX_RECURSION_DEPTH,
    MAX_SCAN_DEPTH,
    MIN_ENTRY_LIMIT,
    MIN_RECURSION_DEPTH,
    POSITIONS,
    ROLES,
    SAME_TEXT,
    SELECTIVE_LOGICS,
    SKIP_BOOK,
    SKIP_BOTH,
    SKIP_CHAT,
    SKIP_LIMIT,
    ActiveEntry,
    KeyProblem,
    LoreBook,
    LoreEntry,
    RejectedEntry,
    ScanRequest,
    ScanResult,
    SkippedEntry,
    TimedState,
    clamp,
)
from app.lore.core.matching import (
    CompiledBook,
    Hit,
    RegexKeyError,
    Segment,
    compile_book,
    parse_regex_key,
    regex_key_problem,
    turn_off_unrunnable,
)
from app.lore.core.twins import same_text

__all__ = [
    "DEFAULT_CHAT_TOKEN_BUDGET",
    "MAX_ENTRY_LIMIT",
    "MAX_RECURSION_DEPTH",
    "MAX_SCAN_DEPTH",
    "MIN_ENTRY_LIMIT",
    "MIN_RECURSION_DEPTH",
    "POSITIONS",
    "ROLES",
    "SAME_TEXT",
    "SELECTIVE_LOGICS",
    "SKIP_BOOK",
    "SKIP_BOTH",
    "SKIP_CHAT",
    "SKIP_LIMIT",
    "ActiveEntry",
    "CompiledBook",
    "KeyProblem",
    "LoreBook",
    "LoreEntry",
    "RegexKeyError",
    "RejectedEntry",
    "ScanRequest",
    "ScanResult",
    "SkippedEntry",
    "TimedState",
    "compile_book",
    "parse_regex_key",
    "regex_key_problem",
    "scan",
    "scan_text",
    "turn_off_unrunnable",
]


def _unit(seed: int, *parts: object) -> float:
    """A number in [0, 1) fixed by the seed and the parts: each entry gets its own roll, so adding
    or editing one entry does not change the others' rolls under the same seed."""
    digest = hashlib.blake2b(repr((seed, *parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass
class _Candidate:
    book: int  # index into the scan's books
    slot: int
    tier: int  # 0 constant, 1 sticky, 2 key match in recent messages, 3 recursion find
    reason: str
    sticky: bool = False

    @property
    def key(self) -> tuple[int, int]:
        return (self.book, self.slot)


class _Scan:
    def __init__(self, request: ScanRequest, books: list[CompiledBook], count, render):
        self.request, self.books, self.count, self.render = request, books, count, render
        self.now = len(request.messages) if request.message_count is None else request.message_count
        # An effect that started at this message count or later was set by a generation that is
        # being redone (swipe, regenerate): forget it, as SillyTavern does when the chat did not advance.
        self.timed = {i: s for i, s in request.timed.items() if s.started_at < self.now}
        self.primary: dict[tuple[int, int], set[int]] = {}
        self.secondary: dict[tuple[int, int], set[int]] = {}
        self.decided: set[tuple[int, int]] = set()
        self.fired_groups: set[str] = set()
        self.fired: list[tuple[LoreEntry, str]] = []
        self.book_used = [0] * len(books)
        self.book_count = [0] * len(books)
        self.chat_used = 0
        self.recursion_texts: list[str] = []
        self.windows: dict[int, Segment] = {}
        self.sent: dict[str, ActiveEntry] = {}  # admitted text (see twins.same_text) -> its entry
        self.result = ScanResult([], [], [], {}, {}, 0, 0, [p for b in books for p in b.problems])

    # -- matching state

    def window(self, depth: int) -> Segment:
        messages = self.request.messages
        depth = min(depth, len(messages))
        if depth not in self.windows:
            newest_first = [messages[i] for i in range(len(messages) - 1, len(messages) - 1 - depth, -1)]
            # As SillyTavern's buffer: newest first, each message after \x01, so a regex key can
            # anchor on a message start (/\x01Alice:/).
            self.windows[depth] = Segment("\x01" + "\n\x01".join(newest_first) if newest_first else "")
        return self.windows[depth]

    def record(self, b: int, hits: list[Hit], touched: set[tuple[int, int]], *, recursion: bool) -> None:
        slots = self.books[b].slots
        for slot, key_index, is_secondary in hits:
            key = (b, slot)
            if key in self.decided or (recursion and slots[slot].entry.exclude_recursion):
                continue
            (self.secondary if is_secondary else self.primary).setdefault(key, set()).add(key_index)
            touched.add(key)

    def satisfied(self, key: tuple[int, int]) -> bool:
        if not self.primary.get(key):
            return False
        slot = self.books[key[0]].slots[key[1]]
        if not slot.secondary:
            return True
        found, logic = len(self.secondary.get(key, ())), slot.entry.selective_logic
        if logic == "and_all":
            return found == slot.secondary
        if logic == "not_any":
            return found == 0
        if logic == "not_all":
            return found < slot.secondary
        return found > 0

    def matched_keys(self, key: tuple[int, int]) -> tuple[str, ...]:
        entry = self.books[key[0]].slots[key[1]].entry
        keys = [entry.keys[i] for i in sorted(self.primary.get(key, ()))]
        if entry.selective_logic in ("and_any", "and_all"):
            keys += [entry.secondary_keys[i] for i in sorted(self.secondary.get(key, ()))]
        return tuple(keys)

    def waiting(self, key: tuple[int, int]) -> bool:
        entry = self.books[key[0]].slots[key[1]].entry
        return (
            key not in self.decided
            and not entry.exclude_recursion
            and (entry.constant or self.satisfied(key))
        )

    def score(self, key: tuple[int, int]) -> int:
        """SillyTavern's group score: primary matches, plus secondary ones under AND logic."""
        logic = self.books[key[0]].slots[key[1]].entry.selective_logic
        secondary = len(self.secondary.get(key, ())) if logic == "and_any" else 0
        if logic == "and_all" and self.satisfied(key):
            secondary = len(self.secondary.get(key, ()))
        return len(self.primary.get(key, ())) + secondary

    # -- timed effects

    def sticky(self, entry: LoreEntry) -> bool:
        state = self.timed.get(entry.id)
        return state is not None and self.now < state.sticky_until

    def cooling(self, entry: LoreEntry) -> bool:
        state = self.timed.get(entry.id)
        return state is not None and self.now < state.cooldown_until

    def new_timed(self) -> dict[int, TimedState]:
        out = {i: s for i, s in self.timed.items() if max(s.sticky_until, s.cooldown_until) > self.now}
        for entry, reason in self.fired:
            # Re-triggering a sticky entry does not extend it (SillyTavern's rule).
            if reason != "sticky" and (entry.sticky > 0 or entry.cooldown > 0) and entry.id not in out:
                sticky_until = self.now + max(entry.sticky, 0)
                out[entry.id] = TimedState(self.now, sticky_until, sticky_until + max(entry.cooldown, 0))
        return out

    # -- deciding

    def reject(self, c: _Candidate, reason: str, depth: int) -> None:
        book = self.books[c.book]
        entry = book.slots[c.slot].entry
        self.result.rejected.append(RejectedEntry(entry, book.book, self.matched_keys(c.key), reason, depth))
        self.decided.add(c.key)

    def settle(self, candidates: list[_Candidate], depth: int) -> None:
        """Timing, groups, probability and budgets for the candidates of one pass."""
        seen: set[tuple[int, int]] = set()
        alive: list[_Candidate] = []
        # Constants, then sticky entries, then key matches in recent messages, then recursion finds;
        # within each, by Order (lower first), then by book and by position in the book.
        rank = lambda c: (c.tier, self.books[c.book].slots[c.slot].entry.order, c.book, c.slot)  # noqa: E731
        for c in sorted(candidates, key=rank):
            if c.key in seen or c.key in self.decided:
                continue
            seen.add(c.key)
            entry = self.books[c.book].slots[c.slot].entry
            c.sticky = self.sticky(entry)
            if self.now < entry.delay:
                self.reject(c, "delay", depth)
            elif self.cooling(entry) and not c.sticky:
                self.reject(c, "cooldown", depth)
            else:
                alive.append(c)
        for c in self.groups(alive, depth):
            if self.loses_roll(c):
                self.reject(c, "probability", depth)
            else:
                self.admit(c, depth)

    def loses_roll(self, c: _Candidate) -> bool:
        # Sticky entries keep firing without a roll (SillyTavern); a failed roll is final for this
        # generation, so a recursion pass cannot retry it.
        entry = self.books[c.book].slots[c.slot].entry
        if not entry.use_probability or entry.probability >= 100 or c.sticky:
            return False
        return _unit(self.request.seed, "probability", entry.book_id, entry.id) * 100 >= entry.probability

    def groups(self, alive: list[_Candidate], depth: int) -> list[_Candidate]:
        """SillyTavern's inclusion groups: one entry per group per pass; sticky members keep their
        place; a group that already fired this generation takes no more; optional scoring keeps the
        best-matching members; then Prioritize Inclusion (highest order) or a weighted roll."""
        by_group: dict[str, list[_Candidate]] = {}
        for c in alive:
            for name in self.books[c.book].slots[c.slot].groups:
                by_group.setdefault(name, []).append(c)
        if not by_group:
            return alive
        losers: set[tuple[int, int]] = set()
        for name, group in by_group.items():
            members = [c for c in group if c.key not in losers]
            if name in self.fired_groups:
                losers.update(c.key for c in members)
                continue
            if any(c.sticky for c in members):
                losers.update(c.key for c in members if not c.sticky)
                continue
            slots = [self.books[c.book].slots[c.slot] for c in members]
            if any(s.scored for s in slots):
                scores = [self.score(c.key) for c in members]
                best = max(scores)
                losers.update(
                    c.key
                    for c, s, score in zip(members, slots, scores, strict=True)
                    if s.scored and score < best
                )
                members = [c for c in members if c.key not in losers]
            if len(members) <= 1:
                continue
            entries = [self.books[c.book].slots[c.slot].entry for c in members]
            prioritised = [(e.order, -i) for i, e in enumerate(entries) if e.group_override]
            if prioritised:
                winner = -max(prioritised)[1]
            else:
                weights = [max(e.group_weight, 0) for e in entries]
                roll = _unit(self.request.seed, "group", name, depth) * sum(weights)
                winner, total = 0, 0
                for i, weight in enumerate(weights):
                    total += weight
                    if roll < total:
                        winner = i
                        break
            losers.update(c.key for i, c in enumerate(members) if i != winner)
        for c in alive:
            if c.key in losers:
                self.reject(c, "group", depth)
        return [c for c in alive if c.key not in losers]

    def admit(self, c: _Candidate, depth: int) -> None:
        compiled = self.books[c.book]
        book, entry = compiled.book, compiled.slots[c.slot].entry
        self.decided.add(c.key)
        text = self.render(entry)
        if not text.strip():
            # Its macros ran (a {{setvar}} still sets), but an empty entry is not listed as active.
            self.fired.append((entry, c.reason))
            self.fired_groups.update(compiled.slots[c.slot].groups)
            self.result.rejected.append(RejectedEntry(entry, book, self.matched_keys(c.key), "empty", depth))
            return
        # The same text from two books (a card's book and its World Info twin) is sent once: by
        # the first entry admitted; the other neither fires nor counts against a budget.
        first = self.sent.get(same_text(text))
        if first is not None:
            self.result.rejected.append(
                RejectedEntry(entry, book, self.matched_keys(c.key), SAME_TEXT, depth, first)
            )
            return
        tokens = self.count(text)
        budget, chat_budget = max(book.token_budget, 0), max(self.request.chat_token_budget, 0)
        used = self.book_used[c.book]
        reason = None
        if self.book_count[c.book] >= clamp(book.entry_limit, MIN_ENTRY_LIMIT, MAX_ENTRY_LIMIT):
            reason = SKIP_LIMIT
        else:
            over_book = budget > 0 and used + tokens > budget
            over_chat = chat_budget > 0 and self.chat_used + tokens > chat_budget
            if over_book and over_chat:
                reason = SKIP_BOTH
            elif over_book or over_chat:
                reason = SKIP_BOOK if over_book else SKIP_CHAT
        matched = self.matched_keys(c.key)
        if reason:
            self.result.skipped.append(
                SkippedEntry(entry, book, matched, tokens, used, self.chat_used, reason, depth)
            )
            return
        self.book_used[c.book] += tokens
        self.book_count[c.book] += 1
        self.chat_used += tokens
        self.fired.append((entry, c.reason))
        self.fired_groups.update(compiled.slots[c.slot].groups)
        active = ActiveEntry(entry, book, matched, tokens, text, depth, c.reason)
        self.result.active.append(active)
        self.sent[same_text(text)] = active
        if entry.recursion:
            self.recursion_texts.append(text)

    # -- passes

    def first_pass(self) -> None:
        touched: set[tuple[int, int]] = set()
        candidates: list[_Candidate] = []
        for b, compiled in enumerate(self.books):
            for depth, matchers in compiled.windows:
                if depth > 0 and self.request.messages:
                    self.record(b, matchers.run(self.window(depth)), touched, recursion=False)
            for slot in compiled.constants:
                if not compiled.slots[slot].entry.delay_until_recursion:
                    candidates.append(_Candidate(b, slot, 0, "constant"))
            for entry_id, state in self.timed.items():
                slot = compiled.by_id.get(entry_id)
                if slot is not None and self.now < state.sticky_until:
                    candidates.append(_Candidate(b, slot, 1, "sticky"))
        for b, slot in touched:
            if not self.books[b].slots[slot].entry.delay_until_recursion and self.satisfied((b, slot)):
                candidates.append(_Candidate(b, slot, 2, "key"))
        self.settle(candidates, 0)

    def recursion_pass(self, depth: int) -> bool:
        """Pass `depth` over the recursive books; False when there is nothing left to do."""
        eligible = [b for b, c in enumerate(self.books) if _recursion_depth(c.book) >= depth]
        # Entries waiting for a recursion level that already match (or are constant) keep the
        # passes going even without new text, so a deeper level can still be reached.
        delayed = [(b, s) for b in eligible for s in self.books[b].delayed if self.waiting((b, s))]
        text = "\n".join(self.recursion_texts)
        self.recursion_texts = []
        if not eligible or (not text and not delayed):
            return False
        touched: set[tuple[int, int]] = set()
        if text:
            segment = Segment(text)
            for b in eligible:
                for _, matchers in self.books[b].windows:
                    self.record(b, matchers.run(segment), touched, recursion=True)
        candidates = []
        for key in touched.union(delayed):
            entry = self.books[key[0]].slots[key[1]].entry
            ready = entry.constant or self.satisfied(key)
            if entry.delay_until_recursion <= depth and not entry.exclude_recursion and ready:
                candidates.append(_Candidate(key[0], key[1], 3, "key"))
        self.settle(candidates, depth)
        return True

    def run(self) -> ScanResult:
        self.first_pass()
        passes = 1
        for depth in range(1, max((_recursion_depth(c.book) for c in self.books), default=0) + 1):
            if not self.recursion_pass(depth):
                break
            passes += 1
        for b, compiled in enumerate(self.books):
            for slot in compiled.delayed:
                if self.waiting((b, slot)):
                    self.reject(_Candidate(b, slot, 3, "key"), "waits for recursion", passes - 1)
        result = self.result
        result.timed = self.new_timed()
        result.book_used = {c.book.id: used for c, used in zip(self.books, self.book_used, strict=True)}
        result.chat_used = self.chat_used
        result.passes = passes
        return result


def _recursion_depth(book: LoreBook) -> int:
    """How many recursion passes may look at this book's entries (0 when it is not recursive)."""
    return clamp(book.max_depth, MIN_RECURSION_DEPTH, MAX_RECURSION_DEPTH) if book.recursive else 0


def _compiled_books(request: ScanRequest, compiled: Mapping[int, CompiledBook] | None) -> list[CompiledBook]:
    if compiled:
        cached = [compiled.get(book.id) for book in request.books]
        # The usual case: the caller passes the entries it compiled from, book after book. One
        # tuple comparison (identity first, element by element) confirms it.
        if all(c is not None and c.book == book for c, book in zip(cached, request.books, strict=True)):
            if tuple(request.entries) == tuple(e for c in cached for e in c.entries):  # type: ignore[union-attr]
                return cached  # type: ignore[return-value]
    by_book: dict[int, list[LoreEntry]] = {}
    for entry in request.entries:
        by_book.setdefault(entry.book_id, []).append(entry)
    out = []
    for book in request.books:
        entries = tuple(by_book.get(book.id, ()))
        cached = compiled.get(book.id) if compiled else None
        # Tuples compare element by element with an identity shortcut: cheap when the caller
        # passes the objects it compiled from, and still correct when it rebuilt them.
        if cached is None or cached.book != book or cached.entries != entries:
            cached = compile_book(book, entries)
        out.append(cached)
    return out


def scan(
    request: ScanRequest,
    *,
    count: Callable[[str], int],
    render: Callable[[LoreEntry], str],
    compiled: Mapping[int, CompiledBook] | None = None,
) -> ScanResult:
    """The lorebook entries for one generation. `render` (the caller's macro renderer) runs once
    on every entry that reaches the budget step, in admission order; `count` sizes its text.
    `compiled` maps book id -> `compile_book(book, its entries)`, cached by the caller."""
    return _Scan(request, _compiled_books(request, compiled), count, render).run()


def scan_text(
    text: str,
    books: Sequence[LoreBook],
    entries: Sequence[LoreEntry],
    *,
    count: Callable[[str], int],
    render: Callable[[LoreEntry], str] | None = None,
    seed: int = 0,
    chat_token_budget: int = DEFAULT_CHAT_TOKEN_BUDGET,
    compiled: Mapping[int, CompiledBook] | None = None,
) -> ScanResult:
    """The keyword test panel: scan `text` as if it were the chat's newest message, with no timed
    state and every delay already passed, so the answer is about the keys and the budgets."""
    past_delays = max((e.delay for e in entries), default=0) + 1
    request = ScanRequest(
        messages=(text,),
        books=books,
        entries=entries,
        chat_token_budget=chat_token_budget,
        message_count=past_delays,
        seed=seed,
    )
    return scan(request, count=count, render=render or (lambda e: e.content), compiled=compiled)
