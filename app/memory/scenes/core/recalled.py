"""What Advanced Memory puts in the prompt, as pure functions: the query it recalls with, the scenes the
recall hits point to (with the messages an excerpt may quote), and the text of its three blocks (the
Chat Summary constants, the current scene's source excerpt, Recalled Scenes).

Decisions (where the issue and the manual are silent):
- The query is the user's messages since the responding character last spoke (the manual's "suas
  mensagens desde a última vez que o personagem que responde falou"), at most QUERY_MESSAGES of them
  and QUERY_CHARS characters, newest kept; with none (the character speaks twice), the newest message.
- Scenes are ranked by Memory Recall's own ranking of the chat's memory chunks (meaning fused with
  words, the weights measured on the long-chat dev set, README "How well does it remember?"): a scene
  scores as its best chunk. The chunks are built from the same messages whether or not standard recall
  is on, and the ranking falls back to word matching when the embedding is not ready in time. A chunk
  that straddles two scenes counts for the scene holding most of its messages.
- The excerpt of a scene is centred on the middle message of its best chunk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.memory.scenes.core.window import EXCERPT_REASONS, MAX_RUN_MESSAGES, Candidate, ExcerptRun, Receipt
from app.memory.summaries.core.prompts import known_only_to

QUERY_MESSAGES = 6
QUERY_CHARS = 4000
RECALLED_HEADING = "## Recalled Scenes"
CURRENT_SCENE_HEADING = "## Current scene (its beginning, quoted from the messages)"
CONSTANT_SOURCE_HEADING = "## Quoted from the messages a Chat Summary entry covers"


@dataclass(frozen=True)
class QueryMessage:
    role: str
    name: str
    text: str


def scene_query(messages: Sequence[QueryMessage], speaker: str, ignore: Sequence[str] = ()) -> str:
    """The user's messages since `speaker` last spoke, oldest first (see the module docstring), without
    the names in `ignore` (the responding character's and the persona's: they are in every scene, so
    they would only pull scenes by who speaks, the manual's "não contam")."""
    text = _query_text(messages, speaker)
    for name in ignore:
        if name.strip():
            text = re.sub(rf"(?<!\w){re.escape(name.strip())}(?:'s)?(?!\w)", " ", text, flags=re.IGNORECASE)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def _query_text(messages: Sequence[QueryMessage], speaker: str) -> str:
    picked: list[str] = []
    for m in reversed(messages):
        if m.role == "assistant" and m.name == speaker:
            break
        if m.role == "user" and m.text.strip():
            picked.append(m.text.strip())
            if len(picked) >= QUERY_MESSAGES:
                break
    if not picked:
        newest = next((m.text.strip() for m in reversed(messages) if m.text.strip()), "")
        return newest[-QUERY_CHARS:]
    return "\n".join(reversed(picked))[-QUERY_CHARS:]


@dataclass(frozen=True)
class SceneSpan:
    id: int
    first_message_id: int
    last_message_id: int


@dataclass(frozen=True)
class ChunkHit:
    """A ranked memory chunk: the ids of the messages it was made from."""

    message_ids: tuple[int, ...]


def scene_of(message_ids: Sequence[int], scenes: Sequence[SceneSpan]) -> int | None:
    """The scene holding most of these messages (the earlier one on a tie), or None."""
    if not message_ids:
        return None
    low, high = min(message_ids), max(message_ids)
    best, count = None, 0
    for sc in scenes:
        if sc.last_message_id < low or sc.first_message_id > high:
            continue  # holds none of them: most scenes, for a hit's few neighbouring messages
        n = sum(1 for i in message_ids if sc.first_message_id <= i <= sc.last_message_id)
        if n > count:
            best, count = sc.id, n
    return best


def scene_candidates(
    hits: Sequence[ChunkHit],
    scenes: Sequence[SceneSpan],
    quotable: Mapping[int, Sequence[tuple[int, int]]],
) -> list[Candidate]:
    """Scenes in the order of their best hit, each with one excerpt run: its quotable messages
    ((id, tokens) in order, `quotable[scene id]`) around the middle of the best hit's messages."""
    out: list[Candidate] = []
    seen: set[int] = set()
    for hit in hits:
        sid = scene_of(hit.message_ids, scenes)
        if sid is None or sid in seen:
            continue
        seen.add(sid)
        items = list(quotable.get(sid, ()))
        if not items:
            out.append(Candidate(sid, ()))
            continue
        quotable_ids = {m for m, _ in items}
        inside = sorted(i for i in hit.message_ids if i in quotable_ids)
        middle = inside[len(inside) // 2] if inside else hit.message_ids[len(hit.message_ids) // 2]
        out.append(centred_candidate(sid, items, middle))
    return out


def centred_candidate(scene_id: int, items: Sequence[tuple[int, int]], middle: int | None) -> Candidate:
    """The scene with one excerpt run of its quotable messages ((id, tokens) in order) around the message
    nearest `middle` (None: the scene's middle message)."""
    if not items:
        return Candidate(scene_id, ())
    if middle is None:
        middle = items[len(items) // 2][0]
    best = min(range(len(items)), key=lambda k: abs(items[k][0] - middle))
    half = MAX_RUN_MESSAGES // 2
    start = max(0, min(best - half, len(items) - MAX_RUN_MESSAGES))
    run = tuple(items[start : start + MAX_RUN_MESSAGES])
    return Candidate(scene_id, (ExcerptRun(run, best - start),))


@dataclass(frozen=True)
class QuotedMessage:
    number: int
    name: str
    text: str


@dataclass(frozen=True)
class RecalledText:
    number: int  # the scene's number in the chat
    first: int  # message numbers
    last: int
    summary: str  # the recap as stored (its header is added here)
    timeframe: str
    excerpt: tuple[QuotedMessage, ...] = ()
    known_only_to: tuple[str, ...] = ()  # a merged reply: who recalls it, when not every member does
    recollections: tuple[tuple[str, str], ...] = ()  # (character name, its recollection), one line each


def quote(messages: Sequence[QuotedMessage]) -> str:
    return "\n".join(f"#{m.number} {m.name}: {m.text.strip()}" for m in messages)


def range_header(first: int | None, last: int | None, last_user: int | None) -> str:
    """The one line above the recalled scenes that keeps the past apart from the current turn."""
    span = f"messages #{first}–#{last}" if first is not None and last is not None else "no messages yet"
    user = f"; the user's last message is #{last_user}" if last_user is not None else ""
    return (
        f"Earlier scenes recalled for this reply. The current history is {span}{user}: everything "
        "below happened before it."
    )


def recalled_scenes_block(scenes: Sequence[RecalledText], header: str) -> str:
    """One Recalled Scenes section: each scene's summary, then its excerpt."""
    if not scenes:
        return ""
    parts = [RECALLED_HEADING, header]
    for sc in scenes:
        span = f"#{sc.first}" if sc.first == sc.last else f"#{sc.first}–#{sc.last}"
        when = f"; story timeframe: {sc.timeframe}" if sc.timeframe.strip() else ""
        known = f"; {known_only_to(sc.known_only_to)}" if sc.known_only_to else ""
        text = f"### Scene {sc.number} (messages {span}{when}{known})\n{sc.summary.strip()}"
        for name, line in sc.recollections:
            text += "\n" + recollection_line(name, line)
        if sc.excerpt:
            text += "\nExcerpt:\n" + quote(sc.excerpt)
        parts.append(text)
    return "\n\n".join(parts)


def recollection_line(name: str, text: str) -> str:
    """One character's recollection under a recalled scene's summary."""
    return f"{name} remembers: {' '.join(text.split())}"


def source_excerpt_block(heading: str, messages: Sequence[QuotedMessage]) -> str:
    return f"{heading}\n{quote(messages)}" if messages else ""


def header_tokens_text() -> str:
    """A header as long as a real one, for the planner to count before the numbers are known."""
    return RECALLED_HEADING + "\n\n" + range_header(99999, 99999, 99999)


def receipt_lines(receipt: Receipt, problem: str | None, numbers: Mapping[int, int]) -> tuple[str, ...]:
    """The memory receipt's lines (window.Receipt.lines), naming scenes by their numbers in the chat (as
    Access memories shows them) rather than their ids; a problem (the prompt cannot fit) first."""
    missing = iter(receipt.no_excerpt)
    lines = [problem] if problem else []
    for line in receipt.lines():
        if line.startswith("Recalled scenes: "):
            line = "Recalled scenes: " + ", ".join(str(numbers.get(i, i)) for i in receipt.recalled) + "."
        elif line.startswith("Scene ") and " has no excerpt: " in line:
            scene_id, reason = next(missing)
            line = f"Scene {numbers.get(scene_id, scene_id)} has no excerpt: {EXCERPT_REASONS[reason]}."
        lines.append(line)
    return tuple(lines)
