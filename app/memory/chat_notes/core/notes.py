"""The user's notes in a chat's memory: adding and forgetting, with the limits named when refused.

Decisions (where the issue is silent):
- A note is one line: stripped, runs of whitespace (newlines too) become one space. Its length is
  counted after that and before redaction; a secret in it is then redacted, and the redacted note is
  held to NOTE_CHARS too (cut with "…"), since "[redacted]" can be longer than what it replaces.
- The checks run in this order: empty, too long, too many. A duplicate note is kept: the user asked.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.memory.chat_notes.core.limits import MAX_NOTES, NOTE_CHARS
from app.memory.chat_notes.core.text import cut, redact
from app.platform.core.errors import UserError


class NoteRefused(UserError):
    """A note the memory does not take; its str() is the sentence shown to the user (a UserError: the
    pages and the API answer it with that sentence as they answer any refusal)."""


def add_note(notes: Sequence[str], text: str) -> tuple[str, ...]:
    """The notes with `text` added at the end, or NoteRefused naming the limit it breaks."""
    note = " ".join(text.split())
    if not note:
        raise NoteRefused("Write the note after /remember, e.g. /remember she prefers tea.")
    if len(note) > NOTE_CHARS:
        raise NoteRefused(f"A note is at most {NOTE_CHARS} characters; this one has {len(note)}.")
    if len(notes) >= MAX_NOTES:
        raise NoteRefused(f"This chat keeps at most {MAX_NOTES} notes: forget one first (/forget N).")
    return (*notes, cut(redact(note), NOTE_CHARS))


def forget_note(notes: Sequence[str], number: int) -> tuple[str, ...]:
    """The notes without note `number` (1-based), or NoteRefused when there is no such note."""
    if not 1 <= number <= len(notes):
        if not notes:
            has = "has no notes yet"
        elif len(notes) == 1:
            has = "has 1 note"
        else:
            has = f"has {len(notes)} notes"
        raise NoteRefused(f"There is no note {number}: this chat {has}.")
    return (*notes[: number - 1], *notes[number:])
