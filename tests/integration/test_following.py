"""Following a reply another server writes (app/generation/following.py), read from the database as the
writer stores it: how a follow ends when the writer dies, when the page goes away, after its time
limit, and when the reply is never stored (Impersonate). On SQLite and PostgreSQL; the whole path
between two live servers is tests/integration/test_two_servers.py."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from sqlmodel import Session

from app.chats.models import Chat, Message
from app.chats.service import new_message, swipe_record
from app.generation import following
from app.generation.core.following import WRITER_GONE
from app.generation.reply import STOPPED, Generations
from app.platform.claims import REPLIES, ClaimTable


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _chat(engine) -> int:
    with Session(engine) as session:
        chat = Chat(name="Tavern")
        session.add(chat)
        session.commit()
        return chat.id


def _store_reply(engine, chat_id: int, text: str, status: str = "streaming", error: str | None = None) -> int:
    with Session(engine) as session:
        msg = new_message(chat_id, "assistant", "Aria", [""])
        msg.swipes = [swipe_record(text, status=status, error=error, id="v1")]
        msg.content, msg.status, msg.error = text, status, error
        session.add(msg)
        session.commit()
        return msg.id


def _set_reply(
    engine, message_id: int, text: str, status: str = "streaming", error: str | None = None
) -> None:
    with Session(engine) as session:
        msg = session.get(Message, message_id)
        msg.swipes = [{**msg.swipes[0], "content": text, "status": status, "error": error}]
        msg.content, msg.status, msg.error = text, status, error
        session.add(msg)
        session.commit()


def _parse(chunks: list[str]) -> list[tuple[str, dict]]:
    events = []
    for chunk in chunks:
        head, data = chunk.strip().split("\n")
        events.append((head.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


def _follow(generations: Generations, chat_id: int, token: str, *, steps=None, disconnected=None) -> list:
    """Run a follow to its end; `steps(n)` runs before the n-th poll (the writer's moves)."""

    async def run() -> list[str]:
        polls = 0

        async def gone() -> bool:
            nonlocal polls
            polls += 1
            if steps is not None:
                await asyncio.to_thread(steps, polls)
            return bool(disconnected and disconnected(polls))

        return [
            chunk async for chunk in following.follow_stored(generations, chat_id, token, disconnected=gone)
        ]

    return _parse(asyncio.run(run()))


def test_a_follow_streams_the_reply_as_stored_and_ends_with_how_it_was_left(database, monkeypatch):
    monkeypatch.setattr(following, "FOLLOW_POLL_S", 0.01)
    writer = ClaimTable(database, server="a")
    reader = Generations(ClaimTable(database, server="b"))
    chat_id = _chat(database)
    token = writer.take(REPLIES, chat_id)
    message_id = _store_reply(database, chat_id, "Once")

    def steps(n: int) -> None:
        if n == 1:
            _set_reply(database, message_id, "Once upon")
        elif n == 2:
            _set_reply(database, message_id, "Once upon a time", status="partial", error=STOPPED)
            writer.give_back(REPLIES, chat_id, token)

    events = _follow(reader, chat_id, token, steps=steps)
    assert events == [
        ("start", {"message_id": message_id, "swipe_index": 0, "action": "follow"}),
        ("token", {"text": "Once"}),
        ("token", {"text": " upon"}),
        ("token", {"text": " a time"}),
        ("stopped", {"message_id": message_id, "text_kept": True}),
    ]


def test_a_follow_of_a_writer_that_died_ends_saying_so(database, monkeypatch):
    monkeypatch.setattr(following, "FOLLOW_POLL_S", 0.01)
    clock = _Clock()
    writer = ClaimTable(database, server="a", now=clock)
    reader = Generations(ClaimTable(database, server="b", now=clock))
    chat_id = _chat(database)
    token = writer.take(REPLIES, chat_id)
    message_id = _store_reply(database, chat_id, "Half a")

    def steps(n: int) -> None:
        if n == 1:
            clock.now += timedelta(seconds=61)  # no heartbeat for longer than STALE_AFTER

    events = _follow(reader, chat_id, token, steps=steps)
    assert [name for name, _ in events] == ["start", "token", "error"]
    assert events[-1][1] == {"message_id": message_id, "kind": "interrupted", "message": WRITER_GONE}


def test_a_follow_ends_when_the_page_goes_away_or_its_time_is_up(database, monkeypatch):
    monkeypatch.setattr(following, "FOLLOW_POLL_S", 0.01)
    writer = ClaimTable(database, server="a")
    reader = Generations(ClaimTable(database, server="b"))
    chat_id = _chat(database)
    token = writer.take(REPLIES, chat_id)
    _store_reply(database, chat_id, "Still going")
    # The page closed after the third poll: no more reads, no last event (nobody would get it).
    events = _follow(reader, chat_id, token, disconnected=lambda polls: polls >= 3)
    assert [name for name, _ in events] == ["start", "token"]
    # However long the reply takes, one follow ends after FOLLOW_LIMIT_S (the page follows again).
    monkeypatch.setattr(following, "FOLLOW_LIMIT_S", 0.0)
    assert [name for name, _ in _follow(reader, chat_id, token)] == ["start", "token"]


def test_a_reply_never_stored_is_followed_until_its_claim_is_given_back(database, monkeypatch):
    """Impersonate's draft is never stored: a follow has nothing to show and ends with the claim."""
    monkeypatch.setattr(following, "FOLLOW_POLL_S", 0.01)
    writer = ClaimTable(database, server="a")
    reader = Generations(ClaimTable(database, server="b"))
    chat_id = _chat(database)
    token = writer.take(REPLIES, chat_id)
    assert reader.written_elsewhere(chat_id) == token and reader.writing(chat_id)
    assert Generations(writer).written_elsewhere(chat_id) is None  # its own claim is no other's

    def steps(n: int) -> None:
        if n == 3:
            writer.give_back(REPLIES, chat_id, token)

    assert _follow(reader, chat_id, token, steps=steps) == []
    assert not reader.writing(chat_id)
