"""Writing a closed scene's recap: the helper model is asked, the answer checked, the recap stored.
The shell around the pure `recap.py` and `participants.py` (their docstrings hold the flow and the
reading decisions); this module does the I/O.

- `write_recap(services, scene_id)` writes one scene's recap and says how it went ("written",
  "failed: <reason>", "skipped: <why>").
- `write_waiting_recaps(services, chat_id, limit=…)` writes the chat's scenes still waiting (and the
  failed ones whose retry time has come), oldest first.
- `release_stale(services)` puts back to "waiting" the scenes a crash or restart left in "writing".

Decisions:
- One writer per scene: it is claimed by ONE conditional UPDATE ("waiting"/"failed" and not manual →
  "writing"). A second writer (another thread, the same scene asked again after a swipe or a restart)
  claims nothing and is skipped, so a scene is never recapped twice at once nor written twice. The
  writer also holds a database claim of the scene (`Services.held_scenes`, kind SCENE_RECAPS), taken
  before the UPDATE, so `release_stale` can tell a "writing" a crash or a dead server left behind from
  one a writer holds now, on any server: a restart drops its last life's claims, a dead server's go
  stale. `write_waiting_recaps` calls it first, the app's start and the look for dead servers' work do too.
- The recap is stored with one more conditional UPDATE (still "writing", still not manual): a recap
  the user edited while the helper wrote is kept, and the helper's is dropped ("skipped").
- Input budget: INPUT_BUDGET_TOKENS (12,000) of transcript per request. Helper models are often small
  local ones with 16k–32k contexts; 12k leaves room for the instructions (~400 tokens) and the
  answer's reasoning and text within 32k, and most scenes still fit one request.
- A scene that needs several requests saves each batch's recap (a SceneRecapPart with a fingerprint of
  its messages) before asking the next: a restart resumes after the last part saved; a saved part whose
  messages changed (edit, swipe, hide), or whose batch changed, is asked again; parts past the new last
  one are deleted. Parts are kept after the recap is stored (a re-summarised scene reuses the ones
  still valid). The parts are combined in rounds (`recap.combine_groups`) into the scene's recap.
- A cut-off (or thinking-only) answer is asked again with a larger budget (`answers.request_max_tokens`);
  still cut off: the batch is halved and its halves recapped and combined, at most MAX_SPLIT_DEPTH
  times (a helper that cuts everything off is not called hundreds of times). Never a cut recap.
- Participants: the scene's speakers are the messages' authors whose name is a chat character's card
  name. A recap leaving one out is asked once more with `must_include` (the request that made the
  final recap: the batch, or the last combine). Still missing: stored anyway, flagged check_who, and
  every chat character may recall it (never silently dropped). Otherwise `participants.recap_audience`
  decides (check_who in a group chat when the helper's names were missing or unclear).
- Any failure (no helper connection, provider error or timeout, garbage, empty, only thinking, an
  error of ours) keeps the scene's earlier summary untouched, sets "failed" with the reason as a
  sentence, attempts + 1 and next_attempt_at after `answers.retry_delay(attempts)`. Saved parts stay.
- A scene with no readable message left (all hidden or deleted) fails with a sentence saying so.
- A scene with a message being written (the user is swiping or continuing its last reply) is not
  recapped now: the writer reads the scene's messages and their "streaming" marks in one query and gives
  the claim back without a failure (`STREAMING`). Reading it anyway left that message out of the recap
  (issue 21: "a recap twice covered one message less"). The reply's after-reply work writes it once
  the reply has ended.
- `write_waiting_recaps` honours Pause (SceneState.paused) and stops at the first failure: a broken
  helper is not called once per waiting scene. Whether Advanced Memory is on is the caller's (the job's)
  question; the summary is stored without its header (`recap.recap_header` is the prompt's), the
  timeframe beside it (the helper's, else the time anchors found in the messages).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.chats.history import private_messages
from app.chats.models import Chat
from app.chats.service import chat_characters, chat_persona
from app.chats.settings import read_settings
from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderConfig, ProviderError
from app.memory.scenes.core import access
from app.memory.scenes.core import participants as who
from app.memory.scenes.core import recap as rc
from app.memory.scenes.messages import helper_config, messages_and_streaming
from app.memory.scenes.models import Scene, SceneRecapPart, SceneState
from app.memory.summaries.core import answers
from app.platform.claims import SCENE_RECAPS, ClaimTable
from app.platform.core.errors import UserError
from app.platform.services import Services
from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)

INPUT_BUDGET_TOKENS = 12_000  # transcript tokens per helper request (see the module docstring)
MAX_SPLIT_DEPTH = 2  # a batch cut off even with the larger budget is halved at most twice (4 pieces)
MAX_RECAPS_PER_RUN = 20  # scenes one write_waiting_recaps call writes
INTERNAL = "Something went wrong on Sugo's side while writing the scene's recap; the log has the details."
# A message of the scene is being written (a new version of its last reply, a Continue): the recap waits
# for the reply to end (its after-reply work writes it), or it would describe the scene without it.
STREAMING = "skipped: a message of the scene is being written"
NOTHING_TO_READ = (
    "Every message of this scene is hidden from the AI, failed or deleted: there is nothing to recap."
)


class HeldScenes:
    """The scenes a recap writer is writing now (`Services.held_scenes`), on every server sharing the
    database: a claim of kind SCENE_RECAPS per scene (app/platform/claims.py), refreshed by the
    server's heartbeat, so a server that dies leaves its scenes to go stale and another writes them."""

    def __init__(self, table: ClaimTable) -> None:
        self._table = table

    def hold(self, scene_id: int) -> bool:
        """Take the scene; False when a writer (of any server) holds it."""
        return self._table.take(SCENE_RECAPS, scene_id) is not None

    def let_go(self, scene_id: int) -> None:
        self._table.give_back(SCENE_RECAPS, scene_id)

    def held(self) -> list[int]:
        """The scenes held now, on any server."""
        return self._table.chats(SCENE_RECAPS)

    def live_ids(self) -> Select:
        return self._table.live_ids(SCENE_RECAPS)


# Claims --------------------------------------------------------------------------------------------


def release_stale(services: Services, session: Session | None = None) -> int:
    """Put back to "waiting" the scenes left in "writing" that no writer holds (a crash, a restart or a
    server that died cut their writer short); how many. One statement reads the live claims and changes
    the scenes: a writer claims its scene before marking it "writing", so none is put back under it.
    `session`: the caller's, committed here (what it holds with it), so a caller holding a connection of
    the pool never waits for a second one."""
    if session is None:
        with Session(services.engine) as own:
            return release_stale(services, own)
    stmt = update(Scene).where(
        col(Scene.state) == "writing", col(Scene.id).not_in(services.held_scenes.live_ids())
    )
    result = session.exec(stmt.values(state="waiting", updated_at=utcnow()))  # type: ignore[call-overload]
    session.commit()
    return int(result.rowcount or 0)


def _claim(services: Services, scene_id: int, states: tuple[str, ...] = ("waiting", "failed")) -> str | None:
    """Claim the scene for this writer: None, or why it cannot be claimed (the outcome to return)."""
    engine, held = services.engine, services.held_scenes
    if not held.hold(scene_id):  # before the UPDATE: release_stale never sees our claim as stale
        return "skipped: already being written"
    try:
        with Session(engine) as session:
            stmt = update(Scene).where(
                col(Scene.id) == scene_id,
                col(Scene.state).in_(states),
                col(Scene.manual) == False,  # noqa: E712
            )
            result = session.exec(stmt.values(state="writing", updated_at=utcnow()))  # type: ignore[call-overload]
            session.commit()
            claimed = result.rowcount == 1
    except BaseException:
        held.let_go(scene_id)
        raise
    if claimed:
        return None
    held.let_go(scene_id)
    return _why_not_claimed(engine, scene_id)


def _why_not_claimed(engine: Engine, scene_id: int) -> str:
    with Session(engine) as session:
        scene = session.get(Scene, scene_id)
    if scene is None:
        return "skipped: no such scene"
    if scene.manual:
        return "skipped: the recap was edited by hand"
    if scene.state == "writing":
        return "skipped: already being written"
    return f"skipped: already {scene.state}"


# What one run reads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Work:
    scene_id: int
    config: ProviderConfig
    messages: tuple[rc.SceneMessage, ...]
    ids: dict[int, int]  # message number → message id
    fingerprint: str
    characters: tuple[str, ...]
    persona: str | None
    speakers: tuple[str, ...]
    max_summary_tokens: int
    parts: dict[int, SceneRecapPart]  # saved parts by number
    private_key: str = ""  # who saw what, stored with the recap (core/access.py)


def fingerprint(messages: Sequence[rc.SceneMessage]) -> str:
    """A hash of messages as the helper reads them (authors, texts, pieces). Not their numbers: deleting
    an earlier message renumbers every later scene without changing what any of them says, and must not
    make them all look changed to Fix (the prompt numbers a recap from the messages at the time)."""
    digest = hashlib.sha256()
    for m in messages:
        # Who saw it counts too (a group's private messages): a recap written before a message was
        # hidden from someone, or whispered, told everyone; it is written again.
        digest.update(
            repr((m.name, m.text, m.part, m.seen_by) if m.seen_by else (m.name, m.text, m.part)).encode()
        )
        digest.update(b"\x00")
    return digest.hexdigest()


def _gather(session: Session, services: Services, scene: Scene) -> _Work | str:
    chat = session.get(Chat, scene.chat_id)
    if chat is None:
        return "The chat of this scene no longer exists."
    try:
        config = helper_config(session, services, chat)
    except UserError as err:
        return str(err)
    everything, streaming = messages_and_streaming(session, chat.id)
    if any(scene.first_message_id <= mid <= scene.last_message_id for mid in streaming):
        return STREAMING
    readable = [m for m in everything if scene.first_message_id <= m.id <= scene.last_message_id]
    if not readable:
        return NOTHING_TO_READ
    messages = tuple(rc.SceneMessage(m.number, m.name, m.text, seen_by=m.seen_by) for m in readable)
    characters = tuple(c.name for c in chat_characters(session, chat.id))
    persona = chat_persona(session, chat)
    by_key = {" ".join(c.split()).casefold(): c for c in characters}
    speakers: list[str] = []
    for m in readable:
        card = by_key.get(" ".join(m.name.split()).casefold())
        if card and card not in speakers:
            speakers.append(card)
    parts = session.exec(select(SceneRecapPart).where(SceneRecapPart.scene_id == scene.id)).all()
    for part in parts:
        session.expunge(part)
    return _Work(
        scene_id=scene.id or 0,
        config=config,
        messages=messages,
        ids={m.number: m.id for m in readable},
        fingerprint=fingerprint(messages),
        characters=characters,
        persona=persona.name if persona else None,
        speakers=tuple(speakers),
        max_summary_tokens=read_settings(chat.settings).summary_max_tokens,
        parts={p.part: p for p in parts},
        private_key=access.private_key(
            access.inside(scene.first_message_id, scene.last_message_id, private_messages(session, chat.id))
        ),
    )


# Asking the helper ---------------------------------------------------------------------------------


def _ask(work: _Work, request: list[dict[str, str]]) -> rc.Recap | answers.Failure:
    """One request, asked again with a larger budget when the answer was cut off or only thinking."""
    attempt = 0
    result: rc.Recap | answers.Failure = answers.Failure("internal", INTERNAL)
    while (budget := answers.request_max_tokens(work.max_summary_tokens, attempt)) is not None:
        try:
            done = complete_chat_blocking(work.config, request, GenerationParams(max_tokens=budget))
        except ProviderError as err:
            return answers.Failure("provider", str(err))
        result = rc.read_recap(
            done.text or "", done.finish_reason, done.reasoning, max_summary_tokens=work.max_summary_tokens
        )
        if not isinstance(result, answers.Failure) or not result.retry_larger:
            return result
        attempt += 1
    return result


def _recap_batch(
    work: _Work,
    batch: Sequence[rc.SceneMessage],
    *,
    part: tuple[int, int] | None,
    must_include: Sequence[str] = (),
    budget: int | None = None,
    depth: int = 0,
) -> rc.RecapPart | answers.Failure:
    """The recap of one batch; halved when it is cut off even with the larger budget."""
    first, last = batch[0].number, batch[-1].number
    request = rc.recap_request(
        batch, first_number=first, last_number=last, part=part, must_include=must_include
    )
    result = _ask(work, request)
    if isinstance(result, rc.Recap):
        return rc.RecapPart(first, last, result)
    if not result.retry_larger or depth >= MAX_SPLIT_DEPTH:
        return result
    budget = budget or INPUT_BUDGET_TOKENS
    halves = rc.recap_batches(batch, input_budget_tokens=budget // 2)
    if len(halves) < 2:
        return result
    pieces: list[rc.RecapPart] = []
    for k, half in enumerate(halves, 1):
        piece = _recap_batch(
            work, half, part=(k, len(halves)), must_include=must_include, budget=budget // 2, depth=depth + 1
        )
        if isinstance(piece, answers.Failure):
            return piece
        pieces.append(piece)
    combined, _ = _combine(work, pieces, must_include)
    return combined


def _combine_group(
    work: _Work, group: Sequence[rc.RecapPart], must_include: Sequence[str]
) -> rc.RecapPart | answers.Failure:
    result = _ask(work, rc.combine_request(group, must_include=must_include))
    return result if isinstance(result, answers.Failure) else rc.finish_combined(result, group)


def _combine(
    work: _Work, parts: Sequence[rc.RecapPart], must_include: Sequence[str] = ()
) -> tuple[rc.RecapPart | answers.Failure, list[rc.RecapPart]]:
    """The parts combined round after round into one; and the group of the last combine request."""
    current = list(parts)
    while len(current) > 1:
        groups = rc.combine_groups(current, input_budget_tokens=INPUT_BUDGET_TOKENS)
        final = len(groups) == 1
        combined: list[rc.RecapPart] = []
        for group in groups:
            if len(group) == 1:
                combined.append(group[0])
                continue
            result = _combine_group(work, group, must_include if final else ())
            if isinstance(result, answers.Failure):
                return result, group
            combined.append(result)
        if final:
            return combined[0], groups[0]
        current = combined
    return current[0], list(current)


# The run -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Written:
    recap: rc.Recap
    first: int
    last: int
    again: Callable[[Sequence[str]], rc.RecapPart | answers.Failure]  # the final request, with must_include


def _write(work: _Work, engine: Engine) -> _Written | str:
    """The scene's recap, saving parts as they are done; a failure's reason otherwise."""
    batches = rc.recap_batches(work.messages, input_budget_tokens=INPUT_BUDGET_TOKENS)
    if len(batches) == 1:
        batch = batches[0]
        result = _recap_batch(work, batch, part=None)
        if isinstance(result, answers.Failure):
            return result.reason
        return _Written(
            result.recap,
            result.first,
            result.last,
            lambda names: _recap_batch(work, batch, part=None, must_include=names),
        )
    parts: list[rc.RecapPart] = []
    n = len(batches)
    for k, batch in enumerate(batches, 1):
        saved = _saved_part(work, k, batch)
        if saved is not None:
            parts.append(saved)
            continue
        result = _recap_batch(work, batch, part=(k, n))
        if isinstance(result, answers.Failure):
            return f"Part {k} of {n}: {result.reason}"
        _save_part(engine, work, k, batch, result)
        parts.append(result)
    _drop_parts_after(engine, work.scene_id, n)
    combined, final_group = _combine(work, parts)
    if isinstance(combined, answers.Failure):
        return f"Combining the {n} parts: {combined.reason}"
    return _Written(
        combined.recap, combined.first, combined.last, lambda names: _combine_group(work, final_group, names)
    )


def _saved_part(work: _Work, k: int, batch: Sequence[rc.SceneMessage]) -> rc.RecapPart | None:
    saved = work.parts.get(k)
    if saved is None or saved.fingerprint != fingerprint(batch):
        return None
    names = saved.participants if isinstance(saved.participants, list) else None
    return rc.RecapPart(
        batch[0].number, batch[-1].number, rc.Recap(saved.summary, _names(names), saved.timeframe)
    )


def _names(names: list | None) -> tuple[str, ...] | None:
    return None if names is None else tuple(str(n) for n in names)


def _save_part(
    engine: Engine, work: _Work, k: int, batch: Sequence[rc.SceneMessage], part: rc.RecapPart
) -> None:
    with Session(engine) as session:
        old = session.exec(
            select(SceneRecapPart).where(SceneRecapPart.scene_id == work.scene_id, SceneRecapPart.part == k)
        ).first()
        row = old or SceneRecapPart(
            scene_id=work.scene_id, part=k, first_message_id=0, last_message_id=0, summary=""
        )
        row.first_message_id, row.last_message_id = work.ids[batch[0].number], work.ids[batch[-1].number]
        row.summary, row.fingerprint = part.recap.summary, fingerprint(batch)
        row.participants = list(part.recap.participants) if part.recap.participants is not None else None
        row.timeframe = part.recap.timeframe
        row.created_at = utcnow()
        session.add(row)
        session.commit()


def _drop_parts_after(engine: Engine, scene_id: int, n: int) -> None:
    with Session(engine) as session:
        for row in session.exec(
            select(SceneRecapPart).where(SceneRecapPart.scene_id == scene_id, SceneRecapPart.part > n)
        ):
            session.delete(row)
        session.commit()


def _settle_participants(written: _Written, job: _Work) -> tuple[rc.Recap, list[str], bool]:
    """The recap to store, who may recall it, and whether to flag "Check who was there"."""
    recap = written.recap
    kw = {"characters": job.characters, "persona": job.persona}
    missing = who.missing_speakers(recap, job.speakers, **kw)
    if missing:
        again = written.again(missing)
        if isinstance(again, rc.RecapPart):
            recap = again.recap
            missing = who.missing_speakers(recap, job.speakers, **kw)
        if missing:  # stored anyway, for everyone, and flagged: never dropped silently
            names = list(job.characters) + [m for m in missing if m not in job.characters]
            return recap, names, True
    audience = who.recap_audience(recap, speakers=job.speakers, group=len(job.characters) > 1, **kw)
    return recap, list(audience.characters), audience.check_who_was_there


def write_recap(services: Services, scene_id: int, *, rewrite: bool = False) -> str:
    """Write one closed scene's recap with the chat's helper model: "written", "failed: <reason>" or
    "skipped: <why>" (already written or being written, edited by hand, paused).

    `rewrite` (Fix): a written scene, not edited by hand, is written again; a failure leaves it written,
    its recap untouched and still recalled, the reason kept (fix.py lists it again)."""
    engine = services.engine
    with Session(engine) as session:
        scene = session.get(Scene, scene_id)
        if (
            scene is not None
            and (state := session.get(SceneState, scene.chat_id)) is not None
            and state.paused
        ):
            return "skipped: paused"
    if (
        skipped := _claim(services, scene_id, ("written",) if rewrite else ("waiting", "failed"))
    ) is not None:
        return skipped
    back = "written" if rewrite else "failed"
    try:
        with Session(engine) as session:
            scene = session.get(Scene, scene_id)
            work = _gather(session, services, scene) if scene is not None else "The scene no longer exists."
        if work == STREAMING:
            return _put_back(engine, scene_id, "written" if rewrite else "waiting")
        if isinstance(work, str):
            return _fail(engine, scene_id, work, back)
        written = _write(work, engine)
        if isinstance(written, str):
            return _fail(engine, scene_id, written, back)
        recap, names, check_who = _settle_participants(written, work)
        return _store(engine, work, recap, names, check_who)
    except Exception:
        log.exception("writing the recap of scene %s failed", scene_id)
        return _fail(engine, scene_id, INTERNAL, back)
    finally:
        services.held_scenes.let_go(scene_id)


def _anchored_timeframe(messages: Sequence[rc.SceneMessage]) -> str:
    """The scene's timeframe from the time marks in its messages, when the helper gave none."""
    anchors = rc.timeline_anchors(messages)
    if not anchors:
        return ""
    first, last = anchors[0].text, anchors[-1].text
    return first if first == last else f"{first} – {last}"


def _store(engine: Engine, work: _Work, recap: rc.Recap, names: list[str], check_who: bool) -> str:
    timeframe = recap.timeframe or _anchored_timeframe(work.messages)
    with Session(engine) as session:
        stmt = update(Scene).where(
            col(Scene.id) == work.scene_id,
            col(Scene.state) == "writing",
            col(Scene.manual) == False,  # noqa: E712
        )
        result = session.exec(
            stmt.values(  # type: ignore[call-overload]
                state="written",
                summary=recap.summary,
                participants=names,
                timeframe=timeframe,
                check_who=check_who,
                participants_checked=True,
                fingerprint=work.fingerprint,
                private_key=work.private_key,
                reason="",
                attempts=0,
                next_attempt_at=None,
                updated_at=utcnow(),
            )
        )
        session.commit()
    return "written" if result.rowcount == 1 else "skipped: the recap was edited by hand meanwhile"


def _put_back(engine: Engine, scene_id: int, state: str) -> str:
    """Give the claim back without a failure (nothing was asked): the scene is written later."""
    with Session(engine) as session:
        stmt = update(Scene).where(col(Scene.id) == scene_id, col(Scene.state) == "writing")
        session.exec(stmt.values(state=state))  # type: ignore[call-overload]
        session.commit()
    return STREAMING


def _fail(engine: Engine, scene_id: int, reason: str, state: str = "failed") -> str:
    """Mark the scene failed with `reason` (a rewrite goes back to "written"); its summary, participants,
    timeframe and fingerprint stay as they were."""
    with Session(engine) as session:
        scene = session.get(Scene, scene_id)
        if scene is None or scene.state != "writing":
            return f"failed: {reason}"
        scene.attempts += 1
        scene.state, scene.reason = state, reason
        scene.next_attempt_at = utcnow() + answers.retry_delay(scene.attempts)
        scene.updated_at = utcnow()
        session.add(scene)
        session.commit()
    return f"failed: {reason}"


def write_waiting_recaps(services: Services, chat_id: int, *, limit: int = MAX_RECAPS_PER_RUN) -> int:
    """Write the chat's waiting recaps, and the failed ones whose retry time has come, oldest scene first
    (at most `limit`); how many were written. Stops at the first failure; does nothing while paused."""
    engine = services.engine
    release_stale(services)
    with Session(engine) as session:
        state = session.get(SceneState, chat_id)
        if state is not None and state.paused:
            return 0
        due = (col(Scene.state) == "waiting") | (
            (col(Scene.state) == "failed")
            & (col(Scene.next_attempt_at).is_(None) | (col(Scene.next_attempt_at) <= utcnow()))
        )
        ids = session.exec(
            select(Scene.id)
            .where(Scene.chat_id == chat_id, col(Scene.manual) == False, due)  # noqa: E712
            .order_by(col(Scene.first_message_id))
            .limit(max(limit, 0))
        ).all()
    written = 0
    for scene_id in ids:
        outcome = write_recap(services, scene_id)
        if outcome == "written":
            written += 1
        elif outcome.startswith("failed"):
            break
    return written
