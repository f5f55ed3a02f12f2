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

Matching is compiled once per lorebook version (`compile_book`) so a scan costs a dictionary
lookup per distinct word of the scanned text, not a regex per key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SELECTIVE_LOGICS = ("and_any", "and_all", "not_any", "not_all")
POSITIONS = ("before_char", "after_char", "before_examples", "after_examples", "at_depth")
ROLES = ("system", "user", "assistant")
MAX_SCAN_DEPTH = 1000  # SillyTavern's MAX_SCAN_DEPTH
MIN_RECURSION_DEPTH, MAX_RECURSION_DEPTH = 1, 10
MIN_ENTRY_LIMIT, MAX_ENTRY_LIMIT = 1, 1000
DEFAULT_CHAT_TOKEN_BUDGET = 8192

# Reasons, as the Active Context panel shows them.
SKIP_BOOK, SKIP_CHAT, SKIP_BOTH, SKIP_LIMIT = (
    "lorebook budget",
    "chat budget",
    "lorebook and chat budgets",
    "entry limit",
)


@dataclass(frozen=True)
class LoreBook:
    id: int
    name: str
    token_budget: int = 2048  # 0 = unlimited
    entry_limit: int = 100  # 1..1000 entries per generation
    recursive: bool = False
    max_depth: int = 3  # recursion passes after the first scan, 1..10
    scan_depth: int = 2  # newest messages scanned, for entries that say None
    case_sensitive: bool = False  # default for entries that say None
    match_whole_words: bool = True  # default for entries that say None
    use_group_scoring: bool = False  # default for entries that say None (SillyTavern's global setting)
    description: str = ""
    # Fields of the file this book came from that Sugo does not model, per format (see worldinfo.py).
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class LoreEntry:
    id: int
    book_id: int
    title: str = ""
    content: str = ""
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    selective_logic: str = "and_any"  # one of SELECTIVE_LOGICS
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    constant: bool = False
    enabled: bool = True
    order: int = 100  # lower is admitted first and placed higher in its position
    position: str = "before_char"  # one of POSITIONS
    depth: int = 4  # for at_depth
    role: str = "system"  # for at_depth
    probability: int = 100
    use_probability: bool = True
    scan_depth: int | None = None
    sticky: int = 0  # messages the entry stays active after it fired
    cooldown: int = 0  # messages it cannot fire after it fired (after sticky ends)
    delay: int = 0  # cannot fire until the chat has this many messages
    group: str = ""  # inclusion groups, comma-separated
    group_weight: int = 100
    group_override: bool = False  # "Prioritize Inclusion": the highest order wins the group
    recursion: bool = False  # may this entry's text activate other entries
    exclude_recursion: bool = False  # cannot be activated by another entry's text
    delay_until_recursion: int = 0  # >0: only activates on recursion pass >= this level
    selective: bool = True  # SillyTavern's legacy switch: secondary keys apply only when on
    use_group_scoring: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class TimedState:
    """Timed effects of one entry in one chat, in message-count units (the chat's message count
    when the generation ran, as `ScanRequest.message_count`)."""

    started_at: int  # the message count when the entry fired
    sticky_until: int  # stays active while the message count is below this
    cooldown_until: int  # once sticky is over, cannot fire while the message count is below this


@dataclass(frozen=True)
class ScanRequest:
    messages: Sequence[str]  # oldest first, the newest last; "Name: text" if names should match
    books: Sequence[LoreBook]
    entries: Sequence[LoreEntry]  # of any of the books; entries of other books are ignored
    chat_token_budget: int = DEFAULT_CHAT_TOKEN_BUDGET  # 0 = unlimited
    timed: Mapping[int, TimedState] = field(default_factory=dict)  # entry id -> state, as last returned
    message_count: int | None = None  # the chat's message count; None = len(messages)
    seed: int = 0  # one per generation: the same seed gives the same rolls


@dataclass(frozen=True)
class ActiveEntry:
    entry: LoreEntry
    book: LoreBook
    matched_keys: tuple[str, ...]
    tokens: int
    text: str  # rendered by the caller's macro renderer
    found_at_depth: int  # 0 = recent messages (or constant/sticky), 1.. = recursion pass
    reason: str  # "constant", "sticky" or "key"


@dataclass(frozen=True)
class SkippedEntry:
    """Activated but left out by a budget or the entry limit."""

    entry: LoreEntry
    book: LoreBook
    matched_keys: tuple[str, ...]
    tokens: int
    book_used: int  # tokens of this book already admitted when it was tried
    chat_used: int  # tokens of all books already admitted when it was tried
    reason: str  # SKIP_BOOK, SKIP_CHAT, SKIP_BOTH or SKIP_LIMIT
    found_at_depth: int


@dataclass(frozen=True)
class RejectedEntry:
    """Matched (or constant, or sticky) but did not fire, for the keyword test panel."""

    entry: LoreEntry
    book: LoreBook
    matched_keys: tuple[str, ...]
    # "delay", "cooldown", "group" (another entry won its inclusion group), "probability",
    # "waits for recursion" (delay until recursion and no pass reached its level), or "empty"
    # (it fired, its macros ran, but its text rendered empty, so it is not listed as active).
    reason: str
    found_at_depth: int


@dataclass(frozen=True)
class KeyProblem:
    entry_id: int
    key: str
    message: str


@dataclass
class ScanResult:
    active: list[ActiveEntry]  # in admission order: constants, sticky, key matches, recursion finds
    skipped: list[SkippedEntry]
    rejected: list[RejectedEntry]
    timed: dict[int, TimedState]  # store this with the chat for the next generation
    book_used: dict[int, int]  # book id -> tokens admitted
    chat_used: int
    passes: int  # 1 + recursion passes that ran
    problems: list[KeyProblem]  # keys written as /regex/ that do not compile (matched as plain text)


# ---------------------------------------------------------------------------------------------
# Matching

# Scripts written without spaces between words: a key containing them matches as a substring,
# and their characters count as word boundaries for keys in other scripts (Thai, Lao, Myanmar,
# Hangul jamo, Khmer, kana, Bopomofo, CJK ideographs, Hangul syllables, halfwidth kana, CJK ext B+).
# Korean writes spaces, but particles stick to nouns (드래곤이), so a substring is what users mean.
_NO_SPACE = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3100-\u312f\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_WORD_CHAR = rf"[^\W{_NO_SPACE}]"
_WORD = re.compile(_WORD_CHAR + "+")
_HAS_NO_SPACE = re.compile(f"[{_NO_SPACE}]")
_REGEX_KEY = re.compile(r"^/([\s\S]+?)/([gimsuyd]*)$")
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")

_Hit = tuple[int, int, bool]  # (slot, key index, secondary?)


def parse_regex_key(key: str) -> re.Pattern[str] | None:
    """A key written `/pattern/flags` as a compiled pattern, None for a plain key. Follows
    SillyTavern's parseRegexFromString: an unescaped slash inside makes it a plain key. JavaScript
    syntax that Python spells differently (named groups) is translated; `re.error` propagates."""
    m = _REGEX_KEY.match(key)
    if not m or _UNESCAPED_SLASH.search(m.group(1)):
        return None
    pattern, flags = m.group(1).replace("\\/", "/"), m.group(2)
    pattern = re.sub(r"\(\?<([A-Za-z_]\w*)>", r"(?P<\1>", pattern)
    pattern = re.sub(r"\\k<([A-Za-z_]\w*)>", r"(?P=\1)", pattern)
    bits = (re.IGNORECASE if "i" in flags else 0) | (re.MULTILINE if "m" in flags else 0)
    return re.compile(pattern, bits | (re.DOTALL if "s" in flags else 0))


class _Segment:
    """One scanned text (a window of messages or recursion text) with its lazily built views."""

    __slots__ = ("text", "_lower", "_folded", "_words", "_words_cs")

    def __init__(self, text: str):
        self.text = text
        self._lower: str | None = None
        self._folded: str | None = None
        self._words: set[str] | None = None
        self._words_cs: set[str] | None = None

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    @property
    def folded(self) -> str:
        if self._folded is None:
            self._folded = self.text.casefold()
        return self._folded

    @property
    def words(self) -> set[str]:
        if self._words is None:
            self._words = set(_WORD.findall(self.lower))
        return self._words

    @property
    def words_cs(self) -> set[str]:
        if self._words_cs is None:
            self._words_cs = set(_WORD.findall(self.text))
        return self._words_cs


@dataclass
class _Matchers:
    """The keys of the entries that scan the same number of messages, sorted by how they match."""

    words: dict[str, list[_Hit]] = field(default_factory=dict)  # whole single words, lowercased
    words_cs: dict[str, list[_Hit]] = field(default_factory=dict)
    phrases: dict[str, list[tuple[_Hit, str]]] = field(default_factory=dict)  # by their first word
    phrases_cs: dict[str, list[tuple[_Hit, str]]] = field(default_factory=dict)
    substrings: list[tuple[str, _Hit]] = field(default_factory=list)
    substrings_cs: list[tuple[str, _Hit]] = field(default_factory=list)
    # (pattern, a literal every match contains or None, hit): the literal is checked first with
    # `in`, because Python's re scans slowly under IGNORECASE (no fast literal search).
    regexes: list[tuple[re.Pattern[str], str | None, _Hit]] = field(default_factory=list)

    def add_regex(self, pattern: re.Pattern[str], hit: _Hit) -> None:
        literal = _required_literal(pattern.pattern)
        if literal is not None and pattern.flags & re.IGNORECASE:
            literal = literal.casefold()
        self.regexes.append((pattern, literal, hit))

    def add(self, key: str, hit: _Hit, *, case_sensitive: bool, whole_words: bool) -> None:
        needle = key if case_sensitive else key.lower()
        first = _WORD.search(needle)
        if not whole_words or first is None or _HAS_NO_SPACE.search(needle):
            (self.substrings_cs if case_sensitive else self.substrings).append((needle, hit))
        elif first.group() == needle:
            (self.words_cs if case_sensitive else self.words).setdefault(needle, []).append(hit)
        else:
            (self.phrases_cs if case_sensitive else self.phrases).setdefault(first.group(), []).append(
                (hit, needle)
            )

    def run(self, seg: _Segment) -> list[_Hit]:
        hits: list[_Hit] = []
        if self.words:
            _lookup_words(self.words, seg.words, hits)
        if self.words_cs:
            _lookup_words(self.words_cs, seg.words_cs, hits)
        if self.phrases:
            _lookup_phrases(self.phrases, seg.words, seg.lower, hits)
        if self.phrases_cs:
            _lookup_phrases(self.phrases_cs, seg.words_cs, seg.text, hits)
        if self.substrings:
            lower = seg.lower
            hits.extend(hit for needle, hit in self.substrings if needle in lower)
        hits.extend(hit for needle, hit in self.substrings_cs if needle in seg.text)
        for pattern, literal, hit in self.regexes:
            if literal is not None and literal not in (
                seg.folded if pattern.flags & re.IGNORECASE else seg.text
            ):
                continue
            if pattern.search(seg.text):
                hits.append(hit)
        return hits


def _required_literal(pattern: str) -> str | None:
    """The plain text a regex opens with (after \\b or ^), which every match must contain; None
    when there is none of 2+ characters or the pattern has a top-level alternative."""
    depth, escaped, in_class = 0, False, False
    for ch in pattern:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch in "()":
            depth += 1 if ch == "(" else -1
        elif ch == "|" and depth == 0:
            return None
    body = pattern
    while body.startswith(("\\b", "^")):
        body = body[1:] if body.startswith("^") else body[2:]
    run: list[str] = []
    for ch in body:
        if ch.isalnum() or ch in " _-'\"":
            run.append(ch)
            continue
        if ch in "?*{" and run:
            run.pop()  # the character before an optional quantifier may be absent
        break
    return "".join(run) if len(run) >= 2 else None


def _lookup_words(index: dict[str, list[_Hit]], words: set[str], hits: list[_Hit]) -> None:
    # Walk the smaller side: a chat window has a few hundred distinct words, a book thousands of keys.
    if len(words) <= len(index):
        for word in words:
            if found := index.get(word):
                hits.extend(found)
    else:
        for word, found in index.items():
            if word in words:
                hits.extend(found)


def _lookup_phrases(phrases, words: set[str], text: str, hits: list[_Hit]) -> None:
    for first, items in phrases.items():
        if first in words:
            hits.extend(hit for hit, needle in items if _whole_found(needle, text))


def _is_word_char(ch: str) -> bool:
    return (ch.isalnum() or ch == "_") and not _HAS_NO_SPACE.match(ch)


def _whole_found(needle: str, text: str) -> bool:
    """`needle` occurs in `text` with no word character just before or after it. (A regex per key
    would do the same, but compiling the Unicode word class costs ~6 ms per key.)"""
    start = text.find(needle)
    while start != -1:
        end = start + len(needle)
        if not (start and _is_word_char(text[start - 1])) and not (
            end < len(text) and _is_word_char(text[end])
        ):
            return True
        start = text.find(needle, start + 1)
    return False


@dataclass(frozen=True)
class _Slot:
    entry: LoreEntry
    groups: tuple[str, ...]
    secondary: int  # secondary keys in use (0 when not selective)
    scored: bool  # group scoring on for this entry


@dataclass(frozen=True, eq=False)
class CompiledBook:
    """A book's enabled entries with their keys compiled. Build it with `compile_book` and cache it
    per lorebook version; `scan` recompiles by itself when the book or its entries changed."""

    book: LoreBook
    entries: tuple[LoreEntry, ...]  # the book's entries as given, enabled or not: the cache check
    slots: tuple[_Slot, ...]
    by_id: Mapping[int, int]  # entry id -> slot
    constants: tuple[int, ...]
    delayed: tuple[int, ...]  # slots with delay_until_recursion
    windows: tuple[tuple[int, _Matchers], ...]  # (scan depth, matchers of the entries scanning that deep)
    problems: tuple[KeyProblem, ...]


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def compile_book(book: LoreBook, entries: Sequence[LoreEntry]) -> CompiledBook:
    """Compile the keys of `book`'s enabled entries (entries of other books are ignored)."""
    entries = tuple(e for e in entries if e.book_id == book.id)
    slots: list[_Slot] = []
    windows: dict[int, _Matchers] = {}
    problems: list[KeyProblem] = []
    for entry in entries:
        if not entry.enabled:
            continue
        index = len(slots)
        case_sensitive = book.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
        whole_words = book.match_whole_words if entry.match_whole_words is None else entry.match_whole_words
        depth = _clamp(book.scan_depth if entry.scan_depth is None else entry.scan_depth, 0, MAX_SCAN_DEPTH)
        matchers = windows.setdefault(depth, _Matchers())
        secondary = 0
        for is_secondary, keys in ((False, entry.keys), (True, entry.secondary_keys)):
            if is_secondary and not entry.selective:
                break
            for key_index, raw in enumerate(keys):
                key = raw.strip()
                if not key:
                    continue
                secondary += is_secondary
                hit = (index, key_index, is_secondary)
                try:
                    pattern = parse_regex_key(key)
                except re.error as err:
                    problems.append(
                        KeyProblem(entry.id, raw, f"not a valid regular expression ({err}); matched as text")
                    )
                    pattern = None
                if pattern is not None:
                    matchers.add_regex(pattern, hit)
                else:
                    matchers.add(key, hit, case_sensitive=case_sensitive, whole_words=whole_words)
        groups = tuple(dict.fromkeys(g.strip() for g in entry.group.split(",") if g.strip()))
        scored = book.use_group_scoring if entry.use_group_scoring is None else entry.use_group_scoring
        slots.append(_Slot(entry, groups, secondary, scored))
    return CompiledBook(
        book=book, entries=entries, slots=tuple(slots),
        by_id={slot.entry.id: i for i, slot in reversed(list(enumerate(slots)))},
        constants=tuple(i for i, s in enumerate(slots) if s.entry.constant),
        delayed=tuple(i for i, s in enumerate(slots) if s.entry.delay_until_recursion > 0),
        windows=tuple(sorted(windows.items())), problems=tuple(problems),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The scan


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
        self.windows: dict[int, _Segment] = {}
        self.result = ScanResult([], [], [], {}, {}, 0, 0, [p for b in books for p in b.problems])

    # -- matching state

    def window(self, depth: int) -> _Segment:
        messages = self.request.messages
        depth = min(depth, len(messages))
        if depth not in self.windows:
            newest_first = [messages[i] for i in range(len(messages) - 1, len(messages) - 1 - depth, -1)]
            # As SillyTavern's buffer: newest first, each message after \x01, so a regex key can
            # anchor on a message start (/\x01Alice:/).
            self.windows[depth] = _Segment("\x01" + "\n\x01".join(newest_first) if newest_first else "")
        return self.windows[depth]

    def record(self, b: int, hits: list[_Hit], touched: set[tuple[int, int]], *, recursion: bool) -> None:
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
        tokens = self.count(text)
        budget, chat_budget = max(book.token_budget, 0), max(self.request.chat_token_budget, 0)
        used = self.book_used[c.book]
        reason = None
        if self.book_count[c.book] >= _clamp(book.entry_limit, MIN_ENTRY_LIMIT, MAX_ENTRY_LIMIT):
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
        self.result.active.append(ActiveEntry(entry, book, matched, tokens, text, depth, c.reason))
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
            segment = _Segment(text)
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
    return _clamp(book.max_depth, MIN_RECURSION_DEPTH, MAX_RECURSION_DEPTH) if book.recursive else 0


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
    request = ScanRequest(messages=(text,), books=books, entries=entries, chat_token_budget=chat_token_budget,
                          message_count=past_delays, seed=seed)  # fmt: skip
    return scan(request, count=count, render=render or (lambda e: e.content), compiled=compiled)
