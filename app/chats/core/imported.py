"""What an imported chat is called, and the sentence that says what arrived. Pure functions.

Decisions:
- The chat takes the file's name: SillyTavern names a chat by its file ("Aria - 2024-05-01@21h13m.jsonl"),
  and a file the user renamed carries the name they chose. The extension comes off (one: ".jsonl",
  ".json" or ".txt"), as do a folder part an API client may send, control and bidirectional-override
  characters (a name is one line, shown as written), and runs of spaces; at most MAX_CHAT_NAME characters.
- A file Sugo exported carries the chat's own name, which its file name can only approximate (a download
  name drops ":" and "/"): when the file is still named as Sugo named it, the name inside wins, so a chat
  exported and imported again keeps its name exactly. With no usable file name, the name inside is
  taken, then "<character> – imported <date time>".
- A name another chat already has gets " (2)", " (3)"…, as a file manager does: two imports of one file
  are told apart in the chat list.
- "Imported 160 messages (3 summaries, 2 lorebooks attached)." counts the messages written (the refresh
  marks of a Sugo file are not messages), the summaries the chat got (Chat Summary entries, or day and
  week summaries) and the lorebooks attached; a part that is zero is left out.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection

from app.platform.core.downloads import safe_stem

MAX_CHAT_NAME = 200
_EXTENSIONS = (".jsonl", ".json", ".txt")
# Format characters that reorder or hide text: a name shown in the chat list must read as it is stored.
_HIDDEN = {
    "\u200b",
    "\u200e",
    "\u200f",
    "\u2028",
    "\u2029",
    "\ufeff",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
}


def clean_name(text: str | None) -> str:
    """`text` as one line: control and hidden format characters out (a line break becomes a space),
    runs of spaces made one, at most MAX_CHAT_NAME characters."""
    if not text:
        return ""
    kept = "".join(
        " " if ch.isspace() else "" if unicodedata.category(ch) == "Cc" or ch in _HIDDEN else ch
        for ch in text
    )
    name = " ".join(kept.split())
    if len(name) > MAX_CHAT_NAME:
        name = name[: MAX_CHAT_NAME - 1].rstrip() + "…"
    return name


def name_from_file(file_name: str | None) -> str:
    """The chat name a file's name gives: its last path part without the extension, cleaned."""
    if not file_name:
        return ""
    # A browser writes a multipart file name with line breaks and quotes escaped (the HTML standard's
    # %0A, %0D, %22); nothing else is escaped, so nothing else is read back.
    for escaped, ch in (("%0A", "\n"), ("%0D", "\r"), ("%22", '"')):
        file_name = file_name.replace(escaped, ch).replace(escaped.lower(), ch)
    base = file_name.replace("\\", "/").rsplit("/", 1)[-1]
    lower = base.lower()
    for ext in _EXTENSIONS:
        if lower.endswith(ext) and len(base) > len(ext):
            base = base[: -len(ext)]
            break
    return clean_name(base)


def choose_name(file_name: str | None, stored: str | None, fallback: str) -> str:
    """The imported chat's name, from the file's name and the name stored inside the file."""
    from_file, inside = name_from_file(file_name), clean_name(stored)
    if inside and (not from_file or from_file == safe_stem(inside, "")):
        return inside
    return from_file or inside or clean_name(fallback)


def unique_name(name: str, taken: Collection[str]) -> str:
    """`name`, or `name (2)`, `name (3)`… when another chat has it."""
    if name not in taken:
        return name
    n = 2
    while True:
        suffix = f" ({n})"
        candidate = name[: MAX_CHAT_NAME - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def import_sentence(messages: int, summaries: int, lorebooks: int) -> str:
    """ "Imported 160 messages (3 summaries, 2 lorebooks attached)."; zero parts left out."""
    extra = []
    if summaries:
        extra.append(_count(summaries, "summary", "summaries"))
    if lorebooks:
        extra.append(_count(lorebooks, "lorebook", "lorebooks") + " attached")
    return (
        f"Imported {_count(messages, 'message', 'messages')}"
        + (f" ({', '.join(extra)})" if extra else "")
        + "."
    )
