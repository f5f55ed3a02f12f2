"""Deliberate Tool Mode: which tools a turn declares when the mode is on (pure).

A plain turn declares nothing, so it costs no declaration tokens. A tool is declared when:
- built-in: the user's message shows intent for its family (app/tools/core/triggers.py, English,
  Portuguese, Spanish and Russian, every list on every message), or names the function itself;
- custom: one of the owner's trigger phrases for its family (or for the function) is in the message;
- follow-up: the message continues the tool turn just before ("do it again but shorter", "sim"),
  which re-declares what that turn declared and used;
- recent: the character used it in one of the last RECENT_TURNS turns.
Each declared tool carries the first of these reasons (in that order), for Peek Prompt.

Custom phrases are normalised (trimmed, whitespace collapsed, folded like the message) and matched
with plain string search, never as regular expressions, so a user's phrase cannot be a ReDoS: a
word-like phrase matches a whole word ("pic" is not in "picnic"); `remind*` matches words starting
so; a phrase with Chinese, Japanese or Korean characters matches inside words (those scripts do not
put spaces between words); other phrases match anywhere.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from app.tools.core.triggers import BARE_FOLLOW_UP, FAMILIES_OF, FOLLOW_UP, TRIGGERS, Rule

RECENT_TURNS = 3  # a tool used this many turns back or fewer stays declared
# A longer message is read at its start and its end, where requests sit, so a pasted book costs
# the same as a few pages (the ~80 patterns take some 10 ms per 1,000 characters at worst).
MAX_SCAN_CHARS = 10_000
# Custom trigger phrases: the settings page refuses more (phrase_problem); past these, more are ignored.
MAX_PHRASE_CHARS = 100
MAX_PHRASES_PER_KEY = 50
# Owners may write the older target names TomoriBot uses.
_KEY_ALIASES = {"reminder": "task", "reminders": "task", "tasks": "task", "search": "web_search"}

Source = Literal["built-in", "custom", "follow-up", "recent"]


@dataclass(frozen=True)
class RecentToolTurn:
    """One of the character's recent turns, as far as tools go."""

    names: tuple[str, ...]  # the tools the character called in it
    turns_ago: int  # 1: the turn just before this message
    declared: tuple[str, ...] = ()  # what it declared, called or not (a follow-up brings them back)


@dataclass(frozen=True)
class Match:
    name: str  # function name
    family: str
    trigger: str  # the words that declared it, as read ("remind me"), or why ("used 2 turns ago")
    source: Source


@dataclass(frozen=True)
class Declared:
    names: tuple[str, ...]  # in the order of `available`
    matches: tuple[Match, ...]  # one per name, same order


def declare(
    message: str,
    *,
    previous: Sequence[RecentToolTurn],
    custom: Mapping[str, Sequence[str]],
    available: Mapping[str, str],
) -> Declared:
    """The tools this turn declares, out of `available` (function name -> family), and why."""
    text = fold(_scanned(message))
    found: dict[str, Match] = {}

    def add(names: Sequence[str], trigger: str, source: Source) -> None:
        for name in names:
            if name in available and name not in found:
                found[name] = Match(name, available[name], _shown(trigger), source)

    needs: dict[re.Pattern[str], re.Match[str] | None] = {}  # a time or a link, searched once
    for trigger_name, rules in TRIGGERS.items():
        words = _first_match(rules, text, needs)
        if words is not None:
            add(_of_families(FAMILIES_OF[trigger_name], available), words, "built-in")
    for name in available:
        if _named(name.casefold(), text):
            add([name], name, "built-in")
    spaced = " ".join(text.split())  # phrases are whitespace-collapsed, so the message is too
    for key, phrases in custom.items():
        for phrase in list(phrases)[:MAX_PHRASES_PER_KEY]:
            normal = normalise_phrase(phrase)
            if normal and phrase_problem(normal) is None and phrase_matches(normal, spaced):
                add(_targets(key, available), normal, "custom")
                break
    last = [t for t in previous if t.turns_ago == 1]
    if last:
        said = _follow_up(text)
        if said is not None:
            add([n for t in last for n in (*t.declared, *t.names)], said, "follow-up")
    for turn in sorted(previous, key=lambda t: t.turns_ago):
        if 1 <= turn.turns_ago <= RECENT_TURNS:
            ago = "the last turn" if turn.turns_ago == 1 else f"{turn.turns_ago} turns ago"
            add(turn.names, f"used {ago}", "recent")
    names = tuple(n for n in available if n in found)
    return Declared(names, tuple(found[n] for n in names))


def fold(text: str) -> str:
    """Lower-cased, curly apostrophes straightened, accents taken off Latin letters (é, ã, ñ, ç);
    other scripts keep theirs (Russian й and ё are letters of their own)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").casefold()
    if text.isascii():
        return text
    out: list[str] = []
    latin = False
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.combining(ch):
            if latin:
                continue
        else:
            latin = ch < "\u0250"  # Basic Latin up to Latin Extended-B
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


def normalise_phrase(phrase: str) -> str:
    """A trigger phrase as it is matched: trimmed, whitespace collapsed, folded."""
    return fold(" ".join(phrase.split()))


def phrase_problem(phrase: str) -> str | None:
    """Why a custom trigger phrase cannot be saved, in a sentence for the settings page; None if fine."""
    normal = normalise_phrase(phrase)
    if not normal.rstrip("*").strip():
        return "A trigger phrase needs at least one letter or digit."
    if len(normal) > MAX_PHRASE_CHARS:
        return f"A trigger phrase can be at most {MAX_PHRASE_CHARS} characters."
    if "*" in normal.rstrip("*") or normal.endswith("**"):
        return "Only one * is allowed, at the end: remind* matches reminder and reminding."
    return None


def phrase_matches(phrase: str, text: str) -> bool:
    """Whether a normalised phrase occurs in folded text (see the module docstring for the rules)."""
    prefix = phrase.endswith("*")
    if prefix:
        phrase = phrase[:-1].rstrip()
    if not phrase:
        return False
    anywhere = _has_cjk(phrase)
    check_start = _is_word_char(phrase[0]) and not anywhere
    check_end = _is_word_char(phrase[-1]) and not anywhere and not prefix
    start = 0
    while (i := text.find(phrase, start)) >= 0:
        end = i + len(phrase)
        if (not check_start or i == 0 or not _is_word_char(text[i - 1])) and (
            not check_end or end == len(text) or not _is_word_char(text[end])
        ):
            return True
        start = i + 1
    return False


def _scanned(message: str) -> str:
    if len(message) <= MAX_SCAN_CHARS:
        return message
    half = MAX_SCAN_CHARS // 2
    return message[:half] + "\n" + message[-half:]


def _first_match(
    rules: Sequence[Rule], text: str, needs: dict[re.Pattern[str], re.Match[str] | None]
) -> str | None:
    for rule in rules:
        m = rule.pattern.search(text)
        if m is None:
            continue
        if rule.needs is None:
            return m.group().strip()
        if rule.needs not in needs:
            needs[rule.needs] = rule.needs.search(text)
        n = needs[rule.needs]
        if n is not None:
            return f"{m.group().strip()} … {n.group().strip()}"
    return None


def _of_families(families: Sequence[str], available: Mapping[str, str]) -> list[str]:
    return [name for name, family in available.items() if family in families]


def _targets(key: str, available: Mapping[str, str]) -> list[str]:
    """A custom trigger's key is a family (or TomoriBot's name for one), else a function name: the
    web_search family's phrases declare what a web search needs, not only the function web_search."""
    family = _KEY_ALIASES.get(key.casefold(), key.casefold())
    if family in FAMILIES_OF or family in available.values():
        return _of_families(FAMILIES_OF.get(family, (family,)), available)
    return [key] if key in available else []


def _named(name: str, text: str) -> bool:
    # "use web_search" asks for that function by name; names shorter than this are ordinary words.
    return len(name) >= 6 and "_" in name and phrase_matches(name, text)


_BARE = re.compile(r"[^\w\s']+")


def _follow_up(text: str) -> str | None:
    m = FOLLOW_UP.search(text)
    if m is not None:
        return m.group().strip()
    bare = " ".join(_BARE.sub(" ", text).split())
    return bare if bare in BARE_FOLLOW_UP else None


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_-"


def _has_cjk(text: str) -> bool:
    return any(
        "\u3040" <= ch <= "\u30ff"  # Hiragana, Katakana
        or "\u3400" <= ch <= "\u4dbf"  # CJK Extension A
        or "\u4e00" <= ch <= "\u9fff"  # CJK Unified Ideographs
        or "\uac00" <= ch <= "\ud7af"  # Hangul syllables
        or "\u1100" <= ch <= "\u11ff"  # Hangul Jamo
        or "\u3130" <= ch <= "\u318f"  # Hangul compatibility Jamo
        or "\uf900" <= ch <= "\ufaff"  # CJK compatibility ideographs
        or "\uff66" <= ch <= "\uff9f"  # half-width Katakana
        or "\U00020000" <= ch <= "\U0002ebef"  # CJK Extensions B-F
        for ch in text
    )


def _shown(trigger: str) -> str:
    return trigger if len(trigger) <= 80 else trigger[:79] + "…"
