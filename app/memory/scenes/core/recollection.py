"""Character recollections (issue 27; the manual's "Recordações dos personagens"), as pure functions: who
gets one, the helper's request, reading its answer, the four-consecutive-words rule and the keys that
tell when one is out of date. The shell is `app/memory/scenes/recollections.py`.

- Each character present in a closed scene gets one: the scene's participants among the chat's
  characters (every character when the scene is flagged "Check who was there"), never the narrator or
  the persona. A character whose card takes over half of the helper's room gets none.
- 50–100 words, first person, in the character's voice, from what it could know: the recap as it may
  read it and the scene's messages it saw. A recollection copying four consecutive words of a message
  its character could not see (and that no message it saw also says) is dropped; a fact retold in other
  words is guarded by the instructions only.
- Valid while the scene's recap (`summary_key`) and who saw what in it (`private_key`, core/access.py)
  are those it was written from.

Decided where the manual is silent: each recollection is its own request, after the recap (the manual
allows this when the card does not fit the recap's request; one path is simpler to keep right); an
answer over MAX_WORDS words is unusable (a recollection is never cut)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.memory.summaries.core.answers import Failure, answer_field

MAX_WORDS = 250
LEAK_WORDS = 4  # consecutive words copied from text the character could not see
ANSWER_TOKENS = 2048
MAX_CARD_CHARS = 6_000  # of the card shown to the helper

RECOLLECTION_PROMPT = """\
You write one character's own memory of a finished roleplay scene. Write it in first person, in the \
character's voice as their card describes them, 50 to 100 words: what they noticed, felt and will \
remember. Use only what this character could know: the messages below are everything they saw or \
heard. Do not mention anything else, and do not continue the story.
Answer with JSON only: {"recollection": "..."}"""


@dataclass(frozen=True)
class SeenLine:
    number: int
    name: str
    text: str


def summary_key(summary: str) -> str:
    return hashlib.sha256(summary.encode()).hexdigest()[:32]


def recollection_request(name: str, card: str, recap: str, seen: Sequence[SeenLine]) -> list[dict[str, str]]:
    lines = "\n".join(f"#{m.number} {m.name}: {' '.join(m.text.split())}" for m in seen)
    body = (
        f"Character: {name}\nTheir card:\n{card.strip()[:MAX_CARD_CHARS] or '(no description)'}\n\n"
        f"The scene's recap as {name} knows it:\n{recap.strip() or '(none)'}\n\n"
        f"What {name} saw and heard in the scene:\n{lines or '(nothing)'}"
    )
    return [{"role": "system", "content": RECOLLECTION_PROMPT}, {"role": "user", "content": body}]


def read_recollection(text: str, finish_reason: str | None, reasoning: str | None) -> str | Failure:
    value = answer_field(text, finish_reason, reasoning, "recollection")
    if isinstance(value, Failure):
        return value
    if not isinstance(value, str) or not value.strip():
        return Failure("empty", "The answer held no recollection.")
    words = value.split()
    if len(words) > MAX_WORDS:
        return Failure("too_long", f"The recollection was {len(words)} words long (at most {MAX_WORDS}).")
    return " ".join(value.split())


_WORD = re.compile(r"[\w']+")


def _words(text: str) -> list[str]:
    return [w.casefold().strip("'") for w in _WORD.findall(text) if w.strip("'")]


def _runs(text: str, n: int = LEAK_WORDS) -> set[tuple[str, ...]]:
    words = _words(text)
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def leaks(recollection: str, unseen: Iterable[str], seen: Iterable[str]) -> bool:
    """The recollection copies four consecutive words of a text its character could not see (a run a
    seen text also holds is not a leak: the character knows it)."""
    hidden: set[tuple[str, ...]] = set()
    for text in unseen:
        hidden |= _runs(text)
    if not hidden:
        return False
    for text in seen:
        hidden -= _runs(text)
    return bool(_runs(recollection) & hidden)


def present(
    participants: Sequence[str], check_who: bool, members: dict[int, str], narrator: int | None
) -> list[int]:
    """The characters who get a recollection of the scene, in the chat's order."""
    names = {" ".join(p.split()).casefold() for p in participants}
    return [
        i
        for i, name in members.items()
        if i != narrator and (check_who or " ".join(name.split()).casefold() in names)
    ]
