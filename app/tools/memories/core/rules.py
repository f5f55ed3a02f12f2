"""The rules of long-term and short-term memory, as plain data: the limits, whether a short-term item
is still live, and how memories read in the prompt (each with its id, so the model can update it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

MAX_LONG_TERM_CHARS = 1_000
MAX_PER_CHARACTER = 200
MAX_GLOBAL = 200
MAX_SHORT_TERM_CHARS = 500
MAX_SHORT_TERM_ITEMS = 20
MAX_EXPIRY_REPLIES = 1_000
SCOPES = ("character", "global")


@dataclass(frozen=True)
class MemoryLine:
    id: int
    content: str


def limit_sentence(scope: str, character_name: str = "") -> str:
    """Why a new long-term memory was refused (the tool's error and the page's message alike)."""
    if scope == "global":
        return (
            f"The limit of {MAX_GLOBAL} memories for all characters is reached. "
            "Update or delete one before adding another."
        )
    who = f"{character_name} has" if character_name else "This character has"
    return f"{who} reached the limit of {MAX_PER_CHARACTER} memories. Update or delete one before adding another."


def short_term_limit_sentence() -> str:
    return (
        f"This chat's short-term memory holds at most {MAX_SHORT_TERM_ITEMS} items. "
        "Remove some before adding more."
    )


def aware(moment: datetime) -> datetime:
    """A moment read back from the database (naive, UTC) made comparable with an aware one."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def short_term_live(
    *, expires_after_replies: int | None, replies_seen: int, expires_at: datetime | None, now: datetime
) -> bool:
    """Whether a short-term item still belongs in the prompt: fewer replies seen than it was given,
    and its date (if any) not yet reached."""
    if expires_after_replies is not None and replies_seen >= expires_after_replies:
        return False
    return expires_at is None or aware(expires_at) > aware(now)


def memory_lines(lines: Sequence[MemoryLine]) -> str:
    """Memories as the prompt shows them, one a line with its id: "[#12] prefers tea"."""
    return "\n".join(f"[#{line.id}] {' '.join(line.content.split())}" for line in lines)


def global_block(lines: Sequence[MemoryLine]) -> str:
    return "Things to remember (for every character):\n" + memory_lines(lines)


def personal_block(name: str, lines: Sequence[MemoryLine]) -> str:
    return f"{name}'s memories of the user:\n" + memory_lines(lines)


def short_term_block(lines: Sequence[MemoryLine]) -> str:
    return "Short-term memory of this chat (working notes for the current arc):\n" + memory_lines(lines)


def preview(text: str, width: int = 80) -> str:
    """A memory's text on one short line, for a notice under the reply."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"
