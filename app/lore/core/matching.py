"""Key matching for the lorebook scan: which entries' keys occur in a text.

Matching is compiled once per lorebook version (`compile_book`) so a scan costs a dictionary
lookup per distinct word of the scanned text, not a regex per key. Keys written `/pattern/flags`
run on RE2, whose time is linear in the text: a key comes from whoever wrote a shared book, and
a backtracking engine lets one pattern such as `/(a+)+$/` stall every request. The scan (`activation.py`)
builds one `Segment` per scanned text and runs each book's matchers on it; what a hit means
(secondary logic, timing, groups, budgets) is decided there, not here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import re2

from app.lore.core.entries import MAX_SCAN_DEPTH, KeyProblem, LoreBook, LoreEntry, clamp

__all__ = [
    "CompiledBook",
    "Hit",
    "RegexKey",
    "RegexKeyError",
    "Segment",
    "compile_book",
    "parse_regex_key",
    "regex_key_problem",
    "turn_off_unrunnable",
]

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

Hit = tuple[int, int, bool]  # (slot, key index, secondary?)


class RegexKeyError(ValueError):
    """A `/pattern/flags` key that cannot run: its message says why, in words for the user."""


@dataclass(frozen=True, eq=False)
class RegexKey:
    """A `/pattern/flags` key compiled for RE2. `source` is the pattern as written (for the
    prefilter); `ignore_case` tells which view of the text the prefilter looks in."""

    source: str
    ignore_case: bool
    compiled: Any  # re2's pattern object

    def search(self, text: str | bytes) -> bool:
        return self.compiled.search(text) is not None


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused key is reported to the user, not to stderr
# JavaScript spellings RE2 writes differently: \uXXXX and \u{X...} (an escaped backslash is
# matched first so `\\u0041` stays a backslash and "u0041"), and (?<name>...) groups.
_JS_ESCAPE = re.compile(r"(\\\\)|\\u\{([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})|\(\?<([A-Za-z_]\w*)>")


def _from_js(pattern: str) -> str:
    def swap(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(1)
        if m.group(4):
            return f"(?P<{m.group(4)}>"
        return "\\x{" + (m.group(2) or m.group(3)) + "}"

    return _JS_ESCAPE.sub(swap, pattern)


def _why_not(err: Exception) -> str:
    detail = err.args[0] if err.args else ""
    detail = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
    if "(?=" in detail or "(?!" in detail:
        return "it uses a lookahead ((?= or (?!), which Sugo's regex engine (RE2) does not run"
    if "(?<=" in detail or "(?<!" in detail:
        return "it uses a lookbehind ((?<= or (?<!), which Sugo's regex engine (RE2) does not run"
    if re.search(r"invalid escape sequence: \\([1-9]|k)", detail):
        return "it uses a backreference (\\1 or \\k<name>), which Sugo's regex engine (RE2) does not run"
    return f"it is not a regular expression Sugo can run ({detail})"


def parse_regex_key(key: str) -> RegexKey | None:
    """A key written `/pattern/flags` compiled for RE2, None for a plain key. Follows
    SillyTavern's parseRegexFromString: an unescaped slash inside makes it a plain key. JavaScript
    flags map to RE2's: i (case), m (^ and $ at lines), s (. matches a new line), y (sticky: a
    fresh regex matches at the start only); g, u and d change nothing for a yes/no search (RE2
    reads Unicode always). Raises `RegexKeyError` with the reason for a key RE2 cannot run
    (backreferences, lookaround, bad syntax)."""
    m = _REGEX_KEY.match(key)
    if not m or _UNESCAPED_SLASH.search(m.group(1)):
        return None
    source, flags = m.group(1).replace("\\/", "/"), m.group(2)
    pattern = _from_js(source)
    inline = "".join(f for f in "ims" if f in flags)
    if "y" in flags:
        pattern = rf"\A(?:{pattern})"
    if inline:
        pattern = f"(?{inline}){pattern}"
    try:
        compiled = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as err:
        raise RegexKeyError(_why_not(err)) from None
    return RegexKey(source, "i" in flags, compiled)


def regex_key_problem(key: str) -> str | None:
    """Why a key written `/pattern/flags` cannot run, or None (a plain key, or a regex that runs)."""
    try:
        parse_regex_key(key.strip())
    except RegexKeyError as err:
        return str(err)
    return None


class Segment:
    """One scanned text (a window of messages or recursion text) with its lazily built views."""

    __slots__ = ("text", "_lower", "_folded", "_words", "_words_cs", "_utf8")

    def __init__(self, text: str):
        self.text = text
        self._utf8: bytes | None = None
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
    def utf8(self) -> bytes:
        """The text as RE2 reads it, encoded once per scan rather than once per regex key."""
        if self._utf8 is None:
            self._utf8 = self.text.encode("utf-8", "replace")
        return self._utf8

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

    words: dict[str, list[Hit]] = field(default_factory=dict)  # whole single words, lowercased
    words_cs: dict[str, list[Hit]] = field(default_factory=dict)
    phrases: dict[str, list[tuple[Hit, str]]] = field(default_factory=dict)  # by their first word
    phrases_cs: dict[str, list[tuple[Hit, str]]] = field(default_factory=dict)
    substrings: list[tuple[str, Hit]] = field(default_factory=list)
    substrings_cs: list[tuple[str, Hit]] = field(default_factory=list)
    # (pattern, a literal every match contains or None, hit): the literal is checked first with
    # `in`, which skips most keys without handing the text to RE2.
    regexes: list[tuple[RegexKey, str | None, Hit]] = field(default_factory=list)

    def add_regex(self, pattern: RegexKey, hit: Hit) -> None:
        literal = _required_literal(pattern.source)
        if literal is not None and pattern.ignore_case:
            literal = literal.casefold()
        self.regexes.append((pattern, literal, hit))

    def add(self, key: str, hit: Hit, *, case_sensitive: bool, whole_words: bool) -> None:
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

    def run(self, seg: Segment) -> list[Hit]:
        hits: list[Hit] = []
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
            if literal is not None and literal not in (seg.folded if pattern.ignore_case else seg.text):
                continue
            if pattern.search(seg.utf8):
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


def _lookup_words(index: dict[str, list[Hit]], words: set[str], hits: list[Hit]) -> None:
    # Walk the smaller side: a chat window has a few hundred distinct words, a book thousands of keys.
    if len(words) <= len(index):
        for word in words:
            if found := index.get(word):
                hits.extend(found)
    else:
        for word, found in index.items():
            if word in words:
                hits.extend(found)


def _lookup_phrases(phrases, words: set[str], text: str, hits: list[Hit]) -> None:
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
        depth = clamp(book.scan_depth if entry.scan_depth is None else entry.scan_depth, 0, MAX_SCAN_DEPTH)
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
                except RegexKeyError as err:
                    # Saves and imports refuse such keys; one stored before that is named here.
                    problems.append(
                        KeyProblem(entry.id, raw, f"not a valid regular expression: {err}; matched as text")
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
        book=book,
        entries=entries,
        slots=tuple(slots),
        by_id={slot.entry.id: i for i, slot in reversed(list(enumerate(slots)))},
        constants=tuple(i for i, s in enumerate(slots) if s.entry.constant),
        delayed=tuple(i for i, s in enumerate(slots) if s.entry.delay_until_recursion > 0),
        windows=tuple(sorted(windows.items())),
        problems=tuple(problems),
    )


def turn_off_unrunnable(entries: Sequence[LoreEntry]) -> tuple[list[LoreEntry], list[str]]:
    """Entries of an imported file, those with a `/regex/` key RE2 cannot run turned off, and one
    sentence per such entry for the import result. A whole book is not refused for one key (real
    World Info books carry lookbehinds), and the key itself is kept as written so the user can
    rewrite it; the entry stays off until then, because saving it with that key is refused."""
    kept: list[LoreEntry] = []
    notes: list[str] = []
    for entry in entries:
        problem = next(
            ((k, p) for k in (*entry.keys, *entry.secondary_keys) if (p := regex_key_problem(k)) is not None),
            None,
        )
        if problem is None or not entry.enabled:
            kept.append(entry)
            continue
        kept.append(replace(entry, enabled=False))
        name = entry.title or (entry.keys[0] if entry.keys else f"#{entry.id}")
        notes.append(
            f"Entry “{name}” was turned off: its key {problem[0].strip()} cannot be used, {problem[1]}."
        )
    return kept, notes
