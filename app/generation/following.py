"""Following a reply another server writes (several Sugo servers on one PostgreSQL database): the
page asks this server, which writes nothing in that chat, so it reads the reply's version as the
writer stores it (every SUGO_STREAM_FLUSH_S, 0.5 s by default) and streams the same events the writer
sends its own pages, until the writer gives its claim back; then the last event, read from how the
version was left.

Decisions:
- Polling the stored version (FOLLOW_POLL_S), not LISTEN/NOTIFY: the writer stores it anyway, every
  database Sugo runs on answers the read, and a follower costs one short read per poll.
- The claim is read before the version at every poll: once the claim is gone the version read after
  it is the final one (the writer finishes the version before it gives the claim back).
- A follow ends by itself after FOLLOW_LIMIT_S (the page's watch, or a reload, follows again) and
  when the browser goes away."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from sqlalchemy import String, cast, or_
from sqlmodel import Session, col, select
from starlette.concurrency import run_in_threadpool

from app.chats.models import Message
from app.generation.core.following import StoredReply, end_event, growth_events
from app.generation.reasoning import thought_label
from app.generation.reply import STOPPED, Generations, shown_call

FOLLOW_POLL_S = 0.3
FOLLOW_LIMIT_S = 15 * 60.0
# The writer's reply may outlive its streaming status by a moment (split at its scene breaks, then the
# claim given back): this many polls after it was finished, the follower ends without the give-back.
POLLS_AFTER_FINISH = 10


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


async def follow_stored(
    generations: Generations,
    chat_id: int,
    token: str,
    *,
    disconnected: Callable[[], Awaitable[bool]],
) -> AsyncIterator[str]:
    """SSE for a page following the reply the claim `token` (another server's) is writing in the chat."""
    engine = generations.engine
    deadline = time.monotonic() + FOLLOW_LIMIT_S

    async def still_writing() -> bool:
        return await run_in_threadpool(generations.written_elsewhere, chat_id) == token

    async def go_on() -> bool:
        """Wait for the next poll; False when the page went away or the follow ran too long."""
        if time.monotonic() > deadline or await disconnected():
            return False
        await asyncio.sleep(FOLLOW_POLL_S)
        return True

    # The claim is taken just before the reply's version is stored: it may not be there yet. None
    # shows for Impersonate, whose draft is never stored; the follow then ends with the claim.
    found = await run_in_threadpool(_streaming_version, engine, chat_id)
    while found is None:
        if not await still_writing() or not await go_on():
            return
        found = await run_in_threadpool(_streaming_version, engine, chat_id)
    message_id, swipe_id, swipe_index = found
    yield sse("start", {"message_id": message_id, "swipe_index": swipe_index, "action": "follow"})
    shown = StoredReply()
    finished_for = 0
    while True:
        writing = await still_writing()
        stored = await run_in_threadpool(_read_version, engine, message_id, swipe_id)
        if stored is None:  # deleted meanwhile: nothing more to show
            return
        for event, data in growth_events(shown, stored, message_id=message_id, label=thought_label):
            yield sse(event, data)
        shown = stored
        finished_for = finished_for + 1 if stored.status != "streaming" else 0
        if not writing or finished_for > POLLS_AFTER_FINISH:
            ids = await run_in_threadpool(_reply_messages, engine, chat_id, message_id)
            event, data = end_event(stored, message_id=message_id, message_ids=ids, stopped_error=STOPPED)
            yield sse(event, data)
            return
        if not await go_on():
            return


def _streaming_version(engine, chat_id: int) -> tuple[int, str, int] | None:
    """The chat's newest reply being written: its message, its version's id and index."""
    maybe = or_(col(Message.status) == "streaming", cast(Message.swipes, String).contains('"streaming"'))
    with Session(engine) as session:
        rows = session.exec(
            select(Message).where(Message.chat_id == chat_id, maybe).order_by(col(Message.id).desc()).limit(5)
        )
        for msg in rows:
            for index, swipe in enumerate(msg.swipes):
                if swipe.get("status") == "streaming" and swipe.get("id"):
                    return msg.id, swipe["id"], index
    return None


def _read_version(engine, message_id: int, swipe_id: str) -> StoredReply | None:
    with Session(engine) as session:
        msg = session.get(Message, message_id)
        swipe = next((s for s in msg.swipes if s.get("id") == swipe_id), None) if msg else None
    if swipe is None:
        return None
    ms = swipe.get("reasoning_ms")
    return StoredReply(
        text=swipe.get("content") or "",
        reasoning=swipe.get("reasoning") or "",
        reasoning_ms=ms if isinstance(ms, int) and not isinstance(ms, bool) else None,
        tool_calls=tuple(shown_call(record) for record in swipe.get("tool_calls") or ()),
        status=swipe.get("status") or "ok",
        error=swipe.get("error"),
    )


def _reply_messages(engine, chat_id: int, message_id: int) -> list[int]:
    """The messages holding the finished reply: it, and the parts a split at its scene breaks added after it."""
    with Session(engine) as session:
        later = session.exec(
            select(Message.id).where(
                Message.chat_id == chat_id, col(Message.id) > message_id, Message.role == "assistant"
            )
        )
        return [message_id, *sorted(later)]
