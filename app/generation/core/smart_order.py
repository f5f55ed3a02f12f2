"""The "smart" turn-taking order of a group chat (issue 27), as pure functions: the chat's helper
model is asked who speaks next, with the members and the newest messages; an `@Name` in the user's
message picks that member without asking; when the helper fails or names nobody in the group, the
member after the last speaker answers (round robin). One member answers each send.

The answer is read by the one reader of helper answers (app/memory/summaries/core/answers.py): its
reasoning left out, a cut-off, empty or thinking-only answer a failure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.chats.core.turns import Member
from app.memory.summaries.core.answers import Failure, find_object, loose_field, precheck

# What the helper reads: the newest messages, each cut, and each member's card opening.
CONTEXT_MESSAGES = 12
MESSAGE_CHARS = 600
CARD_CHARS = 300
ANSWER_TOKENS = 200
_MENTION = re.compile(r"(?<![\w@])@")
_WORD_CHAR = re.compile(r"\w")

SYSTEM = (
    "You decide who speaks next in a group roleplay chat. Pick the one member whose reply would "
    "follow most naturally from the last messages: someone addressed, someone whose character would "
    "react, not the member who just spoke unless they were asked something. Answer with JSON only: "
    '{"next": "<member name>"}.'
)


@dataclass(frozen=True)
class Line:
    """One message as the helper reads it."""

    name: str
    text: str


def mentioned(members: Sequence[Member], text: str) -> int | None:
    """The member an `@Name` in the user's message asks for (the longest name that fits, so "@Mary
    Ann" is not "@Mary"); muted members too: asking by name is how they answer."""
    lowered = (text or "").lower()
    longest_first = sorted(members, key=lambda m: -len(m.name))
    for at in _MENTION.finditer(lowered):
        rest = lowered[at.end() :]
        for member in longest_first:
            name = member.name.lower()
            if name and rest.startswith(name) and not _WORD_CHAR.match(rest[len(name) : len(name) + 1]):
                return member.id
    return None


def round_robin(members: Sequence[Member], last_speaker: int | None) -> int | None:
    """The unmuted member after the last speaker, in the group's order (the first when nobody spoke)."""
    active = [m for m in members if not m.muted] or list(members)
    if not active:
        return None
    ids = [m.id for m in members]
    if last_speaker in ids:
        start = ids.index(last_speaker)
        for step in range(1, len(members) + 1):
            candidate = members[(start + step) % len(members)]
            if candidate in active:
                return candidate.id
    return active[0].id


def request(members: Sequence[Member], cards: dict[int, str], lines: Sequence[Line]) -> list[dict]:
    """The helper's messages: who is in the group (muted members left out), then the chat's end."""
    roster = "\n".join(
        f"- {m.name}: {cards.get(m.id, '')[:CARD_CHARS].strip()}".rstrip(": ") for m in members if not m.muted
    )
    chat = "\n\n".join(f"{line.name}: {line.text[:MESSAGE_CHARS]}" for line in lines[-CONTEXT_MESSAGES:])
    return [
        {"role": "system", "content": f"{SYSTEM}\n\nMembers:\n{roster}"},
        {"role": "user", "content": f"The chat so far:\n\n{chat or '(no messages yet)'}\n\nWho speaks next?"},
    ]


def read_choice(
    answer: str, finish_reason: str | None, members: Sequence[Member], *, reasoning: str = ""
) -> int | Failure:
    """The member the helper named (by name, matched case-insensitively; muted members are not
    offered and not taken)."""
    text = precheck(answer, finish_reason, reasoning)
    if isinstance(text, Failure):
        return text
    found = find_object(text, "next")
    if isinstance(found, Failure):
        return found
    name = loose_field(found, "next")
    if not isinstance(name, str) or not name.strip():
        return Failure("garbage", "The answer names nobody.")
    for member in members:
        if not member.muted and member.name.lower() == name.strip().lower():
            return member.id
    return Failure("garbage", "The answer names someone who is not an unmuted member of the group.")
