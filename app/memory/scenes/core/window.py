"""Advanced Memory's plan for one generation: where the current window starts, which Chat Summary
constants, recalled scene summaries and excerpts go in, and the memory receipt. A pure function over
plain numbers: the prompt source gathers token counts, calls `plan_memory` and applies the plan (stores
a new start mark, renders the blocks). Nothing here reads a database or counts tokens itself.

Inputs: the history's messages oldest first (`HistoryMessage`: id, number, tokens; only the messages
that can reach the model, /refresh-style marks left out), the closed scenes, the stored "new start"
mark, the tokens of the rest of the prompt, `MemorySettings`, the active constants, and the candidate
scenes ranked best first. Output: `MemoryPlan` (with its `Receipt`).

The rules (issue 14, the manual's "A janela atual e o orçamento" and "O que a recuperação retorna"):
- The window is the messages from the stored mark on (all of them without one). When the prompt reaches
  the ceiling, the window restarts at the beginning of the most recent scene: the first message after
  the last closed scene, or that closed scene's first message when no message follows it (the start
  never passes the newest message). The plan says `restarted`; the caller stores `mark_id` as the
  "new start" (Mark as new start, All), which the user can undo.
- Priority: constants, then the selected scenes' summaries (all of them reserve space before any
  excerpt), then the reader's character recollections (whole lines), then excerpts. Constants covering a message still in the sent window are left out (saved and
  active, just not sent). A scene is recalled only when all its messages are before the sent window.
- At most Maximum recalled scenes are recalled, one excerpt each at most; an excerpt is a run of
  Moving context min..max messages around the best match, shortened (never below min) to fit. A scene
  without an excerpt says why: "no space left after the summaries" or "none of its messages can be
  quoted".
- When the open scene does not fit under the ceiling even after the restart, the request keeps the
  newest messages that fit and quotes the oldest part of the open scene as a marked source excerpt
  (the `current_scene_summary` marker); when a constant is bigger than the memory can hold, it is left
  out and the newest messages it covers are quoted instead. Either way `fallback` says so. Nothing saved
  is changed by a plan.

Decisions (where the issue and the manual are silent):
- "Reaches the ceiling" means the history no longer leaves memory its budget: restart when
  other + window + budget > ceiling. The decision then depends only on the history and the settings,
  never on what this turn happens to recall, so a swipe or a different question cannot move the window
  (and providers' prompt caches keep hitting between restarts).
- Requests after a tool call or a roll do not count (`may_restart=False`): they never store a mark; if
  they do not fit, they use the fallback for that request only.
- A stored mark moves only forward; a restart that would not move it (the open scene alone is too big)
  is the open-scene fallback instead. A mark on a deleted message means the next message on.
- The 2,000-token tolerance is for what must go in: constants and the selected scenes' summaries may
  use it, never past the ceiling. Excerpts and source excerpts fill only what is left of the budget
  itself, so memory passes its budget only when the summaries need it.
- Constants over 70% of the budget still all go in while they fit (dropping one would lose history);
  `continuity_due` tells the caller to run Updating continuity after the reply. Constants go in the
  order given (oldest first); once one does not fit, later ones are still tried.
- A candidate scene whose summary does not fit is skipped and the next-ranked one is tried. Disabled
  scenes, scenes without a summary, unknown ids and repeats are ignored.
- An excerpt candidate is a run of consecutive quotable messages (hidden and whisper messages already
  left out by the caller) with the index of its best match; a scene's runs are tried best first. The
  excerpt keeps the best match in its middle and drops messages from the ends. A run shorter than min is
  quoted whole. Moving context 0 and 0 means summaries without excerpts (no reason given).
- The open scene's source excerpt is at most Moving context max messages, from its first message, and
  goes after the constants, before recall (the current scene matters more than optional recall).
- When the rest of the prompt and the newest message alone pass the ceiling, the plan sends only the
  newest message, no memory, and says so in `problem`: Advanced Memory stops rather than drop
  instructions silently (the caller shows it).
- Inputs are clamped, never refused: token counts below 0 count as 0; settings to their ranges; at
  most MAX_CANDIDATES candidates, MAX_RUNS runs per scene and MAX_RUN_MESSAGES messages per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# Memory may pass the budget by this much when needed (Marinara's MEMORY_BUDGET_TOLERANCE).
TOLERANCE_TOKENS = 2000
CONSTANTS_SHARE = 0.7  # constants' target share of the budget
DEFAULT_CEILING = 65_000
DEFAULT_BUDGET = 6_500
MIN_CEILING, MAX_CEILING = 1024, 10_000_000
MIN_BUDGET, MAX_BUDGET = 64, 131_072
MAX_SCENES = 50
MAX_MOVING = 50
MAX_CANDIDATES = 64
MAX_RUNS = 12  # the manual's "up to 12 of the best-matching source messages" per scene
MAX_RUN_MESSAGES = 64
MAX_CONSTANTS = 500
MAX_RECOLLECTIONS = 64  # lines per scene (a merged group's members)

# Why a recalled scene has no excerpt (the receipt shows the sentence).
NO_SPACE = "no_space"
NOT_QUOTABLE = "not_quotable"
EXCERPT_REASONS = {
    NO_SPACE: "no space left after the summaries",
    NOT_QUOTABLE: "none of its messages can be quoted",
}
# Why nothing was recalled.
NO_EARLIER_SCENES = "no_earlier_scenes"
NO_SPACE_LEFT = "no_space_left"
NOTHING_RELEVANT = "nothing_relevant"
RECALL_OFF = "recall_off"
NOTHING_REASONS = {
    NO_EARLIER_SCENES: "no earlier scenes outside the current window",
    NO_SPACE_LEFT: "no space left",
    NOTHING_RELEVANT: "nothing relevant",
    RECALL_OFF: "scene recall is off",
}
# Why a constant was left out.
COVERS_WINDOW = "covers_window"
TOO_BIG = "too_big"
# The fallbacks.
OPEN_SCENE_TOO_BIG = "open_scene_too_big"
CONSTANT_TOO_BIG = "constant_too_big"
FALLBACK_REASONS = {
    OPEN_SCENE_TOO_BIG: "The current scene does not fit under the ceiling: the request keeps the newest "
    "messages and quotes the scene's beginning.",
    CONSTANT_TOO_BIG: "A Chat Summary entry is too big for the memory budget: the request quotes the "
    "newest messages it covers instead.",
}
PROBLEM_NO_ROOM = (
    "The instructions and the newest message do not fit under Maximum allowed context before "
    "compression: shorten them or raise the ceiling."
)


@dataclass(frozen=True)
class HistoryMessage:
    """A message of the history that can reach the model; `number` is its #n in the chat."""

    id: int
    number: int
    tokens: int


@dataclass(frozen=True)
class ClosedScene:
    id: int
    first_message_id: int
    last_message_id: int
    summary_tokens: int  # the stored recap with its header, as it goes in the prompt
    enabled: bool = True
    has_summary: bool = True
    # The reader's character recollections of the scene, one line each, in order (tokens per line).
    recollections: tuple[int, ...] = ()


@dataclass(frozen=True)
class Constant:
    """An active Chat Summary entry; `first_message_id`/`last_message_id` None: it covers no range."""

    id: int
    tokens: int
    first_message_id: int | None = None
    last_message_id: int | None = None


@dataclass(frozen=True)
class ExcerptRun:
    """Consecutive quotable messages of a scene around a match: (message id, tokens) in order, and the
    index of the best-matching one."""

    messages: tuple[tuple[int, int], ...]
    best: int = 0


@dataclass(frozen=True)
class Candidate:
    """A scene retrieval ranked, with its excerpt runs best first."""

    scene_id: int
    runs: tuple[ExcerptRun, ...] = ()


@dataclass(frozen=True)
class MemorySettings:
    ceiling: int = DEFAULT_CEILING  # Maximum allowed context before compression
    budget: int = DEFAULT_BUDGET  # Summary and recall budget
    max_scenes: int = 3  # Maximum recalled scenes
    moving_min: int = 3  # Moving context, messages per excerpt
    moving_max: int = 5
    header_tokens: int = 0  # the Recalled Scenes range header, counted once when a scene is recalled

    def clamped(self) -> MemorySettings:
        ceiling = _clamp(self.ceiling, MIN_CEILING, MAX_CEILING)
        budget = _clamp(self.budget, MIN_BUDGET, min(MAX_BUDGET, ceiling))
        high = _clamp(self.moving_max, 0, MAX_MOVING)
        return MemorySettings(
            ceiling=ceiling,
            budget=budget,
            max_scenes=_clamp(self.max_scenes, 0, MAX_SCENES),
            moving_min=_clamp(self.moving_min, 0, high),
            moving_max=high,
            header_tokens=max(0, self.header_tokens),
        )


@dataclass(frozen=True)
class LeftOut:
    id: int
    reason: str  # COVERS_WINDOW | TOO_BIG


@dataclass(frozen=True)
class RecalledScene:
    id: int
    excerpt: tuple[int, ...]  # message ids quoted, in order; () when none
    tokens: int  # summary plus recollections plus excerpt
    no_excerpt: str | None = None  # NO_SPACE | NOT_QUOTABLE when there is no excerpt (and excerpts are on)
    recollections: tuple[int, ...] = ()  # which of the scene's recollection lines go in (indices)


@dataclass(frozen=True)
class SourceExcerpt:
    """Source messages quoted in place of what did not fit: the oldest part of the open scene
    ("open_scene", source_id None) or the newest messages a too-big constant covers ("constant")."""

    kind: str
    source_id: int | None
    message_ids: tuple[int, ...]
    tokens: int


@dataclass(frozen=True)
class Receipt:
    prompt_tokens: int  # estimated outgoing prompt
    ceiling: int
    constants: tuple[int, ...]  # the Chat Summary entries sent
    recalled: tuple[int, ...]  # scene ids, rank order
    nothing_recalled: str | None  # a NOTHING_REASONS key when `recalled` is empty
    no_excerpt: tuple[tuple[int, str], ...]  # (scene id, EXCERPT_REASONS key)
    restarted: bool
    fallback: str | None

    def lines(self) -> list[str]:
        """The receipt as short lines for the page."""
        out = [f"Context: ~{self.prompt_tokens:,} of {self.ceiling:,} tokens"]
        if self.restarted:
            out.append("The current window restarted at the newest scene.")
        if self.constants:
            out.append(f"Chat Summaries: {len(self.constants)}")
        if self.recalled:
            out.append("Recalled scenes: " + ", ".join(str(i) for i in self.recalled))
        elif self.nothing_recalled:
            out.append(f"Nothing recalled: {NOTHING_REASONS[self.nothing_recalled]}.")
        out += [f"Scene {i} has no excerpt: {EXCERPT_REASONS[r]}." for i, r in self.no_excerpt]
        if self.fallback:
            out.append(FALLBACK_REASONS[self.fallback])
        return out


@dataclass(frozen=True)
class MemoryPlan:
    mark_id: int | None  # the window start to store (a new mark when `restarted`)
    restarted: bool
    first_id: int | None  # the first message sent; later ones are all sent (None: no messages)
    window_tokens: int
    constants: tuple[int, ...]
    left_out: tuple[LeftOut, ...]  # constants not sent, and why
    continuity_due: bool  # the constants sent pass 70% of the budget: run Updating continuity
    scenes: tuple[RecalledScene, ...]
    source_excerpts: tuple[SourceExcerpt, ...]
    memory_tokens: int
    prompt_tokens: int
    fallback: str | None  # a FALLBACK_REASONS key
    problem: str | None  # a sentence: the prompt cannot fit at all
    receipt: Receipt = field(repr=False)


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, int(value)))


def _tok(n: int) -> int:
    return max(0, int(n))


# The window ------------------------------------------------------------------------------------------


def _index_from(messages: Sequence[HistoryMessage], message_id: int | None) -> int:
    """The index of the first message with an id at or after `message_id` (ids follow chat order);
    the newest message when the mark is past them all."""
    if message_id is None:
        return 0
    for i, m in enumerate(messages):
        if m.id >= message_id:
            return i
    return len(messages) - 1


def newest_scene_start(messages: Sequence[HistoryMessage], scenes: Sequence[ClosedScene]) -> int | None:
    """The index where the most recent scene begins: the first message after the last closed scene, or
    the last closed scene's first message when none follows it; None without a closed scene."""
    if not messages or not scenes:
        return None
    last = max(scenes, key=lambda s: s.last_message_id)
    for i, m in enumerate(messages):
        if m.id > last.last_message_id:
            return i
    return _index_from(messages, last.first_message_id)


def _open_scene_start(messages: Sequence[HistoryMessage], scenes: Sequence[ClosedScene]) -> int:
    """Index of the open scene's first message (len(messages) when it has none)."""
    end = max((s.last_message_id for s in scenes), default=None)
    if end is None:
        return 0
    return next((i for i, m in enumerate(messages) if m.id > end), len(messages))


def _suffix_fitting(messages: Sequence[HistoryMessage], start: int, room: int) -> int:
    """The first index of the longest run of newest messages from `start` on within `room` tokens;
    the newest message is always kept."""
    used, first = 0, len(messages)
    for i in range(len(messages) - 1, start - 1, -1):
        used += _tok(messages[i].tokens)
        if used > room and i < len(messages) - 1:
            break
        first = i
    return first


# The plan --------------------------------------------------------------------------------------------


def plan_memory(
    messages: Sequence[HistoryMessage],
    scenes: Sequence[ClosedScene],
    *,
    mark_id: int | None,
    other_tokens: int,
    settings: MemorySettings = MemorySettings(),
    constants: Sequence[Constant] = (),
    candidates: Sequence[Candidate] = (),
    may_restart: bool = True,
) -> MemoryPlan:
    """The memory plan of one generation: see the module docstring for the rules."""
    s = settings.clamped()
    other = _tok(other_tokens)

    def total(a: int) -> int:
        return sum(_tok(m.tokens) for m in messages[a:])

    # 1. Where the window starts.
    start = _index_from(messages, mark_id) if messages else 0
    new_mark, restarted = mark_id, False
    if messages and other + total(start) + s.budget > s.ceiling and may_restart:
        target = newest_scene_start(messages, scenes)
        if target is not None and target > start:
            start, new_mark, restarted = target, messages[target].id, True
    first, fallback, problem = start, None, None
    if messages and other + total(start) + s.budget > s.ceiling:
        first = _suffix_fitting(messages, start, s.ceiling - other - s.budget)
        if first > start:
            fallback = OPEN_SCENE_TOO_BIG
        if other + total(first) > s.ceiling:
            problem = PROBLEM_NO_ROOM
    window_tokens = total(first) if messages else 0
    first_id = messages[first].id if messages else None
    room = max(0, s.ceiling - other - window_tokens)
    if problem:
        room = 0
    cap = min(s.budget + TOLERANCE_TOKENS, room)  # what must go in may use the tolerance
    soft = min(s.budget, room)  # excerpts stay within the budget
    used = 0

    # 2. Constants.
    sent: list[int] = []
    left: list[LeftOut] = []
    sources: list[SourceExcerpt] = []
    too_big: list[Constant] = []
    for c in constants[:MAX_CONSTANTS]:
        if first_id is not None and c.last_message_id is not None and c.last_message_id >= first_id:
            left.append(LeftOut(c.id, COVERS_WINDOW))
        elif used + _tok(c.tokens) <= cap:
            sent.append(c.id)
            used += _tok(c.tokens)
        else:
            left.append(LeftOut(c.id, TOO_BIG))
            too_big.append(c)
    constants_tokens = used
    for c in too_big:  # quote the newest messages it covers instead
        quoted = _constant_source(messages, c, first, cap - used)
        if quoted:
            sources.append(quoted)
            used += quoted.tokens
        fallback = fallback or CONSTANT_TOO_BIG

    # 3. The open scene's oldest part, when the window had to cut into it.
    if fallback == OPEN_SCENE_TOO_BIG and s.moving_max:
        quoted = _open_scene_source(messages, scenes, start, first, s.moving_max, soft - used)
        if quoted:
            sources.append(quoted)
            used += quoted.tokens

    # 4. Recalled scenes: summaries first, then excerpts.
    by_id = {sc.id: sc for sc in scenes}
    earlier = {sc.id for sc in scenes if sc.enabled and sc.has_summary and _before(sc, first_id)}
    chosen: list[tuple[ClosedScene, Candidate]] = []
    seen: set[int] = set()
    skipped_for_space = False
    header = s.header_tokens
    for cand in candidates[:MAX_CANDIDATES]:
        if len(chosen) >= s.max_scenes:
            break
        sc = by_id.get(cand.scene_id)
        if sc is None or sc.id in seen or sc.id not in earlier:
            continue
        seen.add(sc.id)
        cost = _tok(sc.summary_tokens) + (header if not chosen else 0)
        if used + cost > cap:
            skipped_for_space = True
            continue
        chosen.append((sc, cand))
        used += cost
    # Then the character recollections, whole lines within the budget (a line never cut: one that does
    # not fit leaves), before any excerpt: excerpts shrink first, then recollections leave.
    lines: dict[int, tuple[int, ...]] = {}
    lines_tokens: dict[int, int] = {}
    for sc, _ in chosen:
        kept: list[int] = []
        spent = 0
        for k, t in enumerate(sc.recollections[:MAX_RECOLLECTIONS]):
            if used + _tok(t) <= soft:
                kept.append(k)
                used += _tok(t)
                spent += _tok(t)
        lines[sc.id], lines_tokens[sc.id] = tuple(kept), spent
    recalled: list[RecalledScene] = []
    for sc, cand in chosen:
        excerpt, tokens, reason = (), 0, None
        if s.moving_max:
            excerpt, tokens, reason = _excerpt(cand.runs, s.moving_min, s.moving_max, soft - used)
            used += tokens
        recalled.append(
            RecalledScene(
                sc.id, excerpt, _tok(sc.summary_tokens) + lines_tokens[sc.id] + tokens, reason, lines[sc.id]
            )
        )

    nothing = None
    if not recalled:
        if s.max_scenes == 0:
            nothing = RECALL_OFF
        elif not earlier:
            nothing = NO_EARLIER_SCENES
        elif skipped_for_space:
            nothing = NO_SPACE_LEFT
        else:
            nothing = NOTHING_RELEVANT
    prompt_tokens = other + window_tokens + used
    receipt = Receipt(
        prompt_tokens=prompt_tokens,
        ceiling=s.ceiling,
        constants=tuple(sent),
        recalled=tuple(r.id for r in recalled),
        nothing_recalled=nothing,
        no_excerpt=tuple((r.id, r.no_excerpt) for r in recalled if r.no_excerpt),
        restarted=restarted,
        fallback=fallback,
    )
    return MemoryPlan(
        mark_id=new_mark,
        restarted=restarted,
        first_id=first_id,
        window_tokens=window_tokens,
        constants=tuple(sent),
        left_out=tuple(left),
        continuity_due=constants_tokens > CONSTANTS_SHARE * s.budget,
        scenes=tuple(recalled),
        source_excerpts=tuple(sources),
        memory_tokens=used,
        prompt_tokens=prompt_tokens,
        fallback=fallback,
        problem=problem,
        receipt=receipt,
    )


def _before(scene: ClosedScene, first_id: int | None) -> bool:
    """All of the scene's messages come before the sent window."""
    return first_id is None or scene.last_message_id < first_id


# Excerpts --------------------------------------------------------------------------------------------


def excerpt_span(length: int, best: int, size: int) -> tuple[int, int]:
    """The [start, end) of `size` consecutive items out of `length` with `best` in the middle, shifted
    to stay inside."""
    size = max(0, min(size, length))
    best = _clamp(best, 0, max(length - 1, 0))
    start = best - (size - 1) // 2
    start = max(0, min(start, length - size))
    return start, start + size


def _excerpt(
    runs: Sequence[ExcerptRun], low: int, high: int, room: int
) -> tuple[tuple[int, ...], int, str | None]:
    """The first run (best first) that fits `room` at some size in low..high, as large as fits."""
    usable = [r for r in runs[:MAX_RUNS] if r.messages]
    if not usable:
        return (), 0, NOT_QUOTABLE
    for run in usable:
        items = run.messages[:MAX_RUN_MESSAGES]
        top = min(high, len(items))
        bottom = max(1, min(low, len(items)))
        for size in range(top, bottom - 1, -1):
            a, b = excerpt_span(len(items), run.best, size)
            tokens = sum(_tok(t) for _, t in items[a:b])
            if tokens <= room:
                return tuple(i for i, _ in items[a:b]), tokens, None
    return (), 0, NO_SPACE


def _constant_source(
    messages: Sequence[HistoryMessage], c: Constant, window_first: int, room: int
) -> SourceExcerpt | None:
    """The newest messages a constant covers (before the window) within `room` tokens."""
    if c.first_message_id is None or c.last_message_id is None:
        return None
    covered = [m for m in messages[:window_first] if c.first_message_id <= m.id <= c.last_message_id]
    picked: list[HistoryMessage] = []
    used = 0
    for m in reversed(covered):
        if used + _tok(m.tokens) > room:
            break
        picked.insert(0, m)
        used += _tok(m.tokens)
    return SourceExcerpt("constant", c.id, tuple(m.id for m in picked), used) if picked else None


def _open_scene_source(
    messages: Sequence[HistoryMessage],
    scenes: Sequence[ClosedScene],
    start: int,
    first: int,
    most: int,
    room: int,
) -> SourceExcerpt | None:
    """The oldest messages of the open scene that the window cut (from its start, or the stored mark if
    later), at most `most` of them, within `room` tokens."""
    begin = max(_open_scene_start(messages, scenes), start)
    picked: list[HistoryMessage] = []
    used = 0
    for m in messages[begin:first][:most]:
        if used + _tok(m.tokens) > room:
            break
        picked.append(m)
        used += _tok(m.tokens)
    return SourceExcerpt("open_scene", None, tuple(m.id for m in picked), used) if picked else None
