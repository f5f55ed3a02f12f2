"""SillyTavern group files (`data/<user>/groups/<id>.json`, `../shared/reference/groups-and-tools.md`
§1.1), read and written as pure data: members are character avatar keys (`Seraphina.png`), not names;
the activation strategy and the card mode are numbers. Before SillyTavern's PR #4805 a group chat's
metadata lived here (`chat_metadata` for the current chat, `past_metadata` by chat id); since, it is in
each chat file's header line. Both are read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.platform.core import jsonin

MAX_GROUP_BYTES = 2 * 1024 * 1024
MAX_MEMBERS = 100

# SillyTavern's numbers (group-chats.js) and Sugo's names for them.
STRATEGY_NAMES = {0: "natural", 1: "list", 2: "manual", 3: "pooled"}
STRATEGY_CODES = {name: code for code, name in STRATEGY_NAMES.items()}
CARD_MODE_NAMES = {0: "swap", 1: "join_unmuted", 2: "join"}
CARD_MODE_CODES = {name: code for code, name in CARD_MODE_NAMES.items()}


class GroupImportError(ValueError):
    """A group file Sugo cannot read; the message says why, for the user."""


@dataclass
class StGroup:
    name: str
    members: list[str]  # avatar keys, in the group's order
    disabled: set[str]  # muted members' avatar keys
    settings: dict[str, Any]  # ChatSettings fields the group sets
    chat_id: str  # the group's current chat (the old layout's `chat_metadata` is that chat's)
    chat_metadata: dict[str, Any] = field(default_factory=dict)
    past_metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)  # the file verbatim, for export

    def metadata_for(self, chat_file_id: str) -> dict[str, Any] | None:
        """The old layout's metadata of one chat (by the chat file's name without `.jsonl`)."""
        if chat_file_id in self.past_metadata:
            return self.past_metadata[chat_file_id]
        if chat_file_id == self.chat_id and self.chat_metadata:
            return self.chat_metadata
        return None


def avatar_stem(key: str) -> str:
    """`Seraphina.png` → `Seraphina`: the name a card imported from that file most likely has."""
    base = key.replace("\\", "/").rsplit("/", 1)[-1]
    return base.rsplit(".", 1)[0] if "." in base else base


def parse_group(raw: bytes) -> StGroup:
    if len(raw) > MAX_GROUP_BYTES:
        raise GroupImportError(f"This group file is larger than {MAX_GROUP_BYTES // (1024 * 1024)} MB.")
    try:
        data = jsonin.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise GroupImportError("This group file is not UTF-8 text.") from None
    except jsonin.JsonTooDeep as err:
        raise GroupImportError(f"This group file was refused: {err}.") from None
    except json.JSONDecodeError as err:
        raise GroupImportError(f"This group file is not valid JSON: {err.msg} (line {err.lineno}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("members"), list):
        raise GroupImportError(
            "This is not a SillyTavern group file: it has no `members` list (a group's .json from "
            "data/<user>/groups/)."
        )
    members = [m for m in data["members"] if isinstance(m, str) and m.strip()]
    if not members:
        raise GroupImportError("This group has no members.")
    if len(members) > MAX_MEMBERS:
        raise GroupImportError(f"This group has {len(members)} members; at most {MAX_MEMBERS} are taken.")
    disabled = {m for m in data.get("disabled_members") or [] if isinstance(m, str)}
    settings: dict[str, Any] = {}
    strategy = data.get("activation_strategy")
    if isinstance(strategy, int) and strategy in STRATEGY_NAMES:
        settings["reply_order"] = STRATEGY_NAMES[strategy]
    mode = data.get("generation_mode")
    if isinstance(mode, int) and mode in CARD_MODE_NAMES:
        settings["group_cards"] = CARD_MODE_NAMES[mode]
    for key, ours in (
        ("generation_mode_join_prefix", "group_join_prefix"),
        ("generation_mode_join_suffix", "group_join_suffix"),
    ):
        if isinstance(data.get(key), str):
            settings[ours] = data[key][:2000]
    if isinstance(data.get("allow_self_responses"), bool):
        settings["allow_self_responses"] = data["allow_self_responses"]
    name = data.get("name") if isinstance(data.get("name"), str) and data["name"].strip() else ""
    past = data.get("past_metadata")
    return StGroup(
        name=name.strip() or "Group: " + ", ".join(avatar_stem(m) for m in members),
        members=list(dict.fromkeys(members)),
        disabled=disabled,
        settings=settings,
        chat_id=str(data.get("chat_id") or ""),
        chat_metadata=data["chat_metadata"] if isinstance(data.get("chat_metadata"), dict) else {},
        past_metadata={k: v for k, v in past.items() if isinstance(v, dict)}
        if isinstance(past, dict)
        else {},
        raw=data,
    )


def group_file(
    *,
    raw: dict[str, Any],
    name: str,
    members: list[str],
    disabled: list[str],
    settings: dict[str, Any],
    chat_id: str,
) -> dict[str, Any]:
    """A group file for SillyTavern: what the group was imported with, brought up to date; the old
    layout's metadata keys left out (the chat's header carries it, as SillyTavern now writes)."""
    out = {k: v for k, v in raw.items() if k not in {"chat_metadata", "past_metadata"}}
    chats = [c for c in out.get("chats") or [] if isinstance(c, str)]
    out.update(
        {
            "id": str(out.get("id") or chat_id),
            "name": name,
            "members": members,
            "disabled_members": disabled,
            "activation_strategy": STRATEGY_CODES.get(settings.get("reply_order", "natural"), 0),
            "generation_mode": CARD_MODE_CODES.get(settings.get("group_cards", "join"), 2),
            "generation_mode_join_prefix": settings.get("group_join_prefix", ""),
            "generation_mode_join_suffix": settings.get("group_join_suffix", ""),
            "allow_self_responses": bool(settings.get("allow_self_responses", False)),
            "chat_id": chat_id,
            "chats": list(dict.fromkeys([*chats, chat_id])),
        }
    )
    out.setdefault("auto_mode_delay", max(5, int(settings.get("auto_mode_seconds") or 5)))
    out.setdefault("fav", False)
    out.setdefault("avatar_url", "")
    return out
