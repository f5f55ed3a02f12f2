"""What the three lorebook file formats share: the limits, `LoreFile` and `LoreFileError`, a
field reader whose errors say where, and the pair that keeps a file's own spelling for the round
trip described in `worldinfo.py` (`remember` on import, `restore` on export).

Format-neutral on purpose: `worldinfo.py` imports every format to detect and re-export them, so
what the formats need from each other cannot live there without an import cycle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from app.lore.core.entries import MAX_SCAN_DEPTH, ROLES, LoreBook, LoreEntry

__all__ = [
    "BOOK_DEFAULTS",
    "CARD",
    "MARINARA",
    "MAX_CONTENT_CHARS",
    "MAX_ENTRIES",
    "MAX_FILE_BYTES",
    "MAX_KEYS",
    "MAX_KEY_CHARS",
    "ST",
    "Fields",
    "LoreFile",
    "LoreFileError",
    "check_count",
    "kept_for",
    "read_role",
    "read_scan_depth",
    "read_sugo_book",
    "remember",
    "restore",
    "role_index",
    "sugo_book",
    "type_name",
    "file_entry_id",
    "unique_ids",
    "values_of_book",
    "values_of_entry",
]

MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_ENTRIES = 10_000
MAX_CONTENT_CHARS = 100_000  # ~25k tokens, twelve times the default lorebook budget
MAX_KEYS = 1_000
MAX_KEY_CHARS = 1_000
# JavaScript's largest safe integer: the apps that write these files cannot hold a larger whole number.
MAX_FILE_NUMBER = 2**53 - 1

ST, CARD, MARINARA = "sillytavern", "character_book", "marinara"

_MISSING = "__missing__"  # known keys the file did not write
_ORDER = "__order__"  # the file's key order, when it differs from ours

_BOOK_SETTINGS = (
    "description",
    "scan_depth",
    "token_budget",
    "entry_limit",
    "recursive",
    "max_depth",
    "case_sensitive",
    "match_whole_words",
    "use_group_scoring",
)
BOOK_DEFAULTS = LoreBook(id=0, name="")


class LoreFileError(ValueError):
    """Why a lorebook file was refused, as one sentence for the user."""


@dataclass(frozen=True)
class LoreFile:
    format: str  # ST, CARD or MARINARA
    book: LoreBook  # id 0: the caller assigns ids when it stores the book
    entries: tuple[LoreEntry, ...]  # ids from the file (unique), book_id 0


# ---------------------------------------------------------------------------------------------
# Reading fields with errors that say where


def type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), "a number"
    )


class Fields:
    def __init__(self, raw: dict[str, Any], where: str):
        self.raw, self.where = raw, where

    def fail(self, key: str, expected: str) -> LoreFileError:
        return LoreFileError(f"{self.where}: '{key}' must be {expected}, not {type_name(self.raw.get(key))}.")

    def text(self, key: str, default: str = "") -> str:
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(key, "text")
        return value

    def content(self, key: str) -> str:
        value = self.text(key)
        if len(value) > MAX_CONTENT_CHARS:
            raise LoreFileError(
                f"{self.where} has {len(value):,} characters of content; "
                f"at most {MAX_CONTENT_CHARS:,} are accepted per entry."
            )
        return value

    def maybe_flag(self, key: str) -> bool | None:
        value = self.raw.get(key)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int | float) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"  # Marinara 1.5 stores some switches as text
        raise self.fail(key, "true or false")

    def flag(self, key: str, default: bool) -> bool:
        value = self.maybe_flag(key)
        return default if value is None else value

    def maybe_number(self, key: str) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            try:
                value = float(value.strip())
            except ValueError:
                raise self.fail(key, "a number") from None
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise self.fail(key, "a number")
        if abs(value) > MAX_FILE_NUMBER:
            raise LoreFileError(
                f"{self.where}: '{key}' is {value:,.0f}; a lorebook's numbers go up to {MAX_FILE_NUMBER:,}."
            )
        return int(value)

    def number(self, key: str, default: int, low: int | None = None, high: int | None = None) -> int:
        value = self.maybe_number(key)
        value = default if value is None else value
        if low is not None:
            value = max(low, value)
        return value if high is None else min(high, value)

    def level(self, key: str) -> int:
        """delayUntilRecursion: false/true or a recursion level."""
        value = self.raw.get(key)
        if isinstance(value, bool) or value is None:
            return int(bool(value))
        return max(0, self.number(key, 0))

    def keys(self, key: str) -> tuple[str, ...]:
        value = self.raw.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise self.fail(key, "a list of keywords")
        if len(value) > MAX_KEYS:
            raise LoreFileError(
                f"{self.where} has {len(value):,} keywords in '{key}'; at most {MAX_KEYS:,} are accepted."
            )
        out = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                raise self.fail(key, "a list of keywords")
            item = str(item)
            if len(item) > MAX_KEY_CHARS:
                raise LoreFileError(
                    f"{self.where} has a keyword of {len(item):,} characters; "
                    f"at most {MAX_KEY_CHARS:,} are accepted."
                )
            out.append(item)
        return tuple(out)

    def sugo(self) -> dict[str, Any]:
        value = self.raw.get("sugo")
        return value if isinstance(value, dict) else {}


def read_role(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(ROLES):
        return ROLES[value]
    return value if value in ROLES else "system"


def read_scan_depth(value: int | None) -> int | None:
    return None if value is None else max(0, min(MAX_SCAN_DEPTH, value))


def role_index(role: str) -> int:
    return ROLES.index(role) if role in ROLES else 0


def check_count(n: int) -> None:
    if n > MAX_ENTRIES:
        raise LoreFileError(f"The lorebook has {n:,} entries; at most {MAX_ENTRIES:,} are accepted.")


def file_entry_id(value: Any) -> int | None:
    """The id a file gives an entry (a whole number, or ASCII digits in a key), or None when it gives
    none that can be kept (past JavaScript's safe integers no app wrote it as a number anyway)."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_FILE_NUMBER:
        return value
    return None


def unique_ids(ids: list[int]) -> list[int]:
    """Entry ids as the file gives them, made unique: a repeated id becomes the next one not yet
    taken, so the first entry holding an id keeps it."""
    seen: set[int] = set()
    out = []
    for i in ids:
        while i in seen:
            i = i + 1 if i < MAX_FILE_NUMBER else 0
        seen.add(i)
        out.append(i)
    return out


# ---------------------------------------------------------------------------------------------
# Keeping the file's spelling


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, types included (false is not 0, 1.0 is not 1)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _ordered(doc: dict[str, Any], order: Sequence[str], kept_order: Sequence[str] | None) -> dict[str, Any]:
    """`doc` in the file's key order if kept, else in the format's order; keys neither names (the
    file's unknown fields) keep their relative order at the end. Every key a canonical export
    writes must be in the format's order, so this agrees with what `remember` checked."""
    rank = {k: i for i, k in enumerate(kept_order or order)}
    return dict(sorted(doc.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def remember(
    raw: dict[str, Any], canonical: dict[str, Any], order: Sequence[str], always: Sequence[str] = ()
) -> dict:
    """What export needs besides the entry's fields to write `raw` again: raw values that the
    canonical export would not write (unknown fields) or would spell differently, the known keys
    raw leaves out, and raw's key order if ours differs. `always` keys are kept as they are."""
    kept = {k: v for k, v in raw.items() if k in always or k not in canonical or not _same(v, canonical[k])}
    missing = [k for k in canonical if k not in raw]
    if missing:
        kept[_MISSING] = missing
    if list(_ordered(dict.fromkeys(raw), order, None)) != list(raw):
        kept[_ORDER] = list(raw)
    return kept


def restore(canonical: dict[str, Any], kept: Any, order: Sequence[str], same: Callable[[dict], bool]) -> dict:
    """The canonical export with the kept spelling put back where `same` says it still means the
    same thing (all at once for an unedited entry, else key by key)."""
    if not isinstance(kept, dict):
        kept = {}
    literals = {k: v for k, v in kept.items() if k not in (_MISSING, _ORDER)}
    missing = [k for k in kept.get(_MISSING, ()) if isinstance(k, str)]

    def safe_same(doc: dict) -> bool:
        try:
            return same(doc)
        except LoreFileError:
            return False

    doc = {k: v for k, v in canonical.items() if k not in missing} | literals
    if not safe_same(doc):
        doc = dict(canonical)
        for k, v in literals.items():
            if k not in canonical or safe_same(doc | {k: v}):
                doc[k] = v
        for k in missing:
            trial = {kk: vv for kk, vv in doc.items() if kk != k}
            if safe_same(trial):
                doc = trial
    kept_order = kept.get(_ORDER)
    return _ordered(doc, order, kept_order if isinstance(kept_order, list) else None)


def values_of_entry(entry: LoreEntry) -> dict[str, Any]:
    return {f.name: getattr(entry, f.name) for f in fields(entry) if f.name not in ("id", "book_id", "extra")}


def values_of_book(book: LoreBook) -> dict[str, Any]:
    return {"name": book.name, **{k: getattr(book, k) for k in _BOOK_SETTINGS}}


def sugo_book(book: LoreBook, native: Sequence[str]) -> dict[str, Any]:
    """Book settings the format has no field for, when they differ from Sugo's defaults."""
    return {
        k: getattr(book, k)
        for k in _BOOK_SETTINGS
        if k not in native and getattr(book, k) != getattr(BOOK_DEFAULTS, k)
    }


def read_sugo_book(values: dict[str, Any], sugo: dict[str, Any], where: str) -> dict[str, Any]:
    """`values` (what the format says natively) completed by the file's `sugo` block, then by
    Sugo's defaults: every book setting, ready for `LoreBook(**values)`."""
    f = Fields(sugo, f"{where} (sugo)")
    for key in _BOOK_SETTINGS:
        default = getattr(BOOK_DEFAULTS, key)
        if key not in sugo:
            values.setdefault(key, default)
            continue
        if isinstance(default, bool):
            values[key] = f.flag(key, default)
        elif isinstance(default, int):
            values[key] = f.number(key, default)
        else:
            values[key] = f.text(key, default)
    return values


def kept_for(obj: LoreBook | LoreEntry, namespace: str) -> dict[str, Any]:
    """What `remember` kept of `obj`'s file in this format; empty when nothing was kept or
    `extra` holds something other than a dict."""
    value = obj.extra.get(namespace) if isinstance(obj.extra, dict) else None
    return value if isinstance(value, dict) else {}
