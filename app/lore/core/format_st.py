"""SillyTavern World Info JSON: `{"entries": {"<uid>": {...}}, ...}`, one object per entry and
no book settings of its own.

Also home of SillyTavern's numbering (selectiveLogic, position) and of the entry fields Sugo does
not model, which `format_card.py` shares: a card's `character_book` is SillyTavern's other
spelling of the same entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from app.lore.core.entries import LoreBook, LoreEntry
from app.lore.core.format_common import (
    CARD,
    ST,
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
    values_of_entry,
)

__all__ = [
    "ST_LOGIC",
    "ST_POSITION",
    "ST_POSITION_IN",
    "export_world_info",
    "kept_or_converted",
    "parse_world_info",
]

ST_LOGIC = ("and_any", "not_all", "not_any", "and_all")  # selectiveLogic 0..3
ST_POSITION = {"before_char": 0, "after_char": 1, "at_depth": 4, "before_examples": 5, "after_examples": 6}
# 2/3 (above/below the Author's Note) sit in the chat at the note's depth: the nearest Sugo place.
# 7 (an outlet, pulled by a macro) has no Sugo place; it keeps its number for the way back.
ST_POSITION_IN = {
    0: "before_char",
    1: "after_char",
    2: "at_depth",
    3: "at_depth",
    4: "at_depth",
    5: "before_examples",
    6: "after_examples",
}

_ST_ORDER = (
    "uid",
    "key",
    "keysecondary",
    "comment",
    "content",
    "constant",
    "selective",
    "selectiveLogic",
    "order",
    "position",
    "disable",
    "displayIndex",
    "addMemo",
    "group",
    "groupOverride",
    "groupWeight",
    "sticky",
    "cooldown",
    "delay",
    "probability",
    "depth",
    "useProbability",
    "role",
    "vectorized",
    "excludeRecursion",
    "preventRecursion",
    "delayUntilRecursion",
    "scanDepth",
    "caseSensitive",
    "matchWholeWords",
    "useGroupScoring",
    "automationId",
)


# SillyTavern fields Sugo does not model, as World Info and as a card's extensions spell them
# (SillyTavern's own convertCharacterBook mapping), carried across when converting.
_ST_CARD_EXTRAS = {
    "displayIndex": "display_index", "vectorized": "vectorized", "automationId": "automation_id",
    "ignoreBudget": "ignore_budget", "outletName": "outlet_name", "triggers": "triggers",
    "characterFilter": "character_filter", "matchPersonaDescription": "match_persona_description",
    "matchCharacterDescription": "match_character_description",
    "matchCharacterPersonality": "match_character_personality",
    "matchCharacterDepthPrompt": "match_character_depth_prompt", "matchScenario": "match_scenario",
    "matchCreatorNotes": "match_creator_notes",
}  # fmt: skip # a table: SillyTavern's field names to a card's, in rows


def kept_or_converted(entry: LoreEntry, namespace: str) -> dict[str, Any]:
    """The entry's kept fields for `namespace`; for an entry that came from the other SillyTavern
    format, its unmodelled SillyTavern fields renamed."""
    if kept := kept_for(entry, namespace):
        return kept
    if namespace == ST:
        card = kept_for(entry, CARD)
        return {st: card[f"extensions.{c}"] for st, c in _ST_CARD_EXTRAS.items() if f"extensions.{c}" in card}
    if namespace == CARD:
        st = kept_for(entry, ST)
        return {f"extensions.{c}": st[k] for k, c in _ST_CARD_EXTRAS.items() if k in st}
    return {}


def _st_values(raw: dict[str, Any], where: str) -> dict[str, Any]:
    f = Fields(raw, where)
    logic = f.number("selectiveLogic", 0)
    position = f.maybe_number("position")
    return dict(
        title=f.text("comment"),
        content=f.content("content"),
        keys=f.keys("key"),
        secondary_keys=f.keys("keysecondary"),
        selective_logic=ST_LOGIC[logic] if 0 <= logic < len(ST_LOGIC) else "and_any",
        case_sensitive=f.maybe_flag("caseSensitive"),
        match_whole_words=f.maybe_flag("matchWholeWords"),
        constant=f.flag("constant", False),
        enabled=not f.flag("disable", False),
        order=f.number("order", 100),
        position=ST_POSITION_IN.get(position if position is not None else 0, "before_char"),
        depth=f.number("depth", 4, 0),
        role=read_role(raw.get("role")),
        probability=f.number("probability", 100, 0, 100),
        use_probability=f.flag("useProbability", True),
        scan_depth=read_scan_depth(f.maybe_number("scanDepth")),
        sticky=f.number("sticky", 0, 0),
        cooldown=f.number("cooldown", 0, 0),
        delay=f.number("delay", 0, 0),
        group=f.text("group"),
        group_weight=f.number("groupWeight", 100, 0),
        group_override=f.flag("groupOverride", False),
        recursion=not f.flag("preventRecursion", False),
        exclude_recursion=f.flag("excludeRecursion", False),
        delay_until_recursion=f.level("delayUntilRecursion"),
        selective=f.flag("selective", True),
        use_group_scoring=f.maybe_flag("useGroupScoring"),
    )


def _st_doc(e: LoreEntry) -> dict[str, Any]:
    position = ST_POSITION.get(e.position, 0)
    return {
        "uid": e.id,
        "key": list(e.keys),
        "keysecondary": list(e.secondary_keys),
        "comment": e.title,
        "content": e.content,
        "constant": e.constant,
        "selective": e.selective,
        "selectiveLogic": ST_LOGIC.index(e.selective_logic) if e.selective_logic in ST_LOGIC else 0,
        "order": e.order,
        "position": position,
        "disable": not e.enabled,
        "group": e.group,
        "groupOverride": e.group_override,
        "groupWeight": e.group_weight,
        "sticky": e.sticky,
        "cooldown": e.cooldown,
        "delay": e.delay,
        "probability": e.probability,
        "depth": e.depth,
        "useProbability": e.use_probability,
        # SillyTavern writes no role for a system entry outside the chat.
        "role": None if e.role == "system" and position != 4 else role_index(e.role),
        "excludeRecursion": e.exclude_recursion,
        "preventRecursion": not e.recursion,
        "delayUntilRecursion": e.delay_until_recursion or False,
        "scanDepth": e.scan_depth,
        "caseSensitive": e.case_sensitive,
        "matchWholeWords": e.match_whole_words,
        "useGroupScoring": e.use_group_scoring,
    }


def parse_world_info(doc: dict[str, Any], *, name: str) -> LoreFile:
    """SillyTavern World Info: `{"entries": {"<uid>": {...}}, ...}`."""
    entries = doc.get("entries")
    if not isinstance(entries, dict):
        raise LoreFileError("This World Info file has no 'entries' object.")
    check_count(len(entries))
    parsed, ids = [], []
    for index, (map_key, raw) in enumerate(entries.items()):
        where = f'Entry "{map_key}"'
        if not isinstance(raw, dict):
            raise LoreFileError(f"{where} must be an object, not {type_name(raw)}.")
        values = _st_values(raw, where)
        uid = raw.get("uid")
        uid = file_entry_id(uid) if isinstance(uid, int) else None
        uid = file_entry_id(str(map_key)) if uid is None else uid
        ids.append(index if uid is None else uid)
        parsed.append((raw, values))
    out = []
    for entry_id, (raw, values) in zip(unique_ids(ids), parsed, strict=True):
        entry = LoreEntry(id=entry_id, book_id=0, **values)
        kept = remember(raw, _st_doc(entry), _ST_ORDER, always=("uid",) if "uid" in raw else ())
        out.append(replace(entry, extra={ST: kept} if kept else {}))
    # World Info has no book settings: Sugo's own ride under "sugo"; anything else (originalData,
    # the card book the file came from) is kept as it is.
    book_raw = {k: v for k, v in doc.items() if k not in ("entries", "sugo")}
    sugo = doc.get("sugo")
    book = LoreBook(
        id=0, **read_sugo_book({"name": name}, sugo if isinstance(sugo, dict) else {}, "The lorebook")
    )
    return LoreFile(ST, replace(book, extra={ST: book_raw} if book_raw else {}), tuple(out))


def export_world_info(book: LoreBook, entries: Sequence[LoreEntry]) -> dict[str, Any]:
    """SillyTavern World Info JSON for `book` (entries in the given order, keyed by uid)."""
    docs, ids = [], []
    for e in entries:
        values = values_of_entry(e)
        doc = restore(
            _st_doc(e), kept_or_converted(e, ST), _ST_ORDER, lambda d, v=values: _st_values(d, "entry") == v
        )
        docs.append(doc)
        uid = doc.get("uid")
        ids.append(uid if isinstance(uid, int) and not isinstance(uid, bool) else e.id)
    out_entries = {}
    for uid, doc in zip(unique_ids(ids), docs, strict=True):
        out_entries[str(uid)] = doc if doc.get("uid") == uid else (doc | {"uid": uid})
    out: dict[str, Any] = {"entries": out_entries, **kept_for(book, ST)}
    if sugo := sugo_book(book, ()):
        out["sugo"] = sugo
    return out
