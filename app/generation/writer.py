"""Where a streaming reply is kept: the reply's version in the database, written now and then as it
grows and once more at its end (`ReplyWriter`); or nowhere, for Impersonate's draft (`Draft`)."""

from __future__ import annotations

import asyncio
import logging
import time

from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from app.chats.models import Message
from app.generation.core.joining import continuation_joint
from app.generation.reasoning import REASONING_FIELDS, ReplyReading, version_reasoning
from app.platform.db import chat_scope, lock_for_write
from app.platform.timeutil import utcnow

log = logging.getLogger(__name__)

FINAL_WRITE_ATTEMPTS = 6  # about 30 s of SQLite's busy timeout


class Draft:
    """Impersonate's text: streamed to the page for the user to edit and send, never stored."""

    def __init__(self) -> None:
        self.text = ""

    async def append(self, delta: str) -> str:
        self.text += delta
        return delta

    async def tick(self) -> None:
        pass

    async def finish(self, status: str, *, error: str | None = None, **swipe_extra) -> None:
        pass

    def write(self, status: str, *, error: str | None = None, **swipe_extra) -> None:
        pass


class ReplyWriter:
    """Writes the growing reply to the database now and then, in short transactions of its own, on a
    worker thread: a write waiting for SQLite's lock (an import holds it) must not hold up the event
    loop. For Continue, `kept` is the reply being extended and `kept_state` its status and error,
    which stay if nothing arrives."""

    def __init__(
        self,
        engine: Engine,
        chat_id: int,
        message_id: int,
        swipe_id: str,
        flush_interval_s: float,
        *,
        kept: str = "",
        kept_state: tuple[str, str | None] | None = None,
        kept_reasoning: dict | None = None,
    ) -> None:
        self.engine = engine
        self.chat_id = chat_id  # the scope of its write lock
        self.message_id = message_id
        self.swipe_id = swipe_id
        self.flush_interval_s = flush_interval_s
        self.kept = kept
        self.kept_state = kept_state
        self.kept_reasoning = kept_reasoning or {}
        self.reading: ReplyReading | None = None  # the stream's reasoning, once the provider is asked
        self.text = ""
        # The reply's tool calls as they finish (app/generation/tool_loop.py), stored with the version.
        self.tool_calls: list[dict] = []
        self._last_flush = time.monotonic()
        # What arrived since the last write is written once the interval has passed even if nothing
        # more arrives (the model pauses mid-reply): a page following the reply from another server
        # reads the stored version, and would otherwise miss the words before a pause for as long
        # as it lasts.
        self._later: asyncio.TimerHandle | None = None
        self._later_task: asyncio.Task | None = None
        self._storing = asyncio.Lock()  # one write at a time: the last one is the last stored
        self._ended = False  # the final write started: a late "streaming" write must not follow it

    async def append(self, delta: str) -> str:
        """Add the delta; returns the text added (a continuation's first one may gain a space)."""
        if self.kept and not self.text:
            delta = continuation_joint(self.kept, delta) + delta
        self.text += delta
        await self.tick()
        return delta

    async def tick(self, *, force: bool = False) -> None:
        """Save what arrived (text, reasoning, tool calls) when the flush interval has passed, or now."""
        waited = time.monotonic() - self._last_flush
        if force or waited >= self.flush_interval_s:
            self._cancel_later()
            await self._store_streaming()
        elif self._later is None:
            self._later = asyncio.get_running_loop().call_later(
                self.flush_interval_s - waited, self._store_later
            )

    def _store_later(self) -> None:
        self._later = None
        self._later_task = asyncio.ensure_future(self._store_in_passing())

    async def _store_in_passing(self) -> None:
        try:
            await self._store_streaming()
        except Exception:  # nobody awaits this write: the next one (or the final one) tries again
            log.exception("saving the reply in message %s as it grows failed", self.message_id)

    def _cancel_later(self) -> None:
        if self._later is not None:
            self._later.cancel()
            self._later = None

    async def _store_streaming(self) -> None:
        async with self._storing:
            if self._ended:
                return
            try:
                await run_in_threadpool(self.write, "streaming")
            except OperationalError:
                # SQLite stayed locked (a long import writes in one transaction): the text is kept
                # here and goes out with the next write.
                log.warning("the reply in message %s could not be saved yet; trying again", self.message_id)

    async def store(self, status: str, *, error: str | None = None, **swipe_extra) -> None:
        async with self._storing:
            await run_in_threadpool(self.write, status, error=error, **swipe_extra)

    async def finish(self, status: str, *, error: str | None = None, **swipe_extra) -> None:
        """The last write, tried again while SQLite stays locked (each try waits out the busy
        timeout), so a reply that ended is not left "streaming" by a long import."""
        self._ended = True
        self._cancel_later()
        for attempt in range(1, FINAL_WRITE_ATTEMPTS + 1):
            try:
                await self.store(status, error=error, **swipe_extra)
                return
            except OperationalError:
                if attempt == FINAL_WRITE_ATTEMPTS:
                    raise
                log.warning(
                    "the end of the reply in message %s could not be saved yet; trying again", self.message_id
                )

    def write(self, status: str, *, error: str | None = None, **swipe_extra) -> None:
        self._last_flush = time.monotonic()
        if status != "streaming":
            self._ended = True  # written last (the server stopping mid-reply writes here directly)
        unchanged = self.kept_state is not None and not self.text
        if unchanged:
            # A Continue that added nothing leaves the reply as it was (its reasoning too).
            (status, error), swipe_extra = self.kept_state, {}
        text = self.kept + self.text
        thought = version_reasoning(self.kept_reasoning, None if unchanged else self.reading)
        with Session(self.engine) as session:
            # The user may change the message's versions meanwhile.
            lock_for_write(session, chat_scope(self.chat_id))
            msg = session.get(Message, self.message_id)
            if msg is None:  # deleted while streaming: nothing to keep
                return
            swipes = [dict(s) for s in msg.swipes]
            at = next((i for i, s in enumerate(swipes) if s.get("id") == self.swipe_id), None)
            if at is None:  # this version was deleted while streaming
                return
            record = {k: v for k, v in swipes[at].items() if k not in REASONING_FIELDS}
            swipes[at] = {
                **record,
                "content": text,
                "status": status,
                "error": error,
                **swipe_extra,
                **thought,
            }
            if self.tool_calls:
                swipes[at]["tool_calls"] = list(self.tool_calls)
            msg.swipes = swipes
            if msg.active_swipe == at:
                msg.content, msg.status, msg.error = text, status, error
                msg.tool_calls = swipes[at].get("tool_calls") or None
            msg.updated_at = utcnow()
            session.add(msg)
            session.commit()
