"""A chat's settings in a SillyTavern file's `chat_metadata`, written and read back. Pure functions.

SillyTavern reads its Author's Note from `note_*` keys and the chat's lorebook from `world_info`
(one book name); everything else Sugo keeps per chat goes under a `sugo` key, which wins over the
SillyTavern keys on import when present.

Sugo's context note → SillyTavern's Author's Note:
- text → `note_prompt`
- depth (messages above the newest) → `note_depth`, the same count
- role system / user / assistant → `note_role` 0 / 1 / 2
- always among the messages → `note_position` 1 (IN_CHAT); 0 (after the story string) and 2
  (before it) have no place in Sugo, so such a note is kept at its depth with a note to the user
- sent every reply → `note_interval` 1; another interval is noted on import (Sugo sends it always)

The chat's background → `custom_background`, SillyTavern's CSS value naming a file
(`url("backgrounds/Forest.jpg")`), read whether or not the `sugo` key is there: Sugo's own ids mean
nothing on another install, a file name does. A chat set to no background says so under `sugo`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from app.backgrounds.core.choice import NONE, st_css, st_file_name
from app.chats.models import CHAT_MODES
from app.chats.settings import ChatSettings

SUGO_KEY = "sugo"
SUGO_VERSION = 1
ROLE_CODES = {"system": 0, "user": 1, "assistant": 2}
ROLE_NAMES = {code: name for name, code in ROLE_CODES.items()}
NOTE_IN_CHAT = 1
BACKGROUND_KEY = "custom_background"
# How many lorebook names a file may ask for: more is not a real chat's list.
MAX_LOREBOOKS = 100
MAX_BOOK_NAME = 200
MAX_CHAT_NAME = 200
MAX_NOTE = ChatSettings.model_fields["context_note"].metadata[0].max_length

# The `sugo` key's layout: (path in the key, ChatSettings field).
_SUGO_FIELDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("recent_message_limit",), "recent_message_limit"),
    (("recall", "enabled"), "memory_recall"),
    (("recall", "chunking_paused"), "memory_chunking_paused"),
    (("recall", "embedding_model"), "builtin_embedding"),
    (("recall", "dense_weight"), "recall_dense_weight"),
    (("recall", "neighbour_share"), "recall_neighbour_share"),
    (("context_note", "text"), "context_note"),
    (("context_note", "depth"), "context_note_depth"),
    (("context_note", "role"), "context_note_role"),
    (("time_awareness",), "time_awareness"),
    (("chat_memory", "notes_in_prompt"), "chat_notes_in_prompt"),
    (("chat_memory", "summary_in_prompt"), "chat_memory_in_prompt"),
    (("reply_order",), "reply_order"),
    (("allow_self_responses",), "allow_self_responses"),
    (("group", "cards"), "group_cards"),
    (("group", "join_prefix"), "group_join_prefix"),
    (("group", "join_suffix"), "group_join_suffix"),
    (("group", "scenario"), "group_scenario"),
    (("group", "merged"), "group_merged"),
    (("lore_token_budget",), "lore_token_budget"),
    (("generation", "temperature"), "temperature"),
    (("generation", "top_p"), "top_p"),
    (("generation", "max_tokens"), "max_tokens"),
    (("generation", "context_size"), "context_size"),
    (("generation", "stop"), "stop"),
    (("summaries", "hide_messages"), "summary_hide_messages"),
    (("summaries", "collapse_hidden"), "summary_collapse_hidden"),
    (("summaries", "recent_tail"), "summary_recent_tail"),
)


@dataclass
class ChatMetadata:
    """What a file's chat_metadata asks of the imported chat; `notes` say what was left out."""

    settings: dict[str, Any] = field(default_factory=dict)  # ChatSettings fields, each valid
    lorebooks: list[str] = field(default_factory=list)
    mode: str | None = None
    name: str | None = None
    notes: list[str] = field(default_factory=list)
    background_file: str | None = None  # the file SillyTavern's custom_background names


def chat_metadata(
    settings: ChatSettings,
    *,
    name: str,
    mode: str,
    lorebooks: Sequence[str],
    background_file: str | None = None,
) -> dict[str, Any]:
    """The chat_metadata keys Sugo writes: SillyTavern's Author's Note, chat lorebook and background
    (`background_file`: the file name of the chat's own choice), and `sugo`."""
    sugo: dict[str, Any] = {"version": SUGO_VERSION, "name": name, "mode": mode, "lorebooks": list(lorebooks)}
    for path, name in _SUGO_FIELDS:
        target = sugo
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = getattr(settings, name)
    if settings.background == NONE:
        sugo["background"] = NONE
    meta: dict[str, Any] = {
        "note_prompt": settings.context_note,
        "note_interval": 1,
        "note_position": NOTE_IN_CHAT,
        "note_depth": settings.context_note_depth,
        "note_role": ROLE_CODES[settings.context_note_role],
    }
    if lorebooks:
        meta["world_info"] = lorebooks[0]
    if background_file:
        meta[BACKGROUND_KEY] = st_css(background_file)
    meta[SUGO_KEY] = sugo
    return meta


def merge_metadata(original: Mapping[str, Any], ours: Mapping[str, Any]) -> dict[str, Any]:
    """An imported file's chat_metadata with Sugo's keys written over it; keys SillyTavern wrote
    that Sugo does not model (variables, timedWorldInfo...) stay. A chat lorebook no longer attached
    is dropped, so SillyTavern does not attach it again; so is a background no longer chosen. A
    background that names the file the original named keeps the original's spelling."""
    merged = {**original, **ours}
    if "world_info" not in ours:
        merged.pop("world_info", None)
    if BACKGROUND_KEY not in ours:
        merged.pop(BACKGROUND_KEY, None)
    elif (st_file_name(original.get(BACKGROUND_KEY)) or "").lower() == (
        st_file_name(ours[BACKGROUND_KEY]) or ""
    ).lower():  # names are matched without case on import (a Windows folder's), so here too
        merged[BACKGROUND_KEY] = original[BACKGROUND_KEY]
    return merged


def _field_ok(name: str, value: Any) -> bool:
    # Strict: a file's "true" is not a switch and 4.5 is not a depth.
    try:
        ChatSettings.model_validate({name: value}, strict=True)
    except ValidationError:
        return False
    return True


def _read_sugo(sugo: Mapping[str, Any], out: ChatMetadata) -> None:
    ignored = []
    for path, name in _SUGO_FIELDS:
        value: Any = sugo
        for key in path:
            value = value.get(key, ...) if isinstance(value, Mapping) else ...
        if value is ...:
            continue
        if _field_ok(name, value):
            out.settings[name] = value
        else:
            ignored.append(".".join(path))
    if ignored:
        out.notes.append(
            f"Chat settings in the file that Sugo could not use were left at their defaults: {', '.join(ignored)}."
        )
    name = sugo.get("name")
    if isinstance(name, str) and name.strip():
        out.name = name.strip()[:MAX_CHAT_NAME]
    mode = sugo.get("mode")
    if mode in CHAT_MODES:
        out.mode = mode
    elif mode is not None:
        out.notes.append("The chat mode in the file is unknown; the chat starts in Roleplay.")
    books = sugo.get("lorebooks")
    if books is not None:
        out.lorebooks = _book_names(books, out)
    if sugo.get("background") == NONE:
        out.settings["background"] = NONE


def _book_names(value: Any, out: ChatMetadata) -> list[str]:
    items = value if isinstance(value, list) else [value]
    names = []
    for item in items[:MAX_LOREBOOKS]:
        if isinstance(item, str) and item.strip() and len(item) <= MAX_BOOK_NAME:
            names.append(item.strip())
        else:
            out.notes.append("A lorebook name in the file was not a usable name and was left out.")
    if len(items) > MAX_LOREBOOKS:
        out.notes.append(f"Only the first {MAX_LOREBOOKS} lorebooks in the file were read.")
    return list(dict.fromkeys(names))


def _read_author_note(meta: Mapping[str, Any], out: ChatMetadata) -> None:
    text = meta.get("note_prompt")
    if text is None or text == "":
        return
    if not isinstance(text, str) or not _field_ok("context_note", text):
        out.notes.append(
            f"The Author's Note in the file was left out: it must be text of at most {MAX_NOTE} characters."
        )
        return
    out.settings["context_note"] = text
    depth = meta.get("note_depth")
    if depth is not None:
        if _field_ok("context_note_depth", depth):
            out.settings["context_note_depth"] = depth
        else:
            out.notes.append(
                "The Author's Note depth in the file is not a whole number from 0 to 100; the note sits at depth 4."
            )
    role = meta.get("note_role")
    if role is not None:
        if not isinstance(role, bool) and role in ROLE_NAMES:
            out.settings["context_note_role"] = ROLE_NAMES[role]
        else:
            out.notes.append("The Author's Note role in the file is unknown; the note is sent as system.")
    position = meta.get("note_position")
    if position is not None and position != NOTE_IN_CHAT:
        out.notes.append(
            "In SillyTavern the Author's Note sat in the prompt's top part; in Sugo it sits among the "
            "recent messages at its depth."
        )
    interval = meta.get("note_interval")
    if interval is not None and interval != 1:
        out.notes.append(
            "SillyTavern sent the Author's Note only every few messages; Sugo sends it with every reply."
        )


def read_metadata(meta: Any) -> ChatMetadata:
    """What a file's chat_metadata asks for. Never raises: bad values are left out with a note."""
    out = ChatMetadata()
    if not isinstance(meta, Mapping):
        if meta is not None:
            out.notes.append(
                "The file's chat_metadata is not an object; the chat starts with default settings."
            )
        return out
    if meta.get(BACKGROUND_KEY) not in (None, ""):
        out.background_file = st_file_name(meta[BACKGROUND_KEY])
        if out.background_file is None:
            out.notes.append(
                "The chat's SillyTavern background in the file names no file; the chat has none."
            )
    sugo = meta.get(SUGO_KEY)
    if isinstance(sugo, Mapping):
        _read_sugo(sugo, out)
        return out
    if sugo is not None:
        out.notes.append("The file's Sugo settings are not readable; its SillyTavern settings were used.")
    _read_author_note(meta, out)
    if "world_info" in meta and meta["world_info"] not in (None, ""):
        out.lorebooks = _book_names(meta["world_info"], out)
    return out
