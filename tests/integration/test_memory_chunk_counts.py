"""Each chat's number of memories is one row kept by triggers (the word pass of every reply reads it
instead of counting the chat's index): it stays equal to counting, through inserts, deletes, a chat
deleted by cascade and the upgrade of a database that already held memories."""

from __future__ import annotations

from datetime import UTC, datetime

from alembic import command
from sqlalchemy import text
from sqlmodel import Session

from app.chats.models import Chat
from app.memory.recall import index
from app.memory.recall.models import MemoryChunk
from app.platform.db import make_engine
from app.platform.migrate import alembic_config, upgrade_database

WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def _counted(conn) -> dict[int, int]:
    rows = conn.execute(text("select chat_id, count(*) from memory_chunk group by chat_id")).all()
    return {chat_id: n for chat_id, n in rows}


def _kept(conn) -> dict[int, int]:
    rows = conn.execute(text("select chat_id, chunks from memory_chunk_count where chunks > 0")).all()
    return {chat_id: n for chat_id, n in rows}


def _chunk(chat_id: int, n: int) -> MemoryChunk:
    return MemoryChunk(chat_id=chat_id, content=f"memory {n}", first_message_at=WHEN, last_message_at=WHEN)


def test_the_kept_count_follows_inserts_deletes_and_a_deleted_chat(tmp_path):
    engine = make_engine(tmp_path / "sugo.db")
    upgrade_database(engine)
    with Session(engine) as s:
        chats = [Chat(name="One"), Chat(name="Two")]
        s.add_all(chats)
        s.commit()
        one, two = (c.id for c in chats)
        s.add_all([_chunk(one, n) for n in range(5)] + [_chunk(two, n) for n in range(3)])
        s.commit()
        assert index.chat_chunk_count(s, one) == 5 and index.chat_chunk_count(s, two) == 3
        two_of_one = "select id from memory_chunk where chat_id = :c limit 2"
        s.exec(text(f"delete from memory_chunk where id in ({two_of_one})"), params={"c": one})
        s.commit()
        assert index.chat_chunk_count(s, one) == 3
        s.delete(s.get(Chat, two))  # the chunks go by the foreign key's cascade
        s.commit()
        assert index.chat_chunk_count(s, two) == 0
        assert _kept(s.connection()) == _counted(s.connection()) == {one: 3}
    engine.dispose()


def test_the_upgrade_counts_the_memories_already_there(tmp_path):
    engine = make_engine(tmp_path / "old.db")
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "7a9c1e3b5d0f")
        for chat_id in (7, 8):
            conn.execute(
                text(
                    "insert into chat (id, name, mode, settings, st_header, next_speaker, created_at, updated_at,"
                    " last_message_at) values (:id, 'Old', 'roleplay', '{}', '{}', 0, '2024-01-01', '2024-01-01',"
                    " '2024-01-01')"
                ),
                {"id": chat_id},
            )
        for chunk_id, chat_id in ((1, 7), (2, 7), (3, 8)):
            conn.execute(
                text(
                    "insert into memory_chunk (id, chat_id, content, message_ids, fingerprint, message_count,"
                    " status, first_message_at, last_message_at, created_at) values (:id, :chat, 'x', '[]', '', 1,"
                    " 'waiting', '2024-01-01', '2024-01-01', '2024-01-01')"
                ),
                {"id": chunk_id, "chat": chat_id},
            )
    upgrade_database(engine)
    with engine.connect() as conn:
        assert _kept(conn) == _counted(conn) == {7: 2, 8: 1}
    engine.dispose()
