"""Advanced Memory's part of one prompt: reads what the planner needs (the window's messages with their
tokens, the closed scenes, the Chat Summary constants, the recall hits), calls `window.plan_memory`,
stores a new start when the window restarted, and renders the blocks. Generation reads only what is
saved: nothing here waits for a scene check, a recap or any model call.

Decisions (where the issue is silent):
- The rest of the prompt is estimated from the characters' cards, the persona, the other sources'
  blocks (this source contributes after them) and OTHER_OVERHEAD_TOKENS for Sugo's own instructions;
  the ceiling is an estimate too (the manual: "não um tokenizador exato").
- The window reads at most MAX_WINDOW_MESSAGES messages: past that the planner sees the newest ones and
  restarts (or falls back) as it would with the rest.
- Peek Prompt plans the same way but never stores a new start; only a real reply does.
- A reply's recalled scenes and excerpts are kept (SceneSnapshot, keyed by the message it answers): its
  swipes recall the same, unless a scene of the chat was written, edited, enabled or disabled since
  (then they recall afresh, and that becomes the kept one). Memory Recall's chunks being rebuilt between
  a reply and its swipe does not count as a change. A hidden or deleted message drops out of a kept
  excerpt at once.
- A turn costs what it shows, not the chat's length (issue 23): message numbers are counted on the index
  for the window's messages, the scenes' bounds and the quoted messages only; the scenes are read whole
  (their recaps' sizes are planned with), their messages only for the scenes the plan picks.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy import TextClause, text
from sqlmodel import Session, col, func, select

from app.chats.core.audience import sees
from app.chats.history import message_numbers, private_messages
from app.chats.models import Chat
from app.chats.settings import ChatSettings
from app.chats.turn_taking import member_starts
from app.memory.recall.service import PendingSearch, finish_search
from app.memory.scenes import decision, recollections
from app.memory.scenes.core import access, recalled, window
from app.memory.scenes.core import decision as rules
from app.memory.scenes.models import Scene, SceneSnapshot, SceneState
from app.memory.summaries.core.prompts import merged_view, visible_to
from app.memory.summaries.core.rules import EntryText, summary_block
from app.memory.summaries.models import SummaryEntry
from app.platform.timeutil import as_utc, utcnow
from app.prompt.core.builder import DynamicBlock
from app.prompt.core.tokens import count_message_tokens, count_tokens
from app.prompt.sources import Contribution, Turn

log = logging.getLogger(__name__)

MAX_WINDOW_MESSAGES = 3000
OTHER_OVERHEAD_TOKENS = 300
SEARCH_DEPTH = 32  # recall hits read to rank the scenes
MAX_SNAPSHOTS = 128  # per chat: the newest replies' recalled scenes, for their swipes


@dataclass(frozen=True)
class SceneRow:
    """What a turn reads of a scene: the columns the plan and the blocks use."""

    id: int
    first_message_id: int
    last_message_id: int
    state: str
    summary: str
    timeframe: str
    enabled: bool
    participants: tuple[str, ...] = ()
    check_who: bool = False
    private_key: str = ""

    def access(self) -> access.SceneAccess:
        return access.SceneAccess(
            self.id,
            self.first_message_id,
            self.last_message_id,
            self.participants,
            self.check_who,
            self.private_key,
        )


# The chat's scenes are read on every turn (their recaps' sizes are planned with): plain SQL, as the
# ORM's per-row overhead was most of the cost at a hundred scenes.
_SCENES_SQL = text(
    "SELECT id, first_message_id, last_message_id, state, summary, timeframe, enabled, participants,"
    " check_who, private_key FROM scene WHERE chat_id = :chat_id ORDER BY first_message_id"
)


def _names(raw: object) -> tuple[str, ...]:
    """The participants column as the driver gives it: JSON text on SQLite, a list on PostgreSQL."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return ()
    return tuple(str(n) for n in raw) if isinstance(raw, list) else ()


def _scenes(session: Session, chat_id: int) -> list[SceneRow]:
    rows = session.connection().execute(_SCENES_SQL, {"chat_id": chat_id})
    return [
        SceneRow(i, first, last, state, summary, timeframe, bool(on), _names(names), bool(check), key or "")
        for i, first, last, state, summary, timeframe, on, names, check, key in rows
    ]


# How many messages of a scene the AI may read: asked only for a group reader who cannot see some of them.
_SCENE_MESSAGES_SQL = text(
    "SELECT count(*) FROM message WHERE chat_id = :chat_id AND kind = 'message' AND hidden = false"
    " AND status != 'error' AND id >= :first AND id <= :last"
)


@dataclass(frozen=True)
class GroupReading:
    """A group turn's view of the chat's memory: what each scene gives its reader, the messages the
    reader cannot see (never quoted), and how private parts read: a speaker's own (None: the narrator
    reads every part), or, for a merged reply, what at least one of the party knows, marked."""

    readings: dict[int, access.Reading | None]  # scene id → its reading; None: not recalled
    unseen: frozenset[int]
    reader: str | None
    party: tuple[str, ...] = ()
    privates: tuple[access.PrivateMessage, ...] = ()  # the chat's messages with a limited audience

    def entry_text(self, text: str) -> str:
        """A Chat Summary entry as this turn reads it."""
        return merged_view(text, self.party) if self.party else visible_to(text, self.reader)

    def scene_text(self, summary: str, scene_id: int) -> str:
        got = self.readings.get(scene_id)
        if got is None:
            return ""  # not recalled by this reader: never planned in
        if self.party:
            return merged_view(summary, got.names or ())
        return visible_to(summary, None if got.names is None else got.names[0])

    def quotable(self, scene_id: int, message_id: int) -> bool:
        got = self.readings.get(scene_id)
        return message_id not in self.unseen and (got is None or message_id not in got.unseen)


def group_reading(turn: Turn, scenes: Sequence[SceneRow]) -> GroupReading | None:
    """For a group turn (a speaker's, or a merged reply's), who recalls which scene; None in a chat of
    one character, which reads every scene as before."""
    viewer = turn.viewer
    if viewer is None:
        return None
    session, chat_id = turn.session, turn.chat.id
    privates = private_messages(session, chat_id)
    members = {c.id: c.name for c in turn.characters if c.id is not None}
    by_scene = {sc.id: sc for sc in scenes}

    def count(scene_id: int) -> int:
        sc = by_scene[scene_id]
        params = {"chat_id": chat_id, "first": sc.first_message_id, "last": sc.last_message_id}
        return int(session.connection().execute(_SCENE_MESSAGES_SQL, params).scalar_one())

    starts = member_starts(session, chat_id) if viewer.party else {}
    readings = {
        sc.id: access.reading(
            sc.access(),
            viewer,
            members,
            access.inside(sc.first_message_id, sc.last_message_id, privates),
            count,
            starts,
        )
        for sc in scenes
    }
    unseen = frozenset(i for i, a in privates if not sees(viewer, a))
    if viewer.party:
        party = tuple(members[i] for i in viewer.party if i in members)
        return GroupReading(readings, unseen, None, party, tuple(privates))
    reader = None if viewer.sees_all else members.get(viewer.character_id or 0)
    return GroupReading(readings, unseen, reader, (), tuple(privates))


def _recollection_lines(
    turn: Turn, scenes: Sequence[SceneRow], group: GroupReading | None
) -> dict[int, tuple[tuple[str, str], ...]]:
    """Scene id → the character recollections this turn's reader gets under that scene, (name, text):
    the speaker's own; in a turn-by-turn group the speaker's own (the narrator has none); in a merged
    reply each member's who recalls the scene. Only those valid for the scene as it is now."""
    if not turn.settings.adv_recollections:
        return {}
    privates = group.privates if group else ()
    keys = {
        sc.id: (
            sc.summary,
            access.private_key(access.inside(sc.first_message_id, sc.last_message_id, privates)),
        )
        for sc in scenes
        if sc.state == "written"
    }
    valid = recollections.valid_for_prompt(turn.session, keys)
    names = {c.id: c.name for c in turn.characters if c.id is not None}
    viewer = turn.viewer
    out: dict[int, tuple[tuple[str, str], ...]] = {}
    for scene_id, by_character in valid.items():
        if viewer is None:
            readers = [turn.speaker.id]
        elif viewer.party:
            reading = group.readings.get(scene_id) if group else None
            knowers = set(reading.names or ()) if reading else set()
            readers = [i for i in viewer.party if names.get(i) in knowers]
        else:
            readers = [viewer.character_id]
        out[scene_id] = tuple(
            (names[i], by_character[i]) for i in readers if i is not None and i in by_character and i in names
        )
    return out


@dataclass(frozen=True)
class Planned:
    contribution: Contribution
    left_out: frozenset[int]  # history messages before the window
    plan: window.MemoryPlan


def memory_settings(settings: ChatSettings) -> window.MemorySettings:
    return window.MemorySettings(
        ceiling=settings.adv_max_context,
        budget=settings.adv_budget,
        max_scenes=settings.adv_max_scenes,
        moving_min=settings.adv_excerpt_min,
        moving_max=settings.adv_excerpt_max,
        header_tokens=count_tokens(recalled.header_tokens_text()),
    )


def window_start(session: Session, chat_id: int) -> int | None:
    state = session.get(SceneState, chat_id)
    return state.window_start_id if state is not None else None


# The window's messages (from the stored start on, when there is one), counted on the index.
_WINDOW_COUNT = (
    "SELECT count(*) FROM message WHERE chat_id = :chat_id AND kind = 'message' AND status != 'error'"
    " AND hidden = false"
)
_WINDOW_COUNT_SQL = text(_WINDOW_COUNT)
_WINDOW_COUNT_FROM_SQL = text(_WINDOW_COUNT + " AND id >= :mark")


def window_limit(session: Session, chat: Chat) -> int:
    """How many newest messages the window needs read: those from the stored start on."""
    mark = window_start(session, chat.id)
    conn = session.connection()
    if mark is None:
        count = int(conn.execute(_WINDOW_COUNT_SQL, {"chat_id": chat.id}).scalar_one())
    else:
        count = int(conn.execute(_WINDOW_COUNT_FROM_SQL, {"chat_id": chat.id, "mark": mark}).scalar_one())
    # The recent-message window drops old messages in batches of 30% of its limit, so it may drop up to
    # a batch more than asked: ask for 1/0.7 as many, and the planner starts at the stored start anyway.
    return min(MAX_WINDOW_MESSAGES, -(-(count + 2) * 10 // 7) + 2)


def store_window_start(session: Session, chat_id: int, message_id: int | None) -> None:
    """Store the "new start" (None: undo it, the whole history is the window again)."""
    state = session.get(SceneState, chat_id) or SceneState(chat_id=chat_id)
    state.window_start_id = message_id
    state.updated_at = utcnow()
    session.add(state)


# Which of the given ids are messages of the chat (a scene's bound may be a message deleted since):
# the others have no number (0), as a chat view would give them none. The ids travel as one value, so
# the statement is the same whatever their count: a JSON array on SQLite, an array on PostgreSQL.
_MESSAGES_AMONG_SQL = {
    "sqlite": text(
        "SELECT id FROM message WHERE chat_id = :chat_id AND kind = 'message'"
        " AND id IN (SELECT value FROM json_each(:ids))"
    ),
    "postgresql": text(
        "SELECT id FROM message WHERE chat_id = :chat_id AND kind = 'message' AND id = ANY(:ids)"
    ),
}


def messages_among(session: Session, chat_id: int, ids: Collection[int]) -> set[int]:
    """Those of `ids` that are messages (not notes) of the chat."""
    if not ids:
        return set()
    conn = session.connection()
    wanted = sorted(ids)
    value = json.dumps(wanted) if conn.dialect.name == "sqlite" else wanted
    rows = conn.execute(_MESSAGES_AMONG_SQL[conn.dialect.name], {"chat_id": chat_id, "ids": value})
    return {row[0] for row in rows}


def _numbers(
    session: Session, chat_id: int, messages: Collection[int], bounds: Collection[int]
) -> dict[int, int]:
    """The numbers (as the chat view shows them) of `messages`, ids of the chat's messages, and of
    those of `bounds` that are messages of the chat still: one statement for the numbers, one for
    which bounds are messages; nothing reads the messages between them."""
    bounds = set(bounds) - set(messages)
    existing = messages_among(session, chat_id, bounds)
    numbers = message_numbers(session, chat_id, {*messages, *existing})
    return {i: n for i, n in numbers.items() if i not in bounds or i in existing}


def _other_tokens(turn: Turn) -> int:
    cards = sum(
        count_tokens(
            " ".join(
                (
                    c.description,
                    c.personality,
                    c.scenario,
                    c.mes_example,
                    c.system_prompt,
                    c.post_history_instructions,
                )
            )
        )
        for c in turn.characters
    )
    persona = count_tokens(turn.persona.description) if turn.persona else 0
    blocks = 0
    for part in turn.contributed:
        blocks += sum(count_tokens(b.text) for b in (*part.fixed, *part.dynamic))
        blocks += sum(count_tokens(n.text) for n in part.depth_notes)
    return cards + persona + blocks + OTHER_OVERHEAD_TOKENS


def _hits(turn: Turn, pending: PendingSearch | None) -> list[recalled.ChunkHit]:
    if pending is None:
        return []
    hits, got = finish_search(turn.session, pending, k=SEARCH_DEPTH)
    embedder = got.embedder
    if embedder is not None:
        relevant = [h for h in hits if h.similarity is not None and h.similarity >= embedder.threshold]
    else:
        relevant = [h for h in hits if h.lexical > 0]
    return [recalled.ChunkHit(tuple(h.chunk.message_ids or ())) for h in relevant if h.chunk.message_ids]


# One branch per scene, each its own LIMIT on the (chat_id, id) index: the rows of every scene at
# once, and no more of a long scene than an excerpt can use. (Each subquery is named: PostgreSQL
# wants a name for a subquery in FROM.)
_QUOTABLE_BRANCH = (
    "SELECT * FROM (SELECT :scene_{n} AS scene_id, id, name, role, content FROM message"
    " WHERE chat_id = :chat_id AND kind = 'message' AND hidden = false AND status != 'error'"
    " AND status != 'streaming' AND whisper_to IS NULL AND id >= :first_{n} AND id <= :last_{n}"
    " ORDER BY id LIMIT :per_scene) AS s{n}"
)


@functools.lru_cache(maxsize=64)
def _quotable_sql(scenes: int) -> TextClause:
    """The statement reading `scenes` scenes' quotable messages (one per count, made once)."""
    branches = " UNION ALL ".join(_QUOTABLE_BRANCH.format(n=n) for n in range(scenes))
    return text(f"SELECT * FROM ({branches}) AS quotable ORDER BY id")


def _quotable(
    session: Session, chat_id: int, scenes: Sequence[SceneRow], group: GroupReading | None = None
) -> dict[int, list[tuple[int, int, str, str]]]:
    """The given scenes' messages that may be quoted (visible, not failed, not empty, not whispered;
    in a group, seen by the reader), per scene: (id, tokens, name, text). Only the scenes the recall
    hits point to are read, in one statement."""
    out: dict[int, list[tuple[int, int, str, str]]] = {sc.id: [] for sc in scenes}
    if not scenes:
        return out
    params: dict[str, int] = {"chat_id": chat_id, "per_scene": window.MAX_RUN_MESSAGES * 8}
    for n, sc in enumerate(scenes):
        params |= {f"scene_{n}": sc.id, f"first_{n}": sc.first_message_id, f"last_{n}": sc.last_message_id}
    for scene_id, mid, name, role, content in session.connection().execute(
        _quotable_sql(len(scenes)), params
    ):
        if (content or "").strip() and (group is None or group.quotable(scene_id, mid)):
            out[scene_id].append((mid, count_message_tokens(content), name or role, content))
    return out


def _kept(session: Session, chat_id: int, anchor: int | None) -> list[dict] | None:
    """The recalled scenes kept for a reply to `anchor`, when no scene changed since they were kept."""
    if anchor is None:
        return None
    snap = session.get(SceneSnapshot, (chat_id, anchor))
    if snap is None:
        return None
    kept_at = as_utc(snap.created_at)
    newest = session.exec(
        select(func.max(Scene.updated_at), func.max(Scene.created_at)).where(Scene.chat_id == chat_id)
    ).one()
    if any(when is not None and as_utc(when) > kept_at for when in newest):
        return None
    return [item for item in snap.scenes if isinstance(item, dict) and isinstance(item.get("id"), int)]


def _kept_candidates(
    kept: list[dict], quotable: dict[int, list[tuple[int, int, str, str]]]
) -> list[window.Candidate]:
    """The kept scenes, in their order, each with its kept excerpt (what of it can still be quoted)."""
    out = []
    for item in kept:
        ids = {i for i in item.get("excerpt", ()) if isinstance(i, int)}
        run = tuple((m, t) for m, t, _, _ in quotable.get(item["id"], ()) if m in ids)
        out.append(window.Candidate(item["id"], (window.ExcerptRun(run, len(run) // 2),) if run else ()))
    return out


def _keep(session: Session, chat_id: int, anchor: int, plan: window.MemoryPlan) -> None:
    """Keep this reply's recalled scenes for its swipes; only the newest MAX_SNAPSHOTS of the chat stay."""
    snap = session.get(SceneSnapshot, (chat_id, anchor)) or SceneSnapshot(chat_id=chat_id, anchor_id=anchor)
    snap.scenes = [{"id": r.id, "excerpt": list(r.excerpt)} for r in plan.scenes]
    snap.created_at = utcnow()
    session.add(snap)
    session.flush()
    old = session.exec(
        select(SceneSnapshot.anchor_id)
        .where(SceneSnapshot.chat_id == chat_id)
        .order_by(col(SceneSnapshot.anchor_id).desc())
        .offset(MAX_SNAPSHOTS)
    ).all()
    for anchor_id in old:
        stale = session.get(SceneSnapshot, (chat_id, anchor_id))
        if stale is not None:
            session.delete(stale)


def _decide(
    turn: Turn,
    scenes: Sequence[SceneRow],
    closed: Sequence[window.ClosedScene],
    texts: dict[int, recalled.RecalledText],
    hits: Sequence[recalled.ChunkHit],
    spans: Sequence[recalled.SceneSpan],
    planned,
) -> decision.Decided | None:
    """Step 1 of recall by decision, for a reply with the option on: the scenes the decision model
    picks among the pre-selected ones the reader may recall (before the window). None: not asked."""
    if not (turn.for_reply and turn.settings.adv_decision):
        return None
    first_id = planned([]).first_id
    eligible = [
        c.id
        for c in closed
        if c.enabled and c.has_summary and (first_id is None or c.last_message_id < first_id)
    ]
    if not eligible:
        return None
    decided = decision.Decided()
    ranked = [c.scene_id for c in recalled.scene_candidates(hits, spans, {}) if c.scene_id in set(eligible)]
    chosen = rules.preselect(ranked or eligible[::-1], eligible, turn.settings.adv_max_scenes)
    rows = {sc.id: sc for sc in scenes}
    recaps = [
        rules.RecapForPick(
            sid,
            texts[sid].number,
            texts[sid].first,
            texts[sid].last,
            rows[sid].timeframe,
            rows[sid].participants,
            texts[sid].summary,
        )
        for sid in chosen
    ]
    decision.pick(turn, turn.services, recaps, _query(turn), decided)
    return decided


def _centre(
    turn: Turn,
    decided: decision.Decided,
    scene_ids: Sequence[int],
    quotable: dict[int, list[tuple[int, int, str, str]]],
) -> None:
    ids = {m for sid in scene_ids for m, _, _, _ in quotable.get(sid, ())}
    if not ids:
        return
    numbers = message_numbers(turn.session, turn.chat.id, ids)
    query = _query(turn)
    asked: list[rules.ScoredMessage] = []
    for sid in scene_ids:
        items = [
            rules.ScoredMessage(sid, m, numbers.get(m, 0), name, text)
            for m, _, name, text in quotable.get(sid, ())
        ]
        asked += rules.best_matching(items, query)
    decision.centre(turn, turn.services, asked, query, decided)


def _query(turn: Turn) -> str:
    return recalled.scene_query(
        [recalled.QueryMessage(m.role, m.name, m.content) for m in turn.history.messages],
        turn.speaker.name,
        ignore=(turn.speaker.name, turn.user_name),
    )


def plan_prompt(turn: Turn, pending: PendingSearch | None) -> Planned:
    """The plan for this turn and its blocks."""
    session, chat = turn.session, turn.chat
    scenes = _scenes(session, chat.id)
    reader = turn.speaker.name
    group = group_reading(turn, scenes)
    entries = list(
        session.exec(
            select(SummaryEntry)
            .where(
                SummaryEntry.chat_id == chat.id,
                SummaryEntry.active == True,  # noqa: E712
                SummaryEntry.awaiting_review == False,  # noqa: E712
            )
            .order_by(col(SummaryEntry.first_message_id), col(SummaryEntry.id))
        )
    )
    entry_texts = {
        e.id: EntryText(group.entry_text(e.title), group.entry_text(e.content))
        if group
        else EntryText(visible_to(e.title, reader), visible_to(e.content, reader))
        for e in entries
    }
    constants = [
        window.Constant(
            e.id, count_tokens(summary_block([entry_texts[e.id]])), e.first_message_id, e.last_message_id
        )
        for e in entries
    ]
    spans = [recalled.SceneSpan(sc.id, sc.first_message_id, sc.last_message_id) for sc in scenes]
    anchor = next((m.id for m in reversed(turn.history.messages) if m.content), None)
    # Numbers for what is shown only: the window and the scenes' bounds (their headers) now, the
    # messages quoted once the plan has picked them.
    numbers = _numbers(
        session,
        chat.id,
        {m.id for m in turn.history.messages},
        {i for sc in scenes for i in (sc.first_message_id, sc.last_message_id)},
    )
    history = [
        window.HistoryMessage(m.id, numbers.get(m.id, 0), count_message_tokens(m.content))
        for m in turn.history.messages
        if m.content
    ]
    scene_texts: dict[int, recalled.RecalledText] = {}
    closed: list[window.ClosedScene] = []
    lines = _recollection_lines(turn, scenes, group)
    for n, sc in enumerate(scenes, 1):
        written = sc.state == "written" and bool(sc.summary.strip())
        text = recalled.RecalledText(
            n,
            numbers.get(sc.first_message_id, 0),
            numbers.get(sc.last_message_id, 0),
            group.scene_text(sc.summary, sc.id) if group else visible_to(sc.summary, reader),
            sc.timeframe,
            known_only_to=reading.known_only_to if (reading := group and group.readings.get(sc.id)) else (),
        )
        scene_texts[sc.id] = text
        tokens = count_tokens(recalled.recalled_scenes_block([text], "")) if written else 0
        closed.append(
            window.ClosedScene(
                sc.id,
                sc.first_message_id,
                sc.last_message_id,
                tokens,
                # In a group, a scene its reader does not recall is never planned in.
                enabled=sc.enabled and (group is None or group.readings.get(sc.id) is not None),
                has_summary=written,
                recollections=tuple(
                    count_tokens(recalled.recollection_line(name, line))
                    for name, line in lines.get(sc.id, ())
                ),
            )
        )
    mark_id = window_start(session, chat.id)
    other_tokens = _other_tokens(turn)
    settings = memory_settings(turn.settings)

    def planned(candidates: Sequence[window.Candidate]) -> window.MemoryPlan:
        return window.plan_memory(
            history,
            closed,
            mark_id=mark_id,
            other_tokens=other_tokens,
            settings=settings,
            constants=constants,
            candidates=candidates,
        )

    decided: decision.Decided | None = None  # recall by decision, when a reply asked the model
    kept = _kept(session, chat.id, anchor)
    if kept is not None:
        if pending is not None:
            finish_search(turn.session, pending, k=1)  # let the search's threads end; its ranking is not used
        quotable = _quotable(
            session, chat.id, [sc for sc in scenes if sc.id in {item["id"] for item in kept}], group
        )
        plan = planned(_kept_candidates(kept, quotable))
    else:
        hits = _hits(turn, pending)
        decided = _decide(turn, scenes, closed, scene_texts, hits, spans, planned)
        order = decided.chosen if decided is not None else None
        # The plan picks its scenes by their recaps' sizes alone, and only then their excerpts: a first
        # plan without excerpts tells which scenes' messages to read. Also read: a hit scene holding a
        # message a source excerpt quotes (it is quoted as that scene's message reads, as it always was).
        first_candidates = (
            recalled.scene_candidates(hits, spans, {})
            if order is None
            else [window.Candidate(sid) for sid in order]
        )
        picked = planned(first_candidates)
        sourced = {i for source in picked.source_excerpts for i in source.message_ids}
        hit_scenes = {recalled.scene_of(h.message_ids, spans) for h in hits}
        wanted = {r.id for r in picked.scenes} | {
            sc.id
            for sc in scenes
            if sc.id in hit_scenes and any(sc.first_message_id <= i <= sc.last_message_id for i in sourced)
        }
        quotable = _quotable(session, chat.id, [sc for sc in scenes if sc.id in wanted], group)
        pairs = {sid: [(m, t) for m, t, _, _ in items] for sid, items in quotable.items()}
        normal = recalled.scene_candidates(hits, spans, pairs)
        if order is None or decided is None:
            plan = planned(normal)
        else:
            # Step 2 on the chosen scenes the plan took: the best-scored message centres each excerpt;
            # a scene it could not score keeps normal recall's excerpt (or its middle).
            taken = [r.id for r in picked.scenes]
            _centre(turn, decided, taken, quotable)
            by_scene = {c.scene_id: c for c in normal}
            plan = planned(
                [
                    recalled.centred_candidate(sid, pairs.get(sid, ()), decided.centres[sid])
                    if sid in decided.centres
                    else by_scene.get(sid) or recalled.centred_candidate(sid, pairs.get(sid, ()), None)
                    for sid in order
                ]
            )
    if turn.for_reply and plan.restarted:
        store_window_start(session, chat.id, plan.mark_id)
    if turn.for_reply and anchor is not None and kept is None:
        _keep(session, chat.id, anchor, plan)
    quoted_ids = {i for r in plan.scenes for i in r.excerpt} | {
        i for source in plan.source_excerpts for i in source.message_ids
    }
    numbers.update(message_numbers(session, chat.id, quoted_ids - numbers.keys()))
    by_message = {
        m: (numbers.get(m, 0), name, text)
        for items in quotable.values()
        for m, _, name, text in items
        if m in quoted_ids
    }
    for m in turn.history.messages:
        by_message.setdefault(m.id, (numbers.get(m.id, 0), m.name or m.role, m.content))

    def quoted(ids: Collection[int]) -> tuple[recalled.QuotedMessage, ...]:
        return tuple(recalled.QuotedMessage(*by_message[i]) for i in ids if i in by_message)

    blocks: list[DynamicBlock] = []
    if plan.constants:
        text = summary_block([entry_texts[i] for i in plan.constants])
        blocks.append(DynamicBlock("chat_summary", "Chat Summary", text))
    for source in plan.source_excerpts:
        heading = (
            recalled.CURRENT_SCENE_HEADING
            if source.kind == "open_scene"
            else recalled.CONSTANT_SOURCE_HEADING
        )
        text = recalled.source_excerpt_block(heading, quoted(source.message_ids))
        if text:
            blocks.append(DynamicBlock("current_scene_summary", "Current scene", text))
    if plan.scenes:
        sent = [m for m in history if plan.first_id is not None and m.id >= plan.first_id]
        last_user = max(
            (
                numbers.get(m.id, 0)
                for m in turn.history.messages
                if m.role == "user" and (plan.first_id is None or m.id >= plan.first_id)
            ),
            default=None,
        )
        header = recalled.range_header(
            sent[0].number if sent else None, sent[-1].number if sent else None, last_user
        )
        texts = [
            recalled.RecalledText(
                **{
                    **scene_texts[r.id].__dict__,
                    "excerpt": quoted(r.excerpt),
                    "recollections": tuple(lines[r.id][k] for k in r.recollections),
                }
            )
            for r in plan.scenes
        ]
        blocks.append(
            DynamicBlock("recalled_scenes", "Recalled Scenes", recalled.recalled_scenes_block(texts, header))
        )
    left_out = frozenset(
        m.id for m in turn.history.messages if plan.first_id is not None and m.id < plan.first_id
    )
    receipt = recalled.receipt_lines(
        plan.receipt, plan.problem, {sc.id: scene_texts[sc.id].number for sc in scenes}
    )
    if decided is not None and decided.receipt:
        receipt = (*decided.receipt, *receipt)
    note = "Advanced Memory: " + " ".join(line if line.endswith(".") else line + "." for line in receipt)
    return Planned(Contribution(fixed=tuple(blocks), note=note, receipt=receipt), left_out, plan)
