"""Who may recall a scene in a group chat (issue 27), as pure functions: the prompt's shell
(`app/memory/scenes/prompt.py`) reads the scenes, the chat's private messages and the members, and asks
here what the speaker — or, in a merged reply, the party — gets of each scene.

The rules (the manual's "Quem pode ler uma cena"):
- A character recalls a scene it took part in: its card name is among the participants the recap
  stored, or the scene is flagged "Check who was there" (the helper did not say: every character).
  A scene whose participants name nobody but the persona is the narrator's alone; so is a group scene
  saved before participants were checked (stored with none) until Fix or Prepare checks it.
- The narrator reads every scene and every private part.
- A reader who cannot see some of the scene's messages (hidden from it, another's whisper) is a
  partial reader: it recalls the scene only when the recap was written knowing who saw what — the
  private audiences stored with the recap (`private_key`) are those of the messages now. Otherwise the
  recap may tell it what it never saw, and it waits until the scene is written again (the rewrite job,
  Fix, Prepare). Readers who see every message still recall it.
- A scene holding no message its reader may see is not recalled by it.
- Excerpts never quote a message the reader cannot see (the shell also leaves every whisper out).
- A merged reply speaks for every member: it recalls what at least one member recalls; a scene not
  every member recalls is marked "known only to …", and its excerpt quotes only what every member who
  recalls it saw. Parts only the narrator knows stay out (summaries' `merged_view`).

Decided where the manual is silent: participants are matched by card name, ignoring case and spacing,
as the writer stored them; saving a renamed card gives its new name to the scenes of its chats
(app/memory/scenes/renames.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.chats.core.audience import Audience, Viewer, sees

PrivateMessage = tuple[int, Audience]  # a message's id and its limited audience


@dataclass(frozen=True)
class SceneAccess:
    """What deciding access reads of a scene."""

    id: int
    first_message_id: int
    last_message_id: int
    participants: tuple[str, ...]  # card names, as the writer stored them
    check_who: bool
    private_key: str  # `private_key` of the scene's private messages when its recap was written


@dataclass(frozen=True)
class Reading:
    """What the prompt's reader gets of one scene."""

    names: tuple[str, ...] | None  # whose private recap parts to keep; None: every part (the narrator)
    unseen: frozenset[int]  # the scene's messages an excerpt must not quote
    known_only_to: tuple[str, ...] = ()  # a merged reply: who recalls it, when not every member does


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


def inside(first_id: int, last_id: int, privates: Sequence[PrivateMessage]) -> list[PrivateMessage]:
    """The private messages of a scene running from message `first_id` to `last_id`."""
    return [(i, a) for i, a in privates if first_id <= i <= last_id]


def private_key(privates: Sequence[PrivateMessage]) -> str:
    """The audiences of a scene's private messages, as one string to store with its recap ("" when
    every message is seen by all)."""
    if not privates:
        return ""
    return json.dumps(
        [[i, sorted(a.hidden_for), a.whisper_to, a.author] for i, a in sorted(privates, key=lambda p: p[0])],
        separators=(",", ":"),
    )


def takes_part(scene: SceneAccess, name: str) -> bool:
    return scene.check_who or _key(name) in {_key(p) for p in scene.participants}


def _unseen_by(
    scene: SceneAccess,
    character_id: int,
    name: str,
    narrator_id: int | None,
    privates: Sequence[PrivateMessage],
    count_messages: Callable[[int], int],
    start: int | None = None,
) -> frozenset[int] | None:
    """The scene's messages this character may not quote, or None when it does not recall the scene
    (`start`: its own new start; a scene beginning before it is not its to recall)."""
    if start is not None and scene.first_message_id < start:
        return None
    me = Viewer(character_id, narrator_id)
    if not me.sees_all and not takes_part(scene, name):
        return None
    unseen = frozenset(i for i, a in privates if not sees(me, a))
    if unseen:
        if private_key(privates) != scene.private_key:
            return None  # written under another visibility: it may tell what this reader never saw
        if count_messages(scene.id) <= len(unseen):
            return None  # nothing in it this reader may see
    return unseen


def reading(
    scene: SceneAccess,
    viewer: Viewer,
    members: Mapping[int, str],
    privates: Sequence[PrivateMessage],
    count_messages: Callable[[int], int],
    starts: Mapping[int, int] | None = None,
) -> Reading | None:
    """What `viewer` (a group's speaker, or a merged reply's party) gets of the scene; None when it does
    not recall it. `members`: the chat's characters, id → card name. `privates`: the scene's private
    messages (`inside`). `count_messages(scene_id)`: how many of its messages the AI may read, asked
    only for a partial reader. `starts`: the members' own new starts."""
    starts = starts or {}
    if viewer.party:
        rememberers: list[tuple[str, frozenset[int]]] = []
        for member in viewer.party:
            name = members.get(member, "")
            unseen = _unseen_by(
                scene, member, name, viewer.narrator_id, privates, count_messages, starts.get(member)
            )
            if unseen is not None:
                rememberers.append((name, unseen))
        if not rememberers:
            return None
        names = tuple(n for n, _ in rememberers)
        quotable_by_all = frozenset().union(*(u for _, u in rememberers))
        partial = names if len(rememberers) < len(viewer.party) else ()
        return Reading(names, quotable_by_all, partial)
    if viewer.character_id is None:
        return Reading(None, frozenset())
    name = members.get(viewer.character_id, "")
    start = viewer.start_id if viewer.start_id is not None else starts.get(viewer.character_id)
    unseen = _unseen_by(scene, viewer.character_id, name, viewer.narrator_id, privates, count_messages, start)
    if unseen is None:
        return None
    return Reading(None if viewer.sees_all else (name,), unseen)


def seen_note(audience: Audience, names: Mapping[int, str]) -> str:
    """How the helper reading a scene is told who saw a message ("" when everyone did): "whispered to
    Kaito", "hidden from Mira and Bram". Characters no longer in the chat are "a former member"."""
    if not audience.private:
        return ""

    def name(i: int) -> str:
        return names.get(i) or "a former member"

    notes = []
    if audience.whisper_to is not None:
        notes.append(f"whispered to {name(audience.whisper_to)}")
    if audience.hidden_for:
        hidden = [name(i) for i in sorted(audience.hidden_for)]
        listed = hidden[0] if len(hidden) == 1 else ", ".join(hidden[:-1]) + " and " + hidden[-1]
        notes.append(f"hidden from {listed}")
    return "; ".join(notes)


def remap_key(key: str, mapped: Mapping[int, int]) -> str:
    """A stored `private_key` for a copy of the chat whose messages have new ids (a branch): the same
    audiences on the copied messages; "" (the scene waits to be written again for partial readers)
    when a message is missing or the key does not read."""
    if not key:
        return ""
    try:
        rows = json.loads(key)
        moved = [[mapped[row[0]], *row[1:]] for row in rows]
    except (ValueError, KeyError, TypeError, IndexError):
        return ""
    return json.dumps(moved, separators=(",", ":"))
