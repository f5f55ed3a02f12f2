"""Re-scan scenes (issue 14, the manual's "Reanalisar as cenas"): what a re-scan changes, given the chat's
closed scenes, the range the user chose and the scene ends the helper found there. Pure: the service
(rescans.py) reads the scenes, asks the helper and writes the plan in one transaction.

    check_range(first, last, total)             -> None, or the sentence refusing the range (numbers)
    widen(scenes, first, last)                  -> (first, last): the range grown to whole scenes
    plan(scenes, readable, ends, first, last)   -> Plan, or Stop naming a hand-edited scene
    stop_sentence(scene)                        -> "Scene 4 has a summary you edited: …"

Positions are message ids (ordered like the chat); `readable` are the ids the helper may read (hidden,
failed and empty messages left out, messages.readable_messages).

Decisions:
- A scene straddling an edge of the range is re-scanned whole: the range is widened to its bounds before
  the helper reads it (`widen`). Cutting it at the edge would change its bounds anyway, and the part
  outside would be a scene the helper never read. The widened range is what the size limit counts.
- Scenes wholly outside the range keep their rows, bounds and recaps. The scene before the range keeps
  its end, so the range starts a scene; the range's last message stays a scene end when it was one or
  when a closed scene follows it (that scene keeps its start): the helper cannot judge the last message
  it reads, having no message after it. Otherwise the messages after the last end found join the open
  scene, as after a scene check ("uncertain transitions leave the scene open").
- A scene's bounds are compared as the readable messages it covers: a stored scene whose new bounds
  cover the same readable messages is unchanged (its row and recap stay). Every other scene inside the
  range is replaced by the new ones; the new ones wait for their recap.
- A hand-edited (manual) recap that would go stops the whole re-scan before anything changes (`Stop`):
  the oldest such scene is named. Scenes whose recap the user deleted are replaced like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_RANGE = 2_000  # messages one re-scan reads (200 helper requests at the default interval)
EXCERPT_CHARS = 80


@dataclass(frozen=True)
class OldScene:
    id: int
    number: int  # its number in the chat, oldest first (as Access memories shows it)
    first: int  # message ids
    last: int
    manual: bool = False
    summary: str = ""


@dataclass(frozen=True)
class Plan:
    keep: tuple[int, ...]  # ids of the scenes inside the range that stay as they are
    remove: tuple[OldScene, ...]  # the scenes inside the range whose bounds changed
    create: tuple[tuple[int, int], ...]  # (first, last) message ids of the new scenes, oldest first

    @property
    def changed(self) -> bool:
        return bool(self.remove or self.create)


@dataclass(frozen=True)
class Stop:
    scene: OldScene  # the hand-edited scene whose bounds would change
    sentence: str


def check_range(first: int, last: int, total: int, *, limit: int = MAX_RANGE) -> str | None:
    """Why the message numbers `first`–`last` cannot be re-scanned in a chat of `total` messages."""
    if total < 1:
        return "This chat has no messages to re-scan yet."
    if first < 1 or last < 1:
        return "Re-scan: message numbers start at 1."
    if first > last:
        return f"Re-scan: the first message ({first:,}) comes after the last one ({last:,})."
    if last > total:
        return f"Re-scan: this chat has {total:,} messages; message {last:,} does not exist."
    if last - first + 1 > limit:
        return (
            f"Re-scan: messages {first:,}–{last:,} are {last - first + 1:,} messages; one re-scan reads at most "
            f"{limit:,}. Re-scan a shorter range, then the next one."
        )
    return None


def widen(scenes: Iterable[OldScene], first: int, last: int) -> tuple[int, int]:
    """The range grown so that no scene straddles its edges."""
    for s in scenes:
        if s.first < first <= s.last:
            first = s.first
        if s.first <= last < s.last:
            last = s.last
    return first, last


def inside(scenes: Iterable[OldScene], first: int, last: int) -> list[OldScene]:
    """The scenes wholly within the range, oldest first."""
    return sorted((s for s in scenes if first <= s.first and s.last <= last), key=lambda s: s.first)


def _covers(scene: OldScene, readable: Sequence[int]) -> tuple[int, int] | None:
    """The scene's bounds as the readable messages it covers (None: it covers none)."""
    ids = [m for m in readable if scene.first <= m <= scene.last]
    return (ids[0], ids[-1]) if ids else None


def plan(
    scenes: Sequence[OldScene], readable: Sequence[int], ends: Iterable[int], first: int, last: int
) -> Plan | Stop:
    """What the re-scan of `first`–`last` (already widened) changes, given the `ends` the helper found."""
    in_range = sorted(m for m in set(readable) if first <= m <= last)
    cuts = {e for e in ends if e in set(in_range)}
    closes = any(s.last == last for s in scenes) or any(s.first > last for s in scenes)
    if closes and in_range:
        cuts.add(in_range[-1])
    new: list[tuple[int, int]] = []
    start = None
    for m in in_range:
        start = m if start is None else start
        if m in cuts:
            new.append((start, m))
            start = None
    old = inside(scenes, first, last)
    wanted = set(new)
    keep = [s for s in old if _covers(s, in_range) in wanted]
    kept = {_covers(s, in_range) for s in keep}
    remove = [s for s in old if s not in keep]
    for s in remove:
        if s.manual:
            return Stop(s, stop_sentence(s))
    return Plan(tuple(s.id for s in keep), tuple(remove), tuple(b for b in new if b not in kept))


def stop_sentence(scene: OldScene) -> str:
    text = " ".join(scene.summary.split())
    if len(text) > EXCERPT_CHARS:
        text = text[: EXCERPT_CHARS - 1].rstrip() + "…"
    stop = "" if text.endswith((".", "!", "?", "…")) else "."
    return (
        f"Scene {scene.number} has a summary you edited: “{text}”{stop} The re-scan would change its messages, "
        f"so it stopped and changed nothing. Re-scan a range without scene {scene.number}, or delete "
        f"that summary under Open scenes (Advanced Memory) first."
    )
