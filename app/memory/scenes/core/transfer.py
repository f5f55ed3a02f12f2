"""Access memories for this chat, its pure parts: the search over scene summaries, and a chat's scenes
as a JSON file (written, and read back with every check done before anything is stored).

Decisions:
- Search folds case and accents ("cafe" finds "Café", "ÉTÉ" finds "été") and matches the query as one
  piece of text inside the summary; whitespace runs count as one space.
- The file names messages by number, as the chat view numbers them (1 = the chat's first message), not
  by id: ids mean nothing in another Sugo. Each scene also carries `messagesHash`, a hash of its messages
  (author and text, hidden ones included): a file made from another chat, or from this chat before its
  messages changed, is refused scene by scene with a sentence instead of pinning summaries on the wrong
  messages. A file without the hash (written by hand) is matched by the numbers alone.
- Reading refuses the whole file at the first problem (one sentence naming the scene): an import
  changes nothing unless every scene is right.
- States in a file: "written" and "deleted" come back as they were; anything else (waiting, writing,
  failed) comes back "waiting", its recap to be written again here. A "written" scene without text
  comes back "waiting"; a "deleted" one comes back without text.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.platform.core import jsonin

FILE_TYPE = "sugo_scenes"
FILE_VERSION = 1
MAX_SUMMARY_CHARS = 20_000  # a recap is 2–3 paragraphs; 20,000 characters (~5,000 tokens) is far past any
MAX_QUERY_CHARS = 200
MAX_IMPORT_BYTES = 8 * 1024 * 1024
MAX_IMPORT_SCENES = 5_000  # a 5,000-message chat makes a few hundred scenes
MAX_PARTICIPANTS = 100
MAX_NAME_CHARS = 200
MAX_TIMEFRAME_CHARS = 500
MAX_MESSAGE_NUMBER = 10_000_000
MAX_RECOLLECTIONS = 64  # per scene: one per character who was there
MAX_RECOLLECTION_CHARS = 4_000


@dataclass(frozen=True)
class FileRecollection:
    """A character recollection as the file carries it: the character by name (ids mean nothing in
    another Sugo); on import, one that names no single member of the chat is left out and counted."""

    character: str
    text: str = ""
    manual: bool = False
    deleted: bool = False


class SceneFileError(ValueError):
    """The file cannot be imported; the message is one sentence for the user."""


def fold(text: str) -> str:
    """Case and accents off, whitespace runs made one space: how search compares texts."""
    text = " ".join(text.split()).casefold()
    if text.isascii():
        return text
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))


def matches(summary: str, query: str) -> bool:
    """Whether the summary holds the query, case and accents aside; an empty query matches all."""
    return fold(query) in fold(summary)


def messages_hash(messages: Sequence[tuple[str, str]]) -> str:
    """A hash of a scene's messages, (author, text) each, in order."""
    digest = hashlib.sha256()
    for name, text in messages:
        digest.update(json.dumps([name, text], ensure_ascii=False).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


@dataclass(frozen=True)
class FileScene:
    """A scene as the file carries it: its first and last message numbers."""

    first: int
    last: int
    state: str = "waiting"
    summary: str = ""
    participants: tuple[str, ...] = ()
    timeframe: str = ""
    enabled: bool = True
    manual: bool = False
    check_who: bool = False
    messages_hash: str | None = None
    recollections: tuple[FileRecollection, ...] = ()


def write_file(*, chat_name: str, scenes: Sequence[FileScene], now: datetime) -> bytes:
    doc = {
        "type": FILE_TYPE,
        "version": FILE_VERSION,
        "exportedAt": now.isoformat().replace("+00:00", "Z"),
        "chat": {"name": chat_name},
        "scenes": [
            {
                "firstMessage": s.first,
                "lastMessage": s.last,
                "state": s.state,
                "summary": s.summary,
                "participants": list(s.participants),
                "timeframe": s.timeframe,
                "enabled": s.enabled,
                "manual": s.manual,
                "checkWho": s.check_who,
                "messagesHash": s.messages_hash,
                **(
                    {
                        "recollections": [
                            {
                                "character": r.character,
                                "text": r.text,
                                "manual": r.manual,
                                "deleted": r.deleted,
                            }
                            for r in s.recollections
                        ]
                    }
                    if s.recollections
                    else {}
                ),
            }
            for s in scenes
        ],
    }
    return json.dumps(doc, ensure_ascii=False, indent=1).encode()


def read_file(raw: bytes) -> list[FileScene]:
    """The file's scenes, oldest first; SceneFileError at the first thing wrong. Whether the numbers are
    this chat's messages is `check_against`'s question."""
    if len(raw) > MAX_IMPORT_BYTES:
        raise SceneFileError(
            f"The file is {len(raw) / 1024 / 1024:.1f} MB; scene files over {MAX_IMPORT_BYTES // 1024 // 1024} MB are refused."
        )
    try:
        doc = jsonin.loads(raw.decode("utf-8-sig"))
    except jsonin.JsonTooDeep as err:
        raise SceneFileError(f"This scene file was refused: {err}.") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise SceneFileError("This is not a JSON file.") from None
    if not isinstance(doc, dict) or doc.get("type") != FILE_TYPE or doc.get("version") != FILE_VERSION:
        raise SceneFileError(
            f'This is not a Sugo scenes file (expected type "{FILE_TYPE}", version {FILE_VERSION}).'
        )
    items = doc.get("scenes")
    if not isinstance(items, list):
        raise SceneFileError("The file has no list of scenes (scenes).")
    if len(items) > MAX_IMPORT_SCENES:
        raise SceneFileError(
            f"The file has {len(items)} scenes; at most {MAX_IMPORT_SCENES} are imported at once."
        )
    scenes = [_scene(k, item) for k, item in enumerate(items, 1)]
    scenes.sort(key=lambda s: s.first)
    for before, after in zip(scenes, scenes[1:], strict=False):
        if after.first <= before.last:
            raise SceneFileError(
                f"The scenes of messages {before.first}–{before.last} and {after.first}–{after.last} overlap: "
                "a message belongs to one scene."
            )
    return scenes


def _int(k: int, item: dict, key: str) -> int:
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_MESSAGE_NUMBER:
        raise SceneFileError(f"Scene {k} has no valid {key} (a message number from 1).")
    return value


def _text(k: int, item: dict, key: str, limit: int) -> str:
    value = item.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise SceneFileError(f"Scene {k}'s {key} is not text.")
    if len(value) > limit:
        raise SceneFileError(
            f"Scene {k}'s {key} has {len(value):,} characters; at most {limit:,} are allowed."
        )
    return value.strip()


def _flag(k: int, item: dict, key: str, default: bool) -> bool:
    value = item.get(key, default)
    if not isinstance(value, bool):
        raise SceneFileError(f"Scene {k}'s {key} is not true or false.")
    return value


def _scene(k: int, item: Any) -> FileScene:
    if not isinstance(item, dict):
        raise SceneFileError(f"Scene {k} is not an object.")
    first, last = _int(k, item, "firstMessage"), _int(k, item, "lastMessage")
    if first > last:
        raise SceneFileError(f"Scene {k} ends (message {last}) before it starts (message {first}).")
    summary = _text(k, item, "summary", MAX_SUMMARY_CHARS)
    timeframe = _text(k, item, "timeframe", MAX_TIMEFRAME_CHARS)
    names = item.get("participants", [])
    if names is None:
        names = []
    if (
        not isinstance(names, list)
        or len(names) > MAX_PARTICIPANTS
        or not all(isinstance(n, str) and n.strip() and len(n) <= MAX_NAME_CHARS for n in names)
    ):
        raise SceneFileError(
            f"Scene {k}'s participants must be a list of at most {MAX_PARTICIPANTS} names of up to {MAX_NAME_CHARS} characters."
        )
    state = item.get("state", "waiting")
    if not isinstance(state, str):
        raise SceneFileError(f"Scene {k}'s state is not text.")
    digest = item.get("messagesHash")
    if digest is not None and not (isinstance(digest, str) and len(digest) == 64):
        raise SceneFileError(f"Scene {k}'s messagesHash is damaged.")
    manual = _flag(k, item, "manual", False)
    if state == "deleted":
        summary, manual = "", False
    elif state != "written" or not summary:
        state = "waiting"
    if manual and not summary:
        manual = False
    return FileScene(
        first=first,
        last=last,
        state=state,
        summary=summary,
        participants=tuple(n.strip() for n in names),
        timeframe=timeframe,
        enabled=_flag(k, item, "enabled", True),
        manual=manual,
        check_who=_flag(k, item, "checkWho", False),
        messages_hash=digest,
        recollections=_recollections(k, item.get("recollections")),
    )


def _recollections(k: int, value: Any) -> tuple[FileRecollection, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_RECOLLECTIONS:
        raise SceneFileError(f"Scene {k}'s recollections must be a list of at most {MAX_RECOLLECTIONS}.")
    out = []
    for item in value:
        if not isinstance(item, dict):
            raise SceneFileError(f"Scene {k} has a recollection that is not an object.")
        name = item.get("character")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
            raise SceneFileError(f"Scene {k} has a recollection without a character's name.")
        text = _text(k, item, "text", MAX_RECOLLECTION_CHARS)
        out.append(
            FileRecollection(
                name.strip(),
                " ".join(text.split()),
                _flag(k, item, "manual", False),
                _flag(k, item, "deleted", False),
            )
        )
    return tuple(out)


def check_against(scenes: Sequence[FileScene], messages: Sequence[tuple[str, str]]) -> None:
    """Refuse the file unless each scene's messages are this chat's: `messages` is the chat's (author,
    text), numbered from 1 as the chat view numbers them."""
    count = len(messages)
    for s in scenes:
        if s.last > count:
            have = "no messages" if count == 0 else f"{count} message{'s' if count != 1 else ''}"
            raise SceneFileError(
                f"The scene of messages {s.first}–{s.last} is not in this chat: it has {have}."
            )
        if s.messages_hash is not None and s.messages_hash != messages_hash(messages[s.first - 1 : s.last]):
            raise SceneFileError(
                f"The scene of messages {s.first}–{s.last} was made from other messages than this chat's "
                "(another chat, or these messages changed since the export)."
            )
