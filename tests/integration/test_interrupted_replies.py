"""Replies left "streaming" (app/chats/service.py finish_interrupted_replies): finished as interrupted
unless a live server still writes them (its reply claim, app/platform/claims.py). On SQLite and
PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlmodel import Session

from app.chats.models import Chat, Message
from app.chats.service import INTERRUPTED, finish_interrupted_replies, new_message, swipe_record
from app.platform.claims import REPLIES, ClaimTable


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 3, 4, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def _streaming_reply(session: Session, text: str) -> tuple[int, int]:
    """A chat whose last reply is being written: (chat id, message id)."""
    chat = Chat(name="Tavern")
    session.add(chat)
    session.flush()
    msg = new_message(chat.id, "assistant", "Aria", [""])
    msg.swipes = [swipe_record(text, status="streaming", id="v1")]
    msg.content, msg.status = text, "streaming"
    session.add(msg)
    session.commit()
    return chat.id, msg.id


def test_a_reply_a_live_server_writes_is_left_alone_and_one_without_a_writer_is_finished(database):
    clock = _Clock()
    writer, other = ClaimTable(database, server="a", now=clock), ClaimTable(database, server="b", now=clock)
    with Session(database) as session:
        written, written_msg = _streaming_reply(session, "Being written")
        _, orphan_msg = _streaming_reply(session, "Left behind")
        _, empty_msg = _streaming_reply(session, "")
        assert writer.take(REPLIES, written)
        assert other.live_claim(REPLIES, written) == (writer.holder, writer.token(REPLIES, written))
        assert other.held_elsewhere(REPLIES, written) and not writer.held_elsewhere(REPLIES, written)
        assert finish_interrupted_replies(session, writing=lambda: other.chats(REPLIES)) == 2
        session.commit()
    with Session(database) as session:
        kept = session.get(Message, written_msg)
        assert kept.status == "streaming" and kept.swipes[0]["status"] == "streaming"
        orphan, empty = session.get(Message, orphan_msg), session.get(Message, empty_msg)
        assert (orphan.status, orphan.error, orphan.content) == ("partial", INTERRUPTED, "Left behind")
        assert (empty.status, empty.error) == ("error", INTERRUPTED)
        # The writer dies: its claim goes stale, and the next look finishes its reply too.
        clock.now += timedelta(seconds=61)
        assert other.live_claim(REPLIES, written) is None and not other.held_elsewhere(REPLIES, written)
        assert finish_interrupted_replies(session, writing=lambda: other.chats(REPLIES)) == 1
        session.commit()
        session.expire_all()
        assert session.get(Message, written_msg).status == "partial"
        # Nothing left: the next look changes nothing (and takes no write lock).
        assert finish_interrupted_replies(session, writing=lambda: other.chats(REPLIES)) == 0


def test_by_default_every_streaming_reply_is_finished(database):
    """One server (SQLite): at start, no reply has a writer."""
    with Session(database) as session:
        _streaming_reply(session, "Cut")
        _streaming_reply(session, "Cut too")
        assert finish_interrupted_replies(session) == 2
        session.commit()
