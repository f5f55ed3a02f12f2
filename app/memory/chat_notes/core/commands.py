"""The memory commands typed in the message box: /remember, /memory, /forget (and Portuguese aliases).

A message is a command only as a whole: stripped, the command word first, matched ignoring case
(and the accent's encoding: "/memória" typed with a combining accent is the same word). These
messages never become chat messages and never enter the summary (the service checks
`is_memory_command` before anything else).

Decisions (where the issue is silent):
- "/rememberx" or "/memoryfoo" is not ours (None): the word must end at whitespace or the end.
- "/remember" with nothing after it is still a remember command with an empty argument: `add_note`
  then refuses it with the sentence that shows how to write one.
- "/memory extra words" is still /memory: the words are kept in `argument` and ignored, so a stray word
  does not send the command to the model as a message.
- "/forget" takes a plain number ("#2" is accepted too); anything else is refused with how to say it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from app.chats.core.commands import SlashCommand
from app.memory.chat_notes.core.notes import NoteRefused

_KINDS: dict[str, Literal["remember", "memory", "forget"]] = {
    "remember": "remember",
    "lembrar": "remember",
    "memory": "memory",
    "memoria": "memory",
    "memória": "memory",
    "forget": "forget",
    "esquecer": "forget",
}
_COMMAND = re.compile(r"/(" + "|".join(_KINDS) + r")(?:\s+(.*))?", re.IGNORECASE | re.DOTALL)
_NUMBER = re.compile(r"#?([0-9]{1,9})")

FORGET_HOW = "Say which note to forget: /forget 2 (the numbers are in /memory)."

# What the `/` palette shows for each (app/web/commands.py registers them).
REMEMBER = SlashCommand(
    "remember", "/remember TEXT", "Keep a note in this chat's memory (also /lembrar).", ("lembrar",)
)
MEMORY = SlashCommand(
    "memory",
    "/memory",
    "Show this chat's memory and notes here, only to you (also /memoria).",
    ("memoria", "memória"),
)
FORGET = SlashCommand(
    "forget", "/forget N", "Delete note N from this chat's memory (also /esquecer).", ("esquecer",)
)


@dataclass(frozen=True)
class MemoryCommand:
    kind: Literal["remember", "memory", "forget"]
    argument: str = ""
    number: int | None = None


def parse_memory_command(text: str) -> MemoryCommand | None:
    """The memory command the whole message is, None if it is not one; NoteRefused for a bad /forget."""
    match = _COMMAND.fullmatch(unicodedata.normalize("NFC", text.strip()))
    if match is None:
        return None
    kind = _KINDS[match.group(1).lower()]
    argument = (match.group(2) or "").strip()
    if kind != "forget":
        return MemoryCommand(kind, argument)
    number = _NUMBER.fullmatch(argument)
    if number is None:
        raise NoteRefused(FORGET_HOW)
    return MemoryCommand(kind, argument, int(number.group(1)))


def is_memory_command(text: str) -> bool:
    """Whether the message is one of ours, even a /forget that will be refused."""
    try:
        return parse_memory_command(text) is not None
    except NoteRefused:
        return True
