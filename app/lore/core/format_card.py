"""The `character_book` of V2/V3 character cards (also standalone, or as `lorebook_v3`).

The V2 spec's fields plus SillyTavern's own under each entry's `extensions`, in SillyTavern's
convertCharacterBook mapping. Entries are handled flattened (`extensions.<key>` as one level) so
the spelling machinery of `format_common.py` sees every field, then unflattened for export.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from app.lore.core.entries import MAX_SCAN_DEPTH, LoreBook, LoreEntry
from app.lore.core.format_common import (
    BOOK_DEFAULTS,
    CARD,
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
    role_index,
    sugo_book,
    type_name,
    unique_ids,
    values_of_book,
    values_of_entry,
)
from app.lore.core.format_st import ST_LOGIC, ST_POSITION, ST_POSITION_IN, kept_or_converted

__all__ = ["export_character_book", "parse_character_book"]

_ENTRIES = "\x00entries"  # stands in for the entry list while a book's own fields are compared

_CARD_ORDER = (
    "id",
    "keys",
    "secondary_keys",
    "comment",
    "content",
    "constant",
    "selective",
    "insertion_order",
    "enabled",
    "position",
    "use_regex",
    *(
        f"extensions.{k}"
        for k in (
            "position",
            "exclude_recursion",
            "display_index",
            "probability",
            "useProbability",
            "depth",
            "selectiveLogic",
            "group",
            "group_override",
            "group_weight",
            "prevent_recursion",
            "delay_until_recursion",
            "scan_depth",
            "match_whole_words",
            "use_group_scoring",
            "case_sensitive",
            "automation_id",
            "role",
            "vectorized",
            "sticky",
            "cooldown",
            "delay",
        )
    ),
)
_CARD_BOOK_ORDER = (
    _ENTRIES,
    "name",
    "description",
    "scan_depth",
    "token_budget",
    "recursive_scanning",
    "extensions",
    "extensions.sugo",
)


def _flatten(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if k == "extensions" and isinstance(v, dict) and v:
            out.update({f"extensions.{ek}": ev for ek, ev in v.items()})
        else:
            out[k] = v
    return out


def _unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in flat.items():
        if k.startswith("extensions."):
            if not isinstance(out.get("extensions"), dict):
                out["extensions"] = {}
            out["extensions"][k.removeprefix("extensions.")] = v
        elif k == "extensions" and isinstance(v, dict) and isinstance(out.get("extensions"), dict):
            out["extensions"].update(v)
        else:
            out[k] = v
    return out


def _card_values(flat: dict[str, Any], where: str) -> dict[str, Any]:
    f = Fields(flat, where)
    x = "extensions."
    logic = f.number(x + "selectiveLogic", 0)
    position = f.maybe_number(x + "position")
    if position is None:
        position = 1 if flat.get("position") == "after_char" else 0
    case_key = x + "case_sensitive" if x + "case_sensitive" in flat else "case_sensitive"
    return dict(
        title=f.text("comment") or f.text("name"),
        content=f.content("content"),
        keys=f.keys("keys"),
        secondary_keys=f.keys("secondary_keys"),
        selective_logic=ST_LOGIC[logic] if 0 <= logic < len(ST_LOGIC) else "and_any",
        case_sensitive=f.maybe_flag(case_key),
        match_whole_words=f.maybe_flag(x + "match_whole_words"),
        constant=f.flag("constant", False),
        enabled=f.flag("enabled", True),
        order=f.number("insertion_order", 100),
        position=ST_POSITION_IN.get(position, "before_char"),
        depth=f.number(x + "depth", 4, 0),
        role=read_role(flat.get(x + "role")),
        probability=f.number(x + "probability", 100, 0, 100),
        use_probability=f.flag(x + "useProbability", True),
        scan_depth=read_scan_depth(f.maybe_number(x + "scan_depth")),
        sticky=f.number(x + "sticky", 0, 0),
        cooldown=f.number(x + "cooldown", 0, 0),
        delay=f.number(x + "delay", 0, 0),
        group=f.text(x + "group"),
        group_weight=f.number(x + "group_weight", 100, 0),
        group_override=f.flag(x + "group_override", False),
        recursion=not f.flag(x + "prevent_recursion", False),
        exclude_recursion=f.flag(x + "exclude_recursion", False),
        delay_until_recursion=f.level(x + "delay_until_recursion"),
        selective=f.flag("selective", True),
        use_group_scoring=f.maybe_flag(x + "use_group_scoring"),
    )


def _card_doc(e: LoreEntry) -> dict[str, Any]:
    position = ST_POSITION.get(e.position, 0)
    x = "extensions."
    return {
        "id": e.id,
        "keys": list(e.keys),
        "secondary_keys": list(e.secondary_keys),
        "comment": e.title,
        "content": e.content,
        "constant": e.constant,
        "selective": e.selective,
        "insertion_order": e.order,
        "enabled": e.enabled,
        "position": "before_char" if position == 0 else "after_char",
        # SillyTavern writes use_regex: true and still reads keys as plain unless written /.../.
        "use_regex": True,
        x + "position": position,
        x + "exclude_recursion": e.exclude_recursion,
        x + "probability": e.probability,
        x + "useProbability": e.use_probability,
        x + "depth": e.depth,
        x + "selectiveLogic": ST_LOGIC.index(e.selective_logic) if e.selective_logic in ST_LOGIC else 0,
        x + "group": e.group,
        x + "group_override": e.group_override,
        x + "group_weight": e.group_weight,
        x + "prevent_recursion": not e.recursion,
        x + "delay_until_recursion": e.delay_until_recursion or False,
        x + "scan_depth": e.scan_depth,
        x + "match_whole_words": e.match_whole_words,
        x + "use_group_scoring": e.use_group_scoring,
        x + "case_sensitive": e.case_sensitive,
        x + "role": role_index(e.role),
        x + "sticky": e.sticky,
        x + "cooldown": e.cooldown,
        x + "delay": e.delay,
    }


_CARD_NATIVE = ("description", "scan_depth", "token_budget", "recursive")


def _card_book_values(flat: dict[str, Any], name: str) -> dict[str, Any]:
    f = Fields(flat, "The lorebook")
    values = {
        "name": f.text("name") or name,
        "description": f.text("description"),
        "scan_depth": f.number("scan_depth", BOOK_DEFAULTS.scan_depth, 0, MAX_SCAN_DEPTH),
        "token_budget": f.number("token_budget", BOOK_DEFAULTS.token_budget, 0),
        "recursive": f.flag("recursive_scanning", BOOK_DEFAULTS.recursive),
    }
    sugo = flat.get("extensions.sugo")
    return read_sugo_book(values, sugo if isinstance(sugo, dict) else {}, "The lorebook")


def _card_book_doc(book: LoreBook) -> dict[str, Any]:
    doc = {
        _ENTRIES: _ENTRIES,
        "name": book.name,
        "description": book.description,
        "scan_depth": book.scan_depth,
        "token_budget": book.token_budget,
        "recursive_scanning": book.recursive,
    }
    # The V2 spec asks for a book-level extensions object; Sugo's settings go inside it.
    sugo = sugo_book(book, _CARD_NATIVE)
    return doc | ({"extensions.sugo": sugo} if sugo else {"extensions": {}})


def parse_character_book(book: dict[str, Any], *, name: str = "") -> LoreFile:
    """A V2/V3 card's `data.character_book` (or a standalone one)."""
    raw_entries = book.get("entries")
    if not isinstance(raw_entries, list):
        raise LoreFileError("The lorebook's 'entries' must be a list.")
    check_count(len(raw_entries))
    parsed, ids = [], []
    for index, raw in enumerate(raw_entries):
        where = f"Entry {index + 1}"
        if not isinstance(raw, dict):
            raise LoreFileError(f"{where} must be an object, not {type_name(raw)}.")
        flat = _flatten(raw)
        parsed.append((flat, _card_values(flat, where)))
        raw_id = raw.get("id")
        raw_id = file_entry_id(raw_id) if isinstance(raw_id, int) else None
        ids.append(index if raw_id is None else raw_id)
    out = []
    for entry_id, (flat, values) in zip(unique_ids(ids), parsed, strict=True):
        entry = LoreEntry(id=entry_id, book_id=0, **values)
        kept = remember(flat, _card_doc(entry), _CARD_ORDER, always=("id",) if "id" in flat else ())
        out.append(replace(entry, extra={CARD: kept} if kept else {}))
    flat_book = {
        (_ENTRIES if k == "entries" else k): v for k, v in _flatten(book | {"entries": _ENTRIES}).items()
    }
    lore_book = LoreBook(id=0, **_card_book_values(flat_book, name))
    kept = remember(flat_book, _card_book_doc(lore_book), _CARD_BOOK_ORDER)
    return LoreFile(CARD, replace(lore_book, extra={CARD: kept} if kept else {}), tuple(out))


def export_character_book(book: LoreBook, entries: Sequence[LoreEntry]) -> dict[str, Any]:
    """The `character_book` object to embed in a V2/V3 card's `data`."""
    docs = []
    for e in entries:
        values = values_of_entry(e)
        flat = restore(
            _card_doc(e),
            kept_or_converted(e, CARD),
            _CARD_ORDER,
            lambda d, v=values: _card_values(d, "entry") == v,
        )
        docs.append(_unflatten(flat))
    book_values = values_of_book(book)
    flat = restore(
        _card_book_doc(book),
        kept_for(book, CARD),
        _CARD_BOOK_ORDER,
        lambda d: _card_book_values(d, book.name) == book_values,
    )
    return {
        ("entries" if k == _ENTRIES else k): (docs if k == _ENTRIES else v)
        for k, v in _unflatten(flat).items()
    }
