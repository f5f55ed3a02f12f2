"""Who can see a message in a group chat (issue 27), as pure functions.

A message the user hid from the AI (`hidden`) is seen by nobody; that stays as it was. On top, a
message may be hidden from some characters (`hidden_for`, their ids) or whispered to one
(`whisper_to`): a whisper is seen by its recipient, its author (the character who wrote it; the user's
whispers are the user's) and the narrator, nobody else. The narrator, a member the chat names, sees
everything not hidden from the AI. The prompt's history for a speaker leaves out what that speaker
cannot see, so the secret is not in its prompt live or in a preview.

Decided where the issue is silent: the narrator is a member of the chat (a narrator who left the chat
sees nothing special); `hidden_for` naming the message's own author is allowed (a user who wants a
character to forget what it said) and is obeyed; a whisper to a character also hidden from that same
character by `hidden_for` is hidden from it (the explicit hide wins)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# A message's `hidden_for` holds at most this many ids: more than any group has members.
MAX_HIDDEN_FOR = 64


@dataclass(frozen=True)
class Audience:
    """A message's own limits: whom it is hidden from, whom it is whispered to, who wrote it (a
    character's id; None for the user's messages)."""

    hidden_for: frozenset[int] = frozenset()
    whisper_to: int | None = None
    author: int | None = None

    @property
    def private(self) -> bool:
        return bool(self.hidden_for) or self.whisper_to is not None


@dataclass(frozen=True)
class Viewer:
    """Whose prompt is being built: the speaking character, and the chat's narrator (if any). A merged
    group's reply speaks for every member at once: its viewer is the `party` (character_id None), who
    see a message when at least one of them does."""

    character_id: int | None
    narrator_id: int | None = None
    party: tuple[int, ...] = ()
    # The speaker's own "new start": it reads the chat from this message on (None: from the beginning).
    start_id: int | None = None

    @property
    def sees_all(self) -> bool:
        if self.party:
            return self.narrator_id is not None and self.narrator_id in self.party
        return self.character_id is None or self.character_id == self.narrator_id


def sees(viewer: Viewer, audience: Audience) -> bool:
    """Whether `viewer`'s prompt holds a message with this audience (a message hidden from the AI is
    left out before this is asked)."""
    if not audience.private:
        return True
    if viewer.party:
        return any(sees(Viewer(member, viewer.narrator_id), audience) for member in viewer.party)
    me = viewer.character_id
    if me is not None and me in audience.hidden_for:
        return False
    if viewer.sees_all:
        return True
    if audience.whisper_to is not None:
        return me in (audience.whisper_to, audience.author)
    return True


def audience_of(hidden_for: object, whisper_to: object, author: int | None) -> Audience:
    """A stored message's audience; anything unreadable in `hidden_for` is left out."""
    ids = frozenset(i for i in hidden_for if _is_id(i)) if isinstance(hidden_for, list) else frozenset()
    return Audience(ids, whisper_to if _is_id(whisper_to) else None, author)


def checked_hidden_for(ids: Iterable[int], members: Iterable[int]) -> list[int] | None:
    """The ids to store for "hidden from these characters": each a member, in the group's order,
    once; None when empty. Raises ValueError naming the first id that is not a member."""
    order = list(members)
    asked = list(ids)
    if len(asked) > MAX_HIDDEN_FOR:
        raise ValueError(f"A message can be hidden from at most {MAX_HIDDEN_FOR} characters.")
    for i in asked:
        if i not in order:
            raise ValueError(f"Character {i} is not in this chat.")
    chosen = [i for i in order if i in set(asked)]
    return chosen or None


def _is_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
