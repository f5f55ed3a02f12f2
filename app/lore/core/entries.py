"""The lorebook data the scan works on and returns: books, entries, timed state, results.

Its own module because three others need it and none should load another's machinery to get it:
key matching (`matching.py`) compiles `LoreBook`/`LoreEntry`, the scan (`activation.py`) takes a
`ScanRequest` and returns a `ScanResult`, and the file formats (`format_*.py`) build books and
entries. Plain dataclasses (frozen, except the `ScanResult` the scan fills in); no logic beyond
`clamp`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_CHAT_TOKEN_BUDGET",
    "MAX_ENTRY_LIMIT",
    "MAX_RECURSION_DEPTH",
    "MAX_SCAN_DEPTH",
    "MIN_ENTRY_LIMIT",
    "MIN_RECURSION_DEPTH",
    "POSITIONS",
    "ROLES",
    "SELECTIVE_LOGICS",
    "SKIP_BOOK",
    "SKIP_BOTH",
    "SKIP_CHAT",
    "SKIP_LIMIT",
    "SAME_TEXT",
    "ActiveEntry",
    "KeyProblem",
    "LoreBook",
    "LoreEntry",
    "RejectedEntry",
    "ScanRequest",
    "ScanResult",
    "SkippedEntry",
    "TimedState",
    "clamp",
]

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
SAME_TEXT = "same text"  # a rejected entry whose text an admitted one already sends


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
    # "waits for recursion" (delay until recursion and no pass reached its level), "empty"
    # (it fired, its macros ran, but its text rendered empty, so it is not listed as active), or
    # SAME_TEXT (an entry admitted before it sends the same text: `same_as`).
    reason: str
    found_at_depth: int
    same_as: ActiveEntry | None = None


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


def clamp(value: int, low: int, high: int) -> int:
    """`value` within [low, high]: a setting out of its range (a hand-edited file, an old row)
    acts as the nearest limit."""
    return max(low, min(high, value))
