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

Each format has its own module (`format_st.py`, `format_card.py`, `format_marinara.py`) over
the shared machinery of `format_common.py`; this one detects which format a file is and
re-exports the formats, so callers import every lorebook file function from here.

Refusals raise `LoreFileError` with one sentence for the user, before anything is returned.
"""

from __future__ import annotations

import json
from typing import Any

from app.lore.core.format_card import export_character_book, parse_character_book
from app.lore.core.format_common import (
    CARD,
    MARINARA,
    MAX_CONTENT_CHARS,
    MAX_ENTRIES,
    MAX_FILE_BYTES,
    MAX_KEY_CHARS,
    MAX_KEYS,
    ST,
    LoreFile,
    LoreFileError,
)
from app.lore.core.format_marinara import MARINARA_TYPE, export_marinara_lorebook, parse_marinara_lorebook
from app.lore.core.format_st import export_world_info, parse_world_info
from app.platform.core import jsonin

__all__ = [
    "CARD",
    "MARINARA",
    "MARINARA_TYPE",
    "MAX_CONTENT_CHARS",
    "MAX_ENTRIES",
    "MAX_FILE_BYTES",
    "MAX_KEYS",
    "MAX_KEY_CHARS",
    "ST",
    "LoreFile",
    "LoreFileError",
    "encode_file",
    "export_character_book",
    "export_marinara_lorebook",
    "export_world_info",
    "parse_character_book",
    "parse_lore_file",
    "parse_marinara_lorebook",
    "parse_world_info",
]


def _decode(raw: bytes) -> Any:
    if len(raw) > MAX_FILE_BYTES:
        raise LoreFileError(
            f"The file is {len(raw) / 1024 / 1024:.1f} MB; lorebook files over 32 MB are refused."
        )
    try:
        return jsonin.loads(raw.decode("utf-8-sig"))
    except jsonin.JsonTooDeep as err:
        raise LoreFileError(f"This lorebook file was refused: {err}.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LoreFileError("This is not a JSON lorebook file.") from err


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
    raise LoreFileError(
        'This is not a lorebook: expected SillyTavern World Info ({"entries": {...}}), '
        "a character card's character_book, or a Marinara lorebook export."
    )


def encode_file(doc: dict[str, Any]) -> bytes:
    """JSON as SillyTavern writes it (4-space indent, UTF-8, final newline)."""
    return (json.dumps(doc, indent=4, ensure_ascii=False) + "\n").encode()
