"""The scene check as a chat runs it (issue 14): after a reply, once `adv_check_interval` new messages
have arrived, the helper model reads them (check.py builds the request and reads the answer) and each
scene end it names closes the open scene: a Scene row from the message after the previous scene's end
to that message, waiting for its recap.

Decisions:
- One check per chat at a time in this process; a check asked for meanwhile is dropped (the next reply
  asks again). Two processes on one database cannot make a scene twice either: a scene is unique by
  its first message, and a check that collides with another's scene writes nothing.
- An end at or before the last stored scene end is not a new scene (the anchor may be named again).
- A failed check (no connection, provider error, unreadable answer) keeps the "last checked" mark, so
  the same messages are checked again, and waits answers.retry_delay (1 min, 5, 30, 2 h, 12 h) before
  the next one; the reason is kept for the panel. An answer cut off is asked again once with twice the
  room (answers.request_max_tokens).
- While the chat's Prepare existing history run is unfinished (prepare.py: running, cancelled or
  failed), the check after a reply does nothing ("preparing"): Prepare walks the same messages in order
  and moves the same mark, and Resume reads the messages that arrived meanwhile. Both close scenes
  through `close_ends` and ask through `ask_scene_ends`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, func, select

from app.chats.models import SCENE_MODES, Chat
from app.chats.service import get_chat
from app.chats.settings import read_settings
from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderConfig, ProviderError
from app.memory.scenes.core.check import (
    CheckWindow,
    NumberedMessage,
    SceneEnds,
    check_due,
    check_request,
    check_window,
    clamp_interval,
    read_scene_ends,
    unreadable,
)
from app.memory.scenes.decision import keep_activity
from app.memory.scenes.messages import ReadableMessage, decision_config, helper_config, readable_messages
from app.memory.scenes.models import PREPARE_STAGES, Scene, SceneRun, SceneState
from app.memory.summaries.core import answers
from app.platform.core.errors import Conflict, UserError
from app.platform.services import Services
from app.platform.timeutil import as_utc, utcnow

log = logging.getLogger(__name__)

CHECK_MAX_TOKENS = 1024  # the answer is a short JSON list; a reasoning model gets more when it runs out
CHECKING = "A scene check is reading this chat right now; try again in a moment."
PREPARING = "Prepare existing history is unfinished in this chat: it reads these messages itself; Resume it."


@dataclass(frozen=True)
class CheckOutcome:
    status: str  # off, paused, preparing, waiting (after a failure), not_due, busy, checked, failed
    closed: tuple[int, ...] = ()  # the scenes this check closed (their ids)
    reason: str = ""


def check_scenes(services: Services, chat_id: int) -> CheckOutcome:
    """Check the chat's newest messages for scene ends when a check is due, and close those scenes."""
    with Session(services.engine) as session:
        chat = session.get(Chat, chat_id)
        if chat is None or chat.mode not in SCENE_MODES:
            return CheckOutcome("off")
        settings = read_settings(chat.settings)
        if not settings.advanced_memory:
            return CheckOutcome("off")
        state = session.get(SceneState, chat_id)
        if state is not None and state.paused:
            return CheckOutcome("paused")
        if preparing(session, chat_id):
            return CheckOutcome("preparing")
        if state is not None and state.next_check_at is not None and as_utc(state.next_check_at) > utcnow():
            return CheckOutcome("waiting", reason=state.reason)
        checked = state.checked_through_id if state is not None else None
        if not _may_be_due(session, chat_id, checked, settings.adv_check_interval):
            return CheckOutcome("not_due")
        messages = readable_messages(session, chat_id)
        new = [m for m in messages if checked is None or m.id > checked]
        if not check_due(len(new), settings.adv_check_interval):
            return CheckOutcome("not_due")
        before = [m.number for m in messages if checked is not None and m.id <= checked]
        window = check_window(
            [NumberedMessage(m.number, m.name, m.text) for m in messages],
            before[-1] if before else None,
            settings.adv_check_interval,
        )
        if not window.messages:
            return CheckOutcome("not_due")
        decider = decision_config(session, services, chat)
        try:
            config = helper_config(session, services, chat)
        except UserError as err:
            if decider is None:
                return _failed(services, chat_id, str(err))
            config = decider
        request = check_request(window.anchor, window.messages)
    if not services.claims.scene_checks.claim(chat_id):
        return CheckOutcome("busy")
    try:
        if decider is not None:
            # The decision model finds the scene ends; unavailable, the helper's check stands in.
            started = time.monotonic()
            result = ask_scene_ends(decider, request, window.allowed_ends)
            note_check(services, chat_id, decider.model, result, window, time.monotonic() - started)
            if isinstance(result, answers.Failure) and config is not decider:
                result = ask_scene_ends(config, request, window.allowed_ends)
        else:
            result = ask_scene_ends(config, request, window.allowed_ends)
        by_number = {m.number: m for m in messages}
        if isinstance(result, answers.Failure):
            last = by_number[window.last_number]
            skippable = last.id if unreadable(result) else None
            return _failed(
                services, chat_id, result.reason, span=window_span(window), unreadable_through=skippable
            )
        with Session(services.engine) as session:
            try:
                closed = close_ends(
                    session,
                    chat_id,
                    messages,
                    [by_number[n].id for n in result.numbers],
                    checked_through=by_number[window.last_number].id,
                )
                session.commit()
            except IntegrityError:  # another process closed the same scene meanwhile: its check stands
                session.rollback()
                return CheckOutcome("busy")
            return CheckOutcome("checked", tuple(s.id for s in closed if s.id is not None))
    finally:
        services.claims.scene_checks.release(chat_id)


# At most `interval` of the messages after the last checked one that readable_messages might keep
# (its strip() aside): fewer than the interval and no check is due, read on an index, without the
# chat's messages. Only then is every message read.
_MAYBE_NEW_SQL = text(
    "SELECT count(*) FROM (SELECT 1 FROM message WHERE chat_id = :chat_id AND kind = 'message'"
    " AND hidden = false AND status NOT IN ('error', 'streaming') AND id > :after LIMIT :most) AS arrived"
)


def _may_be_due(session: Session, chat_id: int, checked: int | None, interval: int) -> bool:
    """False when too few messages arrived since the last check for one to be due (the after-reply
    check then reads nothing more); True when the readable ones must be counted."""
    limit = clamp_interval(interval)
    params = {"chat_id": chat_id, "after": checked if checked is not None else -1, "most": limit}
    maybe = int(session.connection().execute(_MAYBE_NEW_SQL, params).scalar_one())
    return check_due(maybe, interval)


def _prepare_status(session: Session, chat_id: int) -> str | None:
    return session.exec(
        select(SceneRun.status)
        .where(SceneRun.chat_id == chat_id, col(SceneRun.stage).in_(PREPARE_STAGES))
        .order_by(col(SceneRun.id).desc())
        .limit(1)
    ).first()


def preparing(session: Session, chat_id: int) -> bool:
    """Whether the chat's newest Prepare existing history run is unfinished (running, cancelled or
    failed): until it is done, the chat's scenes are Prepare's."""
    status = _prepare_status(session, chat_id)
    return status is not None and status != "done"


def prepare_running(session: Session, chat_id: int) -> bool:
    """Whether the chat's Prepare existing history is running now (a run a restart cut short is resumed
    at start, so "running" always has a thread at work)."""
    return _prepare_status(session, chat_id) == "running"


def note_check(services: Services, chat_id: int, model: str, result: object, window, seconds: float) -> None:
    """Keep the decision model's scene check for Peek Prompt → Advanced Memory activity."""
    ok = not isinstance(result, answers.Failure)
    data: dict = {"step": "scene_check", "window": [window.messages[0].number, window.last_number]}
    if ok:
        data["ends"] = list(result.numbers)  # type: ignore[attr-defined]
    else:
        data["fallback"] = f"{result.reason}: the helper's scene check used"  # type: ignore[attr-defined]
    with Session(services.engine) as session:
        keep_activity(session, chat_id, model, seconds, len(window.messages), ok, data)
        session.commit()


def ask_scene_ends(
    config: ProviderConfig, request: list[dict], allowed: frozenset[int]
) -> SceneEnds | answers.Failure:
    """The helper's scene ends for one window. A cut-off answer is asked again with more room; an
    unreadable one once more as it was (a model that wandered off the format usually keeps to it the
    second time). The Failure that remains is `check.unreadable` unless the provider failed."""
    attempt, asked_again = 0, False
    result: SceneEnds | answers.Failure = answers.Failure("empty", "The helper gave no answer.")
    while (budget := answers.request_max_tokens(CHECK_MAX_TOKENS, attempt)) is not None:
        try:
            done = complete_chat_blocking(config, request, GenerationParams(max_tokens=budget))
        except ProviderError as err:
            return answers.Failure("provider", str(err))
        result = read_scene_ends(done.text or "", done.finish_reason, allowed, reasoning=done.reasoning)
        if not isinstance(result, answers.Failure):
            return result
        if result.retry_larger:
            attempt += 1
        elif unreadable(result) and not asked_again:
            asked_again = True
        else:
            return result
    return result


def _state(session: Session, chat_id: int) -> SceneState:
    return session.get(SceneState, chat_id) or SceneState(chat_id=chat_id)


def _failed(
    services: Services, chat_id: int, reason: str, *, span: str = "", unreadable_through: int | None = None
) -> CheckOutcome:
    with Session(services.engine) as session:
        state = _state(session, chat_id)
        state.failures += 1
        state.reason = (
            f"The scene check of {span} failed: {reason}" if span else f"The scene check failed: {reason}"
        )
        state.unreadable_through_id = unreadable_through
        state.next_check_at = utcnow() + answers.retry_delay(state.failures)
        state.updated_at = utcnow()
        session.add(state)
        session.commit()
    log.info("scene check in chat %s failed: %s", chat_id, reason)
    return CheckOutcome("failed", reason=reason)


def window_span(window: CheckWindow) -> str:
    """ "messages 41–50" (or "message 41"): the batch a check or Prepare reads, as the user numbers it."""
    first, last = window.messages[0].number, window.messages[-1].number
    return f"messages {first}–{last}" if first != last else f"message {first}"


def skip_unreadable(services: Services, chat_id: int) -> None:
    """Treat the batch whose answer could not be read (after one retry) as having no scene end: the
    chat's "last checked" mark moves past it and the failure is cleared; the next check reads on."""
    with Session(services.engine) as session:
        chat = get_chat(session, chat_id)
        state = session.get(SceneState, chat_id)
        if state is None or state.unreadable_through_id is None or not state.failures:
            raise UserError("The scene check has no batch left unread; nothing to skip.")
        if preparing(session, chat_id):
            raise Conflict(PREPARING)
        if not services.claims.scene_checks.claim(chat_id):
            raise Conflict(CHECKING)
        try:
            close_ends(
                session,
                chat_id,
                readable_messages(session, chat_id),
                [],
                checked_through=state.unreadable_through_id,
            )
            session.commit()
        finally:
            services.claims.scene_checks.release(chat_id)
        log.info("scene check in chat %s: a batch treated as having no scene end", chat.id)


def last_scene_end(session: Session, chat_id: int) -> int | None:
    """The last message of the chat's newest closed scene."""
    return session.exec(select(func.max(Scene.last_message_id)).where(Scene.chat_id == chat_id)).one()


def close_ends(
    session: Session,
    chat_id: int,
    messages: Sequence[ReadableMessage],
    ends: Sequence[int],
    *,
    checked_through: int,
) -> list[Scene]:
    """Close a scene at each end (message ids) the helper named, and move the chat's "last checked" mark
    to `checked_through`, clearing a failure; the new scenes, added to `session`, not committed. The
    caller commits; an IntegrityError (from this or the commit) means another check closed the same
    scene meanwhile. An end at or before the newest stored scene's end is not a new scene."""
    last_end = last_scene_end(session, chat_id)
    closed: list[Scene] = []
    for end_id in sorted(ends):
        if last_end is not None and end_id <= last_end:
            continue  # the scene it ends is stored already
        first_id = next(m.id for m in messages if last_end is None or m.id > last_end)
        scene = Scene(chat_id=chat_id, first_message_id=first_id, last_message_id=end_id)
        session.add(scene)
        closed.append(scene)
        last_end = end_id
    state = _state(session, chat_id)
    state.checked_through_id = max(checked_through, state.checked_through_id or 0)
    state.reason, state.failures, state.next_check_at, state.updated_at = "", 0, None, utcnow()
    state.unreadable_through_id = None
    session.add(state)
    return closed


def close_open_scene(session: Session, chat_id: int) -> Scene | None:
    """End the scene still open at the chat's newest readable message (a Game session ends: its last
    scene gets a recap like the others); None when no message is left after the newest stored scene.
    Added to `session`, not committed: an IntegrityError at commit means a check closed it meanwhile."""
    messages = readable_messages(session, chat_id)
    last_end = last_scene_end(session, chat_id)
    open_part = [m for m in messages if last_end is None or m.id > last_end]
    if not open_part:
        return None
    closed = close_ends(session, chat_id, messages, [open_part[-1].id], checked_through=open_part[-1].id)
    return closed[0] if closed else None
