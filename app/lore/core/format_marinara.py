"""Marinara Engine's lorebook export: the `marinara_lorebook` envelope (version 1) around one
lorebook row, its entries and folders.

Marinara marks regex keys per entry (`useRegex`) where Sugo writes each key `/pattern/flags`,
and has no book-wide defaults for case or whole words; both are converted both ways here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from app.lore.core.entries import MAX_SCAN_DEPTH, POSITIONS, LoreBook, LoreEntry
from app.lore.core.format_common import (
    BOOK_DEFAULTS,
    MARINARA,
    Fields,
    LoreFile,
    LoreFileError,
    check_count,
    file_entry_id,
    kept_for,
    read_role,
    read_scan_depth,
    read_sugo_book,
    remember,
    restore,
    sugo_book,
    type_name,
    unique_ids,
    values_of_book,
    values_of_entry,
)
from app.lore.core.matching import RegexKeyError, parse_regex_key

__all__ = ["MARINARA_TYPE", "export_marinara_lorebook", "parse_marinara_lorebook"]

MARINARA_TYPE = "marinara_lorebook"

_MARINARA_LOGIC_IN = {
    "and": "and_any",
    "or": "and_any",
    "and_all": "and_all",
    "not": "not_any",
    "not_all": "not_all",
}
_MARINARA_LOGIC = {"and_any": "and", "and_all": "and_all", "not_any": "not", "not_all": "not_all"}
_MARINARA_POSITION = {"before_char": 0, "after_char": 1, "at_depth": 2}

_MARINARA_ORDER = (
    "id",
    "lorebookId",
    "folderId",
    "name",
    "content",
    "description",
    "keys",
    "secondaryKeys",
    "enabled",
    "constant",
    "selective",
    "selectiveLogic",
    "probability",
    "scanDepth",
    "matchWholeWords",
    "caseSensitive",
    "useRegex",
    "position",
    "depth",
    "order",
    "role",
    "sticky",
    "cooldown",
    "delay",
    "group",
    "groupWeight",
    "preventRecursion",
    "excludeRecursion",
    "delayUntilRecursion",
    "sugo",
)
_MARINARA_BOOK_ORDER = (
    "id",
    "name",
    "description",
    "scanDepth",
    "tokenBudget",
    "recursiveScanning",
    "maxRecursionDepth",
    "entryLimit",
    "sugo",
)


def _wrap_regex(pattern: str, case_sensitive: bool) -> str:
    """A Marinara regex key (useRegex) in Sugo's `/pattern/flags` spelling."""
    return "/" + pattern.replace("/", "\\/") + "/" + ("" if case_sensitive else "i")


def _unwrap_regex(key: str) -> str:
    return key[1 : key.rindex("/")].replace("\\/", "/")


def _marinara_values(raw: dict[str, Any], where: str) -> dict[str, Any]:
    f = Fields(raw, where)
    sugo = Fields(f.sugo(), f"{where} (sugo)")
    case_sensitive = f.maybe_flag("caseSensitive")
    keys, secondary = f.keys("keys"), f.keys("secondaryKeys")
    if f.flag("useRegex", False):
        keys = tuple(_wrap_regex(k, bool(case_sensitive)) for k in keys)
        secondary = tuple(_wrap_regex(k, bool(case_sensitive)) for k in secondary)
    logic = f.text("selectiveLogic", "and")
    position = sugo.text("position") or {0: "before_char", 1: "after_char", 2: "at_depth"}.get(
        f.maybe_number("position") or 0, "before_char"
    )
    probability = f.maybe_number("probability")
    return dict(
        title=f.text("name"),
        content=f.content("content"),
        keys=keys,
        secondary_keys=secondary,
        selective_logic=_MARINARA_LOGIC_IN.get(logic, "and_any"),
        case_sensitive=case_sensitive,
        match_whole_words=f.maybe_flag("matchWholeWords"),
        constant=f.flag("constant", False),
        enabled=f.flag("enabled", True),
        order=f.number("order", 100),
        position=position if position in POSITIONS else "before_char",
        depth=f.number("depth", 4, 0),
        role=read_role(raw.get("role")),
        probability=100 if probability is None else max(0, min(100, probability)),
        use_probability=sugo.flag("use_probability", True),
        scan_depth=read_scan_depth(f.maybe_number("scanDepth")),
        sticky=f.number("sticky", 0, 0),
        cooldown=f.number("cooldown", 0, 0),
        delay=f.number("delay", 0, 0),
        group=f.text("group"),
        group_weight=f.number("groupWeight", 100, 0),
        group_override=sugo.flag("group_override", False),
        # Without the field, Sugo's default (off), as the spec's Recursion switch; with it, its opposite.
        recursion="preventRecursion" in raw and not f.flag("preventRecursion", True),
        exclude_recursion=f.flag("excludeRecursion", False),
        delay_until_recursion=f.level("delayUntilRecursion"),
        selective=f.flag("selective", False),
        use_group_scoring=sugo.maybe_flag("use_group_scoring"),
    )


def _marinara_keys(e: LoreEntry, case_sensitive: bool) -> tuple[bool, list[str], list[str]]:
    """Marinara marks a whole entry's keys as regexes: (useRegex, keys, secondary keys)."""
    all_keys = [k for k in (*e.keys, *e.secondary_keys) if k.strip()]
    plain = (False, list(e.keys), list(e.secondary_keys))
    if not all_keys:
        return plain
    unwrapped = []
    for key in (*e.keys, *e.secondary_keys):
        try:
            is_regex = parse_regex_key(key) is not None
        except RegexKeyError:
            is_regex = True  # a broken pattern is still written as one
        if not is_regex or _wrap_regex(_unwrap_regex(key), case_sensitive) != key:
            return plain
        unwrapped.append(_unwrap_regex(key))
    return True, unwrapped[: len(e.keys)], unwrapped[len(e.keys) :]


def _marinara_doc(e: LoreEntry, book: LoreBook) -> dict[str, Any]:
    # Marinara has no book-wide defaults for these: write what the entry means in this book.
    case_sensitive = book.case_sensitive if e.case_sensitive is None else e.case_sensitive
    whole_words = book.match_whole_words if e.match_whole_words is None else e.match_whole_words
    use_regex, keys, secondary = _marinara_keys(e, case_sensitive)
    doc = {
        "id": str(e.id),
        "name": e.title,
        "content": e.content,
        "keys": keys,
        "secondaryKeys": secondary,
        "enabled": e.enabled,
        "constant": e.constant,
        "selective": e.selective,
        "selectiveLogic": _MARINARA_LOGIC.get(e.selective_logic, "and"),
        "probability": e.probability,
        "scanDepth": e.scan_depth,
        "matchWholeWords": whole_words,
        "caseSensitive": case_sensitive,
        "useRegex": use_regex,
        "position": _MARINARA_POSITION.get(e.position, 1 if "after" in e.position else 0),
        "depth": e.depth,
        "order": e.order,
        "role": e.role,
        "sticky": e.sticky,
        "cooldown": e.cooldown,
        "delay": e.delay,
        "group": e.group,
        "groupWeight": e.group_weight,
        "preventRecursion": not e.recursion,
        "excludeRecursion": e.exclude_recursion,
        "delayUntilRecursion": e.delay_until_recursion or False,
    }
    sugo = {
        "position": e.position if e.position not in _MARINARA_POSITION else None,
        "use_probability": e.use_probability if not e.use_probability else None,
        "group_override": e.group_override or None,
        "use_group_scoring": e.use_group_scoring,
    }
    if sugo := {k: v for k, v in sugo.items() if v is not None}:
        doc["sugo"] = sugo
    return doc


_MARINARA_NATIVE = ("description", "scan_depth", "token_budget", "recursive", "max_depth", "entry_limit")


def _marinara_book_values(raw: dict[str, Any]) -> dict[str, Any]:
    f, d = Fields(raw, "The lorebook"), BOOK_DEFAULTS
    values = {
        "name": f.text("name"),
        "description": f.text("description"),
        "scan_depth": f.number("scanDepth", d.scan_depth, 0, MAX_SCAN_DEPTH),
        "token_budget": f.number("tokenBudget", d.token_budget, 0),
        "recursive": f.flag("recursiveScanning", d.recursive),
        "max_depth": f.number("maxRecursionDepth", d.max_depth, 1, 10),
        "entry_limit": f.number("entryLimit", d.entry_limit, 1, 1000),
    }
    return read_sugo_book(values, f.sugo(), "The lorebook")


def _marinara_book_doc(book: LoreBook) -> dict[str, Any]:
    doc = {
        "name": book.name,
        "description": book.description,
        "scanDepth": book.scan_depth,
        "tokenBudget": book.token_budget,
        "recursiveScanning": book.recursive,
        "maxRecursionDepth": book.max_depth,
        "entryLimit": book.entry_limit,
    }
    if sugo := sugo_book(book, _MARINARA_NATIVE):
        doc["sugo"] = sugo
    return doc


def parse_marinara_lorebook(doc: dict[str, Any]) -> LoreFile:
    """`{"type": "marinara_lorebook", "version": 1, "exportedAt", "data": {lorebook, entries, folders}}`."""
    if doc.get("type") != MARINARA_TYPE or doc.get("version") != 1:
        raise LoreFileError(
            'This is not a Marinara lorebook export (expected type "marinara_lorebook", version 1).'
        )
    data = doc.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("lorebook"), dict):
        raise LoreFileError("The Marinara file has no lorebook (data.lorebook).")
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list):
        raise LoreFileError("The Marinara file has no list of entries (data.entries).")
    check_count(len(raw_entries))
    book = LoreBook(id=0, **_marinara_book_values(data["lorebook"]))
    parsed, ids = [], []
    for index, raw in enumerate(raw_entries):
        where = f"Entry {index + 1}"
        if not isinstance(raw, dict):
            raise LoreFileError(f"{where} must be an object, not {type_name(raw)}.")
        parsed.append((raw, _marinara_values(raw, where)))
        raw_id = file_entry_id(raw.get("id"))
        ids.append(index if raw_id is None else raw_id)
    out = []
    for entry_id, (raw, values) in zip(unique_ids(ids), parsed, strict=True):
        entry = LoreEntry(id=entry_id, book_id=0, **values)
        kept = remember(
            raw, _marinara_doc(entry, book), _MARINARA_ORDER, always=("id",) if "id" in raw else ()
        )
        out.append(replace(entry, extra={MARINARA: kept} if kept else {}))
    kept = remember(data["lorebook"], _marinara_book_doc(book), _MARINARA_BOOK_ORDER)
    # Folders and anything newer; no folders is what export writes anyway.
    others = {k: v for k, v in data.items() if k not in ("lorebook", "entries") and (k, v) != ("folders", [])}
    extra = ({MARINARA: kept} if kept else {}) | ({"marinara_data": others} if others else {})
    return LoreFile(MARINARA, replace(book, extra=extra), tuple(out))


def export_marinara_lorebook(
    book: LoreBook, entries: Sequence[LoreEntry], *, now: datetime
) -> dict[str, Any]:
    """Marinara's `marinara_lorebook` envelope (`now` stamps exportedAt)."""
    docs = []
    for e in entries:
        values = values_of_entry(e)
        docs.append(
            restore(
                _marinara_doc(e, book),
                kept_for(e, MARINARA),
                _MARINARA_ORDER,
                lambda d, v=values: _marinara_values(d, "entry") == v,
            )
        )
    book_values = values_of_book(book)
    row = restore(
        _marinara_book_doc(book),
        kept_for(book, MARINARA),
        _MARINARA_BOOK_ORDER,
        lambda d: _marinara_book_values(d) == book_values,
    )
    others = book.extra.get("marinara_data") if isinstance(book.extra, dict) else None
    data = {
        "lorebook": row,
        "entries": docs,
        **({"folders": []} | (others if isinstance(others, dict) else {})),
    }
    stamp = now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"type": MARINARA_TYPE, "version": 1, "exportedAt": stamp, "data": data}
