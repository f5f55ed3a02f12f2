"""Who answers in a group chat, as SillyTavern's four activation strategies decide it (issue 27;
`../shared/reference/groups-and-tools.md` §1.3), as pure functions: the members, the history's authors
and the activation text in, the ids of the characters who reply, in order, out. Randomness comes from
the `random.Random` the caller passes, so a seeded one gives the same turn every time.

- natural: members named in the activation text first (word by word, the first member whose name holds
  the word), then each member by a talkativeness roll (shuffled first), then one at random when nobody
  was drawn; the last speaker is left out when a character spoke last and no user input started the
  turn (auto mode, an empty send), unless self-responses are allowed.
- list: every member once, in the group's order.
- pooled: one member who has not spoken since the user's last message; when all have, one at random
  who did not speak last.
- manual: nobody on the user's input (the message is posted, replies come from a member's button or
  /trigger); one member at random in auto mode or on an empty send.

A muted member never answers by itself: it is left out of every strategy here, mentions included, as in
SillyTavern, and answers only when asked for by name through the caller's forced speaker.

Decided where SillyTavern's code and its description part: a member answers a talkativeness roll when
the roll is below its talkativeness (0 never, 1 always; SillyTavern compares `talkativeness >= roll`,
the same but at exactly equal values); when nobody was drawn, the pick avoids the banned last speaker
while anyone else can answer, so "no self-responses" holds whenever it can.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.characters.core.cards import DEFAULT_TALKATIVENESS

_WORD = re.compile(r"\b\w+\b")


class Strategy(StrEnum):
    NATURAL = "natural"
    LIST = "list"
    POOLED = "pooled"
    MANUAL = "manual"


@dataclass(frozen=True)
class Member:
    """A character of the group, in the group's order."""

    id: int
    name: str
    talkativeness: float = DEFAULT_TALKATIVENESS
    muted: bool = False


@dataclass(frozen=True)
class Spoken:
    """One message of the history as turn-taking reads it: a character's (its id) or the user's (None)."""

    character_id: int | None


@dataclass(frozen=True)
class Turn:
    """What started this turn: the text members may be named in (the user's message, or in auto mode
    and on an empty send the last message), and whether the user's input started it."""

    text: str
    user_input: bool


def words(text: str) -> list[str]:
    """The activation text's words, lower-cased, in order."""
    return [w.lower() for w in _WORD.findall(text)]


def _named(member: Member, word: str) -> bool:
    return word in words(member.name)


def last_character(history: Sequence[Spoken]) -> int | None:
    """The author of the last message when a character wrote it; None when the user did (or no one)."""
    return history[-1].character_id if history else None


def natural_order(
    members: Sequence[Member],
    history: Sequence[Spoken],
    turn: Turn,
    rng: random.Random,
    *,
    allow_self_responses: bool = False,
) -> list[int]:
    active = [m for m in members if not m.muted]
    banned = None if allow_self_responses or turn.user_input else last_character(history)
    drawn: list[int] = []
    for word in words(turn.text):
        for member in active:
            if member.id != banned and _named(member, word):
                drawn.append(member.id)
                break
    shuffled = list(active)
    rng.shuffle(shuffled)
    for member in shuffled:
        roll = rng.random()
        if member.id != banned and roll < member.talkativeness:
            drawn.append(member.id)
    if not drawn and active:
        allowed = [m for m in active if m.id != banned] or active
        chatty = [m for m in allowed if m.talkativeness > 0] or allowed
        drawn.append(rng.choice(chatty).id)
    return list(dict.fromkeys(drawn))


def list_order(members: Sequence[Member]) -> list[int]:
    return [m.id for m in members if not m.muted]


def pooled_order(members: Sequence[Member], history: Sequence[Spoken], rng: random.Random) -> list[int]:
    active = [m for m in members if not m.muted]
    if not active:
        return []
    spoken: set[int] = set()
    for message in reversed(history):
        if message.character_id is None:
            break
        spoken.add(message.character_id)
    waiting = [m for m in active if m.id not in spoken]
    if not waiting:
        last = last_character(history)
        waiting = [m for m in active if m.id != last] or active
    return [rng.choice(waiting).id]


def manual_order(members: Sequence[Member], turn: Turn, rng: random.Random) -> list[int]:
    active = [m for m in members if not m.muted]
    if turn.user_input or not active:
        return []
    return [rng.choice(active).id]


def speakers(
    strategy: Strategy,
    members: Sequence[Member],
    history: Sequence[Spoken],
    turn: Turn,
    rng: random.Random,
    *,
    allow_self_responses: bool = False,
    forced: int | None = None,
) -> list[int]:
    """The characters who answer this turn, in order. `forced`: a member asked for by name (its button,
    /trigger), muted or not, answers alone. An id not in the group gives nobody."""
    if forced is not None:
        return [forced] if any(m.id == forced for m in members) else []
    if strategy is Strategy.LIST:
        return list_order(members)
    if strategy is Strategy.POOLED:
        return pooled_order(members, history, rng)
    if strategy is Strategy.MANUAL:
        return manual_order(members, turn, rng)
    return natural_order(members, history, turn, rng, allow_self_responses=allow_self_responses)
