"""Lorebook files in and out: SillyTavern World Info JSON, the `character_book` of V2/V3 character
cards, and Marinara Engine's `marinara_lorebook` envelope. Pure functions over bytes and dicts.

Round trips. Each format maps its fields onto `LoreBook` / `LoreEntry`; whatever that mapping
cannot reproduce is kept in `extra[<format>]` of the book or entry: fields Sugo does not model
(`displayIndex`, `automationId`, folders, ...) and the file's own spelling of fields Sugo
normalises (`role: null` for system, `delayUntilRecursion: false` for 0, `"false"` for false,
keys the file left out, the file's key order). Exporting an unedited import to its own format
gives the input back; after an edit, a kept spelling is used only where it still means what the
entry says. What a format cannot express of Sugo's own settings goes under a `sugo` key, so an
export from Sugo re-imports without loss.

Refusals raise `LoreFileError` with one sentence for the user, before anything is returned.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any

from app.lore.activation import (
    MAX_SCAN_DEPTH,
    POSITIONS,
    ROLES,
    LoreBook,
    LoreEntry,
    parse_regex_key,
)

MAX_FILE_BYTES = 32 * 1024 * 1024
MAX_ENTRIES = 10_000
MAX_CONTENT_CHARS = 100_000  # ~25k tokens, twelve times the default lorebook budget
MAX_KEYS = 1_000
MAX_KEY_CHARS = 1_000

ST, CARD, MARINARA = "sillytavern", "character_book", "marinara"
MARINARA_TYPE = "marinara_lorebook"

_MISSING = "__missing__"  # known keys the file did not write
_ORDER = "__order__"  # the file's key order, when it differs from ours
_ENTRIES = "\x00entries"  # stands in for the entry list while a book's own fields are compared

_ST_LOGIC = ("and_any", "not_all", "not_any", "and_all")  # selectiveLogic 0..3
_ST_POSITION = {"before_char": 0, "after_char": 1, "at_depth": 4, "before_examples": 5, "after_examples": 6}
# 2/3 (above/below the Author's Note) sit in the chat at the note's depth: the nearest Sugo place.
# 7 (an outlet, pulled by a macro) has no Sugo place; it keeps its number for the way back.
_ST_POSITION_IN = {0: "before_char", 1: "after_char", 2: "at_depth", 3: "at_depth", 4: "at_depth",
                   5: "before_examples", 6: "after_examples"}  # fmt: skip
_MARINARA_LOGIC_IN = {
    "and": "and_any",
    "or": "and_any",
    "and_all": "and_all",
    "not": "not_any",
    "not_all": "not_all",
}
_MARINARA_LOGIC = {"and_any": "and", "and_all": "and_all", "not_any": "not", "not_all": "not_all"}
_MARINARA_POSITION = {"before_char": 0, "after_char": 1, "at_depth": 2}

_BOOK_SETTINGS = ("description", "scan_depth", "token_budget", "entry_limit", "recursive", "max_depth",
                  "case_sensitive", "match_whole_words", "use_group_scoring")  # fmt: skip
_BOOK_DEFAULTS = LoreBook(id=0, name="")

_ST_ORDER = ("uid", "key", "keysecondary", "comment", "content", "constant", "selective", "selectiveLogic", "order",
             "position", "disable", "displayIndex", "addMemo", "group", "groupOverride", "groupWeight", "sticky",
             "cooldown", "delay", "probability", "depth", "useProbability", "role", "vectorized", "excludeRecursion",
             "preventRecursion", "delayUntilRecursion", "scanDepth", "caseSensitive", "matchWholeWords",
             "useGroupScoring", "automationId")  # fmt: skip
_CARD_ORDER = ("id", "keys", "secondary_keys", "comment", "content", "constant", "selective", "insertion_order",
               "enabled", "position", "use_regex", *(f"extensions.{k}" for k in (
                   "position", "exclude_recursion", "display_index", "probability", "useProbability", "depth",
                   "selectiveLogic", "group", "group_override", "group_weight", "prevent_recursion",
                   "delay_until_recursion", "scan_depth", "match_whole_words", "use_group_scoring", "case_sensitive",
                   "automation_id", "role", "vectorized", "sticky", "cooldown", "delay")))  # fmt: skip
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
_MARINARA_ORDER = ("id", "lorebookId", "folderId", "name", "content", "description", "keys", "secondaryKeys",
                   "enabled", "constant", "selective", "selectiveLogic", "probability", "scanDepth", "matchWholeWords",
                   "caseSensitive", "useRegex", "position", "depth", "order", "role", "sticky", "cooldown", "delay",
                   "group", "groupWeight", "preventRecursion", "excludeRecursion", "delayUntilRecursion", "sugo")  # fmt: skip
_MARINARA_BOOK_ORDER = ("id", "name", "description", "scanDepth", "tokenBudget", "recursiveScanning",
                        "maxRecursionDepth", "entryLimit", "sugo")  # fmt: skip


class LoreFileError(ValueError):
    """Why a lorebook file was refused, as one sentence for the user."""


@dataclass(frozen=True)
class LoreFile:
    format: str  # ST, CARD or MARINARA
    book: LoreBook  # id 0: the caller assigns ids when it stores the book
    entries: tuple[LoreEntry, ...]  # ids from the file (unique), book_id 0


# ---------------------------------------------------------------------------------------------
# Reading fields with errors that say where


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), "a number"
    )


class _Fields:
    def __init__(self, raw: dict[str, Any], where: str):
        self.raw, self.where = raw, where

    def fail(self, key: str, expected: str) -> LoreFileError:
        return LoreFileError(
            f"{self.where}: '{key}' must be {expected}, not {_type_name(self.raw.get(key))}."
        )

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
            raise LoreFileError(f"{self.where} has {len(value):,} characters of content; "
                                f"at most {MAX_CONTENT_CHARS:,} are accepted per entry.")  # fmt: skip
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
                raise LoreFileError(f"{self.where} has a keyword of {len(item):,} characters; "
                                    f"at most {MAX_KEY_CHARS:,} are accepted.")  # fmt: skip
            out.append(item)
        return tuple(out)

    def sugo(self) -> dict[str, Any]:
        value = self.raw.get("sugo")
        return value if isinstance(value, dict) else {}


def _role(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(ROLES):
        return ROLES[value]
    return value if value in ROLES else "system"


# ---------------------------------------------------------------------------------------------
# Keeping the file's spelling


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, types included (false is not 0, 1.0 is not 1)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _ordered(doc: dict[str, Any], order: Sequence[str], kept_order: Sequence[str] | None) -> dict[str, Any]:
    """`doc` in the file's key order if kept, else in the format's order; keys neither names (the
    file's unknown fields) keep their relative order at the end. Every key a canonical export
    writes must be in the format's order, so this agrees with what `_remember` checked."""
    rank = {k: i for i, k in enumerate(kept_order or order)}
    return dict(sorted(doc.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def _remember(
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


def _restore(
    canonical: dict[str, Any], kept: Any, order: Sequence[str], same: Callable[[dict], bool]
) -> dict:
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


def _entry_values(entry: LoreEntry) -> dict[str, Any]:
    return {f.name: getattr(entry, f.name) for f in fields(entry) if f.name not in ("id", "book_id", "extra")}


def _book_values(book: LoreBook) -> dict[str, Any]:
    return {"name": book.name, **{k: getattr(book, k) for k in _BOOK_SETTINGS}}


def _sugo_book(book: LoreBook, native: Sequence[str]) -> dict[str, Any]:
    """Book settings the format has no field for, when they differ from Sugo's defaults."""
    return {
        k: getattr(book, k)
        for k in _BOOK_SETTINGS
        if k not in native and getattr(book, k) != getattr(_BOOK_DEFAULTS, k)
    }


def _read_sugo_book(values: dict[str, Any], sugo: dict[str, Any], where: str) -> dict[str, Any]:
    """`values` (what the format says natively) completed by the file's `sugo` block, then by
    Sugo's defaults: every book setting, ready for `LoreBook(**values)`."""
    f = _Fields(sugo, f"{where} (sugo)")
    for key in _BOOK_SETTINGS:
        default = getattr(_BOOK_DEFAULTS, key)
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


def _kept(obj: LoreBook | LoreEntry, namespace: str) -> dict[str, Any]:
    value = obj.extra.get(namespace) if isinstance(obj.extra, dict) else None
    return value if isinstance(value, dict) else {}


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
}  # fmt: skip


def _kept_or_converted(entry: LoreEntry, namespace: str) -> dict[str, Any]:
    """The entry's kept fields for `namespace`; for an entry that came from the other SillyTavern
    format, its unmodelled SillyTavern fields renamed."""
    if kept := _kept(entry, namespace):
        return kept
    if namespace == ST:
        card = _kept(entry, CARD)
        return {st: card[f"extensions.{c}"] for st, c in _ST_CARD_EXTRAS.items() if f"extensions.{c}" in card}
    if namespace == CARD:
        st = _kept(entry, ST)
        return {f"extensions.{c}": st[k] for k, c in _ST_CARD_EXTRAS.items() if k in st}
    return {}


def _unique_ids(ids: list[int]) -> list[int]:
    seen: set[int] = set()
    out = []
    for i in ids:
        while i in seen:
            i += 1
        seen.add(i)
        out.append(i)
    return out


# ---------------------------------------------------------------------------------------------
# Decoding and detecting


def _decode(raw: bytes) -> Any:
    if len(raw) > MAX_FILE_BYTES:
        raise LoreFileError(
            f"The file is {len(raw) / 1024 / 1024:.1f} MB; lorebook files over 32 MB are refused."
        )
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LoreFileError("This is not a JSON lorebook file.") from err


def _check_count(n: int) -> None:
    if n > MAX_ENTRIES:
        raise LoreFileError(f"The lorebook has {n:,} entries; at most {MAX_ENTRIES:,} are accepted.")


def parse_lore_file(raw: bytes, *, name: str = "") -> LoreFile:
    """A lorebook from a file: SillyTavern World Info, a Marinara lorebook export, a bare
    `character_book` (or `{"spec": "lorebook_v3"}`), or a character card JSON carrying one.
    `name` (the file name without extension) names a World Info book, which has no name inside."""
    doc = _decode(raw)
    if not isinstance(doc, dict):
        raise LoreFileError("This is not a lorebook: the file holds no JSON object.")
    if doc.get("type") == MARINARA_TYPE:
        return parse_marinara_lorebook(doc)
    if isinstance(doc.get("entries"), dict):
        return parse_world_info(doc, name=name)
    if doc.get("spec") == "lorebook_v3" and isinstance(doc.get("data"), dict):
        return parse_character_book(doc["data"], name=name)
    if doc.get("spec") in ("chara_card_v2", "chara_card_v3"):
        data = doc.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("character_book"), dict):
            raise LoreFileError("This character card carries no lorebook (data.character_book).")
        return parse_character_book(data["character_book"], name=name)
    if isinstance(doc.get("entries"), list):
        return parse_character_book(doc, name=name)
    raise LoreFileError('This is not a lorebook: expected SillyTavern World Info ({"entries": {...}}), '
                        "a character card's character_book, or a Marinara lorebook export.")  # fmt: skip


def encode_file(doc: dict[str, Any]) -> bytes:
    """JSON as SillyTavern writes it (4-space indent, UTF-8, final newline)."""
    return (json.dumps(doc, indent=4, ensure_ascii=False) + "\n").encode()


# ---------------------------------------------------------------------------------------------
# SillyTavern World Info


def _st_values(raw: dict[str, Any], where: str) -> dict[str, Any]:
    f = _Fields(raw, where)
    logic = f.number("selectiveLogic", 0)
    position = f.maybe_number("position")
    return dict(
        title=f.text("comment"), content=f.content("content"), keys=f.keys("key"), secondary_keys=f.keys("keysecondary"),
        selective_logic=_ST_LOGIC[logic] if 0 <= logic < len(_ST_LOGIC) else "and_any",
        case_sensitive=f.maybe_flag("caseSensitive"), match_whole_words=f.maybe_flag("matchWholeWords"),
        constant=f.flag("constant", False), enabled=not f.flag("disable", False), order=f.number("order", 100),
        position=_ST_POSITION_IN.get(position if position is not None else 0, "before_char"),
        depth=f.number("depth", 4, 0), role=_role(raw.get("role")), probability=f.number("probability", 100, 0, 100),
        use_probability=f.flag("useProbability", True), scan_depth=_scan_depth(f.maybe_number("scanDepth")),
        sticky=f.number("sticky", 0, 0), cooldown=f.number("cooldown", 0, 0), delay=f.number("delay", 0, 0),
        group=f.text("group"), group_weight=f.number("groupWeight", 100, 0), group_override=f.flag("groupOverride", False),
        recursion=not f.flag("preventRecursion", False), exclude_recursion=f.flag("excludeRecursion", False),
        delay_until_recursion=f.level("delayUntilRecursion"), selective=f.flag("selective", True),
        use_group_scoring=f.maybe_flag("useGroupScoring"),
    )  # fmt: skip


def _scan_depth(value: int | None) -> int | None:
    return None if value is None else max(0, min(MAX_SCAN_DEPTH, value))


def _st_doc(e: LoreEntry) -> dict[str, Any]:
    position = _ST_POSITION.get(e.position, 0)
    return {
        "uid": e.id, "key": list(e.keys), "keysecondary": list(e.secondary_keys), "comment": e.title,
        "content": e.content, "constant": e.constant, "selective": e.selective,
        "selectiveLogic": _ST_LOGIC.index(e.selective_logic) if e.selective_logic in _ST_LOGIC else 0,
        "order": e.order, "position": position, "disable": not e.enabled, "group": e.group,
        "groupOverride": e.group_override, "groupWeight": e.group_weight, "sticky": e.sticky, "cooldown": e.cooldown,
        "delay": e.delay, "probability": e.probability, "depth": e.depth, "useProbability": e.use_probability,
        # SillyTavern writes no role for a system entry outside the chat.
        "role": None if e.role == "system" and position != 4 else _role_index(e.role),
        "excludeRecursion": e.exclude_recursion, "preventRecursion": not e.recursion,
        "delayUntilRecursion": e.delay_until_recursion or False, "scanDepth": e.scan_depth,
        "caseSensitive": e.case_sensitive, "matchWholeWords": e.match_whole_words, "useGroupScoring": e.use_group_scoring,
    }  # fmt: skip


def _role_index(role: str) -> int:
    return ROLES.index(role) if role in ROLES else 0


def parse_world_info(doc: dict[str, Any], *, name: str) -> LoreFile:
    """SillyTavern World Info: `{"entries": {"<uid>": {...}}, ...}`."""
    entries = doc.get("entries")
    if not isinstance(entries, dict):
        raise LoreFileError("This World Info file has no 'entries' object.")
    _check_count(len(entries))
    parsed, ids = [], []
    for index, (map_key, raw) in enumerate(entries.items()):
        where = f'Entry "{map_key}"'
        if not isinstance(raw, dict):
            raise LoreFileError(f"{where} must be an object, not {_type_name(raw)}.")
        values = _st_values(raw, where)
        uid = raw.get("uid")
        ids.append(
            uid
            if isinstance(uid, int) and not isinstance(uid, bool)
            else int(map_key)
            if str(map_key).isdigit()
            else index
        )
        parsed.append((raw, values))
    out = []
    for entry_id, (raw, values) in zip(_unique_ids(ids), parsed, strict=True):
        entry = LoreEntry(id=entry_id, book_id=0, **values)
        kept = _remember(raw, _st_doc(entry), _ST_ORDER, always=("uid",) if "uid" in raw else ())
        out.append(replace(entry, extra={ST: kept} if kept else {}))
    # World Info has no book settings: Sugo's own ride under "sugo"; anything else (originalData,
    # the card book the file came from) is kept as it is.
    book_raw = {k: v for k, v in doc.items() if k not in ("entries", "sugo")}
    sugo = doc.get("sugo")
    book = LoreBook(
        id=0, **_read_sugo_book({"name": name}, sugo if isinstance(sugo, dict) else {}, "The lorebook")
    )
    return LoreFile(ST, replace(book, extra={ST: book_raw} if book_raw else {}), tuple(out))


def export_world_info(book: LoreBook, entries: Sequence[LoreEntry]) -> dict[str, Any]:
    """SillyTavern World Info JSON for `book` (entries in the given order, keyed by uid)."""
    docs, ids = [], []
    for e in entries:
        values = _entry_values(e)
        doc = _restore(
            _st_doc(e), _kept_or_converted(e, ST), _ST_ORDER, lambda d, v=values: _st_values(d, "entry") == v
        )
        docs.append(doc)
        uid = doc.get("uid")
        ids.append(uid if isinstance(uid, int) and not isinstance(uid, bool) else e.id)
    out_entries = {}
    for uid, doc in zip(_unique_ids(ids), docs, strict=True):
        out_entries[str(uid)] = doc if doc.get("uid") == uid else (doc | {"uid": uid})
    out: dict[str, Any] = {"entries": out_entries, **_kept(book, ST)}
    if sugo := _sugo_book(book, ()):
        out["sugo"] = sugo
    return out


# ---------------------------------------------------------------------------------------------
# character_book (V2/V3 cards); SillyTavern keeps its own fields under `extensions`


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
    f = _Fields(flat, where)
    x = "extensions."
    logic = f.number(x + "selectiveLogic", 0)
    position = f.maybe_number(x + "position")
    if position is None:
        position = 1 if flat.get("position") == "after_char" else 0
    case_key = x + "case_sensitive" if x + "case_sensitive" in flat else "case_sensitive"
    return dict(
        title=f.text("comment") or f.text("name"), content=f.content("content"), keys=f.keys("keys"),
        secondary_keys=f.keys("secondary_keys"),
        selective_logic=_ST_LOGIC[logic] if 0 <= logic < len(_ST_LOGIC) else "and_any",
        case_sensitive=f.maybe_flag(case_key), match_whole_words=f.maybe_flag(x + "match_whole_words"),
        constant=f.flag("constant", False), enabled=f.flag("enabled", True), order=f.number("insertion_order", 100),
        position=_ST_POSITION_IN.get(position, "before_char"), depth=f.number(x + "depth", 4, 0),
        role=_role(flat.get(x + "role")), probability=f.number(x + "probability", 100, 0, 100),
        use_probability=f.flag(x + "useProbability", True), scan_depth=_scan_depth(f.maybe_number(x + "scan_depth")),
        sticky=f.number(x + "sticky", 0, 0), cooldown=f.number(x + "cooldown", 0, 0), delay=f.number(x + "delay", 0, 0),
        group=f.text(x + "group"), group_weight=f.number(x + "group_weight", 100, 0),
        group_override=f.flag(x + "group_override", False), recursion=not f.flag(x + "prevent_recursion", False),
        exclude_recursion=f.flag(x + "exclude_recursion", False), delay_until_recursion=f.level(x + "delay_until_recursion"),
        selective=f.flag("selective", True), use_group_scoring=f.maybe_flag(x + "use_group_scoring"),
    )  # fmt: skip


def _card_doc(e: LoreEntry) -> dict[str, Any]:
    position = _ST_POSITION.get(e.position, 0)
    x = "extensions."
    return {
        "id": e.id, "keys": list(e.keys), "secondary_keys": list(e.secondary_keys), "comment": e.title,
        "content": e.content, "constant": e.constant, "selective": e.selective, "insertion_order": e.order,
        "enabled": e.enabled, "position": "before_char" if position == 0 else "after_char",
        # SillyTavern writes use_regex: true and still reads keys as plain unless written /.../.
        "use_regex": True,
        x + "position": position, x + "exclude_recursion": e.exclude_recursion, x + "probability": e.probability,
        x + "useProbability": e.use_probability, x + "depth": e.depth,
        x + "selectiveLogic": _ST_LOGIC.index(e.selective_logic) if e.selective_logic in _ST_LOGIC else 0,
        x + "group": e.group, x + "group_override": e.group_override, x + "group_weight": e.group_weight,
        x + "prevent_recursion": not e.recursion, x + "delay_until_recursion": e.delay_until_recursion or False,
        x + "scan_depth": e.scan_depth, x + "match_whole_words": e.match_whole_words,
        x + "use_group_scoring": e.use_group_scoring, x + "case_sensitive": e.case_sensitive,
        x + "role": _role_index(e.role), x + "sticky": e.sticky, x + "cooldown": e.cooldown, x + "delay": e.delay,
    }  # fmt: skip


_CARD_NATIVE = ("description", "scan_depth", "token_budget", "recursive")


def _card_book_values(flat: dict[str, Any], name: str) -> dict[str, Any]:
    f = _Fields(flat, "The lorebook")
    values = {
        "name": f.text("name") or name, "description": f.text("description"),
        "scan_depth": f.number("scan_depth", _BOOK_DEFAULTS.scan_depth, 0, MAX_SCAN_DEPTH),
        "token_budget": f.number("token_budget", _BOOK_DEFAULTS.token_budget, 0),
        "recursive": f.flag("recursive_scanning", _BOOK_DEFAULTS.recursive),
    }  # fmt: skip
    sugo = flat.get("extensions.sugo")
    return _read_sugo_book(values, sugo if isinstance(sugo, dict) else {}, "The lorebook")


def _card_book_doc(book: LoreBook) -> dict[str, Any]:
    doc = {_ENTRIES: _ENTRIES, "name": book.name, "description": book.description, "scan_depth": book.scan_depth,
           "token_budget": book.token_budget, "recursive_scanning": book.recursive}  # fmt: skip
    # The V2 spec asks for a book-level extensions object; Sugo's settings go inside it.
    sugo = _sugo_book(book, _CARD_NATIVE)
    return doc | ({"extensions.sugo": sugo} if sugo else {"extensions": {}})


def parse_character_book(book: dict[str, Any], *, name: str = "") -> LoreFile:
    """A V2/V3 card's `data.character_book` (or a standalone one)."""
    raw_entries = book.get("entries")
    if not isinstance(raw_entries, list):
        raise LoreFileError("The lorebook's 'entries' must be a list.")
    _check_count(len(raw_entries))
    parsed, ids = [], []
    for index, raw in enumerate(raw_entries):
        where = f"Entry {index + 1}"
        if not isinstance(raw, dict):
            raise LoreFileError(f"{where} must be an object, not {_type_name(raw)}.")
        flat = _flatten(raw)
        parsed.append((flat, _card_values(flat, where)))
        raw_id = raw.get("id")
        ids.append(raw_id if isinstance(raw_id, int) and not isinstance(raw_id, bool) else index)
    out = []
    for entry_id, (flat, values) in zip(_unique_ids(ids), parsed, strict=True):
        entry = LoreEntry(id=entry_id, book_id=0, **values)
        kept = _remember(flat, _card_doc(entry), _CARD_ORDER, always=("id",) if "id" in flat else ())
        out.append(replace(entry, extra={CARD: kept} if kept else {}))
    flat_book = {
        (_ENTRIES if k == "entries" else k): v for k, v in _flatten(book | {"entries": _ENTRIES}).items()
    }
    lore_book = LoreBook(id=0, **_card_book_values(flat_book, name))
    kept = _remember(flat_book, _card_book_doc(lore_book), _CARD_BOOK_ORDER)
    return LoreFile(CARD, replace(lore_book, extra={CARD: kept} if kept else {}), tuple(out))


def export_character_book(book: LoreBook, entries: Sequence[LoreEntry]) -> dict[str, Any]:
    """The `character_book` object to embed in a V2/V3 card's `data`."""
    docs = []
    for e in entries:
        values = _entry_values(e)
        flat = _restore(
            _card_doc(e),
            _kept_or_converted(e, CARD),
            _CARD_ORDER,
            lambda d, v=values: _card_values(d, "entry") == v,
        )
        docs.append(_unflatten(flat))
    book_values = _book_values(book)
    flat = _restore(_card_book_doc(book), _kept(book, CARD), _CARD_BOOK_ORDER,
                    lambda d: _card_book_values(d, book.name) == book_values)  # fmt: skip
    return {
        ("entries" if k == _ENTRIES else k): (docs if k == _ENTRIES else v)
        for k, v in _unflatten(flat).items()
    }


# ---------------------------------------------------------------------------------------------
# Marinara Engine's lorebook envelope


def _wrap_regex(pattern: str, case_sensitive: bool) -> str:
    """A Marinara regex key (useRegex) in Sugo's `/pattern/flags` spelling."""
    return "/" + pattern.replace("/", "\\/") + "/" + ("" if case_sensitive else "i")


def _unwrap_regex(key: str) -> str:
    return key[1 : key.rindex("/")].replace("\\/", "/")


def _marinara_values(raw: dict[str, Any], where: str) -> dict[str, Any]:
    f = _Fields(raw, where)
    sugo = _Fields(f.sugo(), f"{where} (sugo)")
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
        title=f.text("name"), content=f.content("content"), keys=keys, secondary_keys=secondary,
        selective_logic=_MARINARA_LOGIC_IN.get(logic, "and_any"), case_sensitive=case_sensitive,
        match_whole_words=f.maybe_flag("matchWholeWords"), constant=f.flag("constant", False),
        enabled=f.flag("enabled", True), order=f.number("order", 100),
        position=position if position in POSITIONS else "before_char", depth=f.number("depth", 4, 0),
        role=_role(raw.get("role")), probability=100 if probability is None else max(0, min(100, probability)),
        use_probability=sugo.flag("use_probability", True), scan_depth=_scan_depth(f.maybe_number("scanDepth")),
        sticky=f.number("sticky", 0, 0), cooldown=f.number("cooldown", 0, 0), delay=f.number("delay", 0, 0),
        group=f.text("group"), group_weight=f.number("groupWeight", 100, 0),
        group_override=sugo.flag("group_override", False),
        # Without the field, Sugo's default (off), as the spec's Recursion switch; with it, its opposite.
        recursion="preventRecursion" in raw and not f.flag("preventRecursion", True),
        exclude_recursion=f.flag("excludeRecursion", False), delay_until_recursion=f.level("delayUntilRecursion"),
        selective=f.flag("selective", False), use_group_scoring=sugo.maybe_flag("use_group_scoring"),
    )  # fmt: skip


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
        except re.error:
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
        "id": str(e.id), "name": e.title, "content": e.content, "keys": keys, "secondaryKeys": secondary,
        "enabled": e.enabled, "constant": e.constant, "selective": e.selective,
        "selectiveLogic": _MARINARA_LOGIC.get(e.selective_logic, "and"), "probability": e.probability,
        "scanDepth": e.scan_depth, "matchWholeWords": whole_words, "caseSensitive": case_sensitive,
        "useRegex": use_regex, "position": _MARINARA_POSITION.get(e.position, 1 if "after" in e.position else 0),
        "depth": e.depth, "order": e.order, "role": e.role, "sticky": e.sticky, "cooldown": e.cooldown,
        "delay": e.delay, "group": e.group, "groupWeight": e.group_weight, "preventRecursion": not e.recursion,
        "excludeRecursion": e.exclude_recursion, "delayUntilRecursion": e.delay_until_recursion or False,
    }  # fmt: skip
    sugo = {"position": e.position if e.position not in _MARINARA_POSITION else None,
            "use_probability": e.use_probability if not e.use_probability else None,
            "group_override": e.group_override or None, "use_group_scoring": e.use_group_scoring}  # fmt: skip
    if sugo := {k: v for k, v in sugo.items() if v is not None}:
        doc["sugo"] = sugo
    return doc


_MARINARA_NATIVE = ("description", "scan_depth", "token_budget", "recursive", "max_depth", "entry_limit")


def _marinara_book_values(raw: dict[str, Any]) -> dict[str, Any]:
    f, d = _Fields(raw, "The lorebook"), _BOOK_DEFAULTS
    values = {
        "name": f.text("name"), "description": f.text("description"),
        "scan_depth": f.number("scanDepth", d.scan_depth, 0, MAX_SCAN_DEPTH),
        "token_budget": f.number("tokenBudget", d.token_budget, 0),
        "recursive": f.flag("recursiveScanning", d.recursive),
        "max_depth": f.number("maxRecursionDepth", d.max_depth, 1, 10),
        "entry_limit": f.number("entryLimit", d.entry_limit, 1, 1000),
    }  # fmt: skip
    return _read_sugo_book(values, f.sugo(), "The lorebook")


def _marinara_book_doc(book: LoreBook) -> dict[str, Any]:
    doc = {"name": book.name, "description": book.description, "scanDepth": book.scan_depth,
           "tokenBudget": book.token_budget, "recursiveScanning": book.recursive, "maxRecursionDepth": book.max_depth,
           "entryLimit": book.entry_limit}  # fmt: skip
    if sugo := _sugo_book(book, _MARINARA_NATIVE):
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
    _check_count(len(raw_entries))
    book = LoreBook(id=0, **_marinara_book_values(data["lorebook"]))
    parsed, ids = [], []
    for index, raw in enumerate(raw_entries):
        where = f"Entry {index + 1}"
        if not isinstance(raw, dict):
            raise LoreFileError(f"{where} must be an object, not {_type_name(raw)}.")
        parsed.append((raw, _marinara_values(raw, where)))
        raw_id = raw.get("id")
        numeric = isinstance(raw_id, int | str) and not isinstance(raw_id, bool) and str(raw_id).isdigit()
        ids.append(int(raw_id) if numeric else index)
    out = []
    for entry_id, (raw, values) in zip(_unique_ids(ids), parsed, strict=True):
        entry = LoreEntry(id=entry_id, book_id=0, **values)
        kept = _remember(
            raw, _marinara_doc(entry, book), _MARINARA_ORDER, always=("id",) if "id" in raw else ()
        )
        out.append(replace(entry, extra={MARINARA: kept} if kept else {}))
    kept = _remember(data["lorebook"], _marinara_book_doc(book), _MARINARA_BOOK_ORDER)
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
        values = _entry_values(e)
        docs.append(_restore(_marinara_doc(e, book), _kept(e, MARINARA), _MARINARA_ORDER,
                             lambda d, v=values: _marinara_values(d, "entry") == v))  # fmt: skip
    book_values = _book_values(book)
    row = _restore(_marinara_book_doc(book), _kept(book, MARINARA), _MARINARA_BOOK_ORDER,
                   lambda d: _marinara_book_values(d) == book_values)  # fmt: skip
    others = book.extra.get("marinara_data") if isinstance(book.extra, dict) else None
    data = {
        "lorebook": row,
        "entries": docs,
        **({"folders": []} | (others if isinstance(others, dict) else {})),
    }
    stamp = now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"type": MARINARA_TYPE, "version": 1, "exportedAt": stamp, "data": data}
