"""Sugo's schema on a real PostgreSQL (tests/support/postgres.py): the migrations go up and down,
match the models exactly, carry old rows forward, and the models' rows round-trip through SQLModel.
Selected alone with `pytest -m postgres`."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlmodel import Session, select

from app.characters.models import Character
from app.chats.models import Chat, ChatCharacter, Message
from app.memory.recall.vectors import pack, sign_code
from app.models import metadata
from app.platform.db import make_engine
from app.platform.migrate import (
    HAND_MADE_TABLES,
    POSTGRES_HAND_MADE_TABLES,
    alembic_config,
    include_name,
    upgrade_database,
)
from app.platform.settings import load_settings

pytestmark = pytest.mark.postgres


@pytest.fixture
def engine(postgres_url):
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


def _migrate(engine, revision: str, *, down: bool = False) -> None:
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(cfg, revision)


def _tables(engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def _trigger_functions(engine) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                text(
                    # Sugo's own: pgvector's functions (an extension's members) are not.
                    "SELECT proname FROM pg_proc p WHERE pronamespace = 'public'::regnamespace AND NOT EXISTS "
                    "(SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e') ORDER BY proname"
                )
            ).scalars()
        )


def test_migrations_go_up_down_and_up_again(engine):
    assert engine.dialect.name == "postgresql"
    upgrade_database(engine)
    first = _tables(engine)
    # Every model's table and the hand-made ones; FTS5's tables are SQLite's alone.
    assert first == set(metadata.tables) | HAND_MADE_TABLES | POSTGRES_HAND_MADE_TABLES | {"alembic_version"}
    # procrastinate's own (the job queue's schema, revision a2c4e6f8b0d3) aside.
    assert [f for f in _trigger_functions(engine) if not f.startswith("procrastinate_")] == [
        "memory_chunk_count_follow",
        "memory_embedding_follow",
        "memory_float32_vector",
        "memory_vector_deleted",
        "memory_words_follow",
    ]

    _migrate(engine, "base", down=True)
    assert _tables(engine) == {"alembic_version"}
    assert _trigger_functions(engine) == []  # they went with their revisions

    upgrade_database(engine)
    assert _tables(engine) == first


def test_models_and_migrations_agree(engine):
    """The SQLite suite's check (test_migrations.py), stricter: column types are compared too."""
    upgrade_database(engine)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_name": include_name, "compare_type": True})
        assert compare_metadata(ctx, metadata) == []


def test_pgvector_is_available_to_a_test_database(engine):
    with engine.begin() as conn:
        conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
        distance = conn.execute(text("SELECT '[1,0]'::vector <=> '[0,1]'::vector")).scalar_one()
    assert distance == pytest.approx(1.0)


def test_a_chat_with_a_character_and_messages_round_trips(engine):
    upgrade_database(engine)
    swipes = [
        {"content": "Older version.", "status": "ok"},
        {"content": "Hello, traveller — «café» 🎻", "status": "ok", "reasoning": "Be kind.\nAnd brief."},
    ]
    tool_calls = [{"id": "call_1", "name": "remember", "arguments": {"text": "likes tea", "n": 2}}]
    sent_at = datetime(2026, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)
    with Session(engine) as session:
        character = Character(name="Aria", tags=["bard", "wanderer"], extensions={"depth": {"n": 4}})
        chat = Chat(name="On the road", settings={"temperature": 0.7, "flags": [True, False, None]})
        session.add_all([character, chat])
        session.flush()
        session.add(ChatCharacter(chat_id=chat.id, character_id=character.id))
        session.add_all(
            [
                Message(
                    chat_id=chat.id, role="user", name="U", content="Hi!", hidden=True, created_at=sent_at
                ),
                Message(
                    chat_id=chat.id,
                    role="assistant",
                    character_id=character.id,
                    name="Aria",
                    content=swipes[1]["content"],
                    swipes=swipes,
                    active_swipe=1,
                    tool_calls=tool_calls,
                    chat_refs=None,
                    quote="a line",
                ),
            ]
        )
        session.commit()
        chat_id = chat.id

    with Session(engine) as session:
        chat = session.get(Chat, chat_id)
        assert chat.settings == {"temperature": 0.7, "flags": [True, False, None]}
        assert chat.variables == {} and chat.lore_timed == {}
        (link,) = session.exec(select(ChatCharacter).where(ChatCharacter.chat_id == chat_id)).all()
        character = session.get(Character, link.character_id)
        assert character.tags == ["bard", "wanderer"] and character.extensions == {"depth": {"n": 4}}
        assert character.character_book is None
        user, reply = session.exec(
            select(Message).where(Message.chat_id == chat_id).order_by(Message.id)
        ).all()
        assert user.hidden is True and reply.hidden is False
        assert user.created_at == sent_at and user.kind == "message"
        assert user.swipes == [] and user.tool_calls is None
        assert reply.swipes == swipes and reply.active_swipe == 1
        assert reply.tool_calls == tool_calls and reply.chat_refs is None and reply.quote == "a line"
        # The booleans are PostgreSQL's own, so a query can compare them as such.
        hidden = session.exec(select(Message.id).where(Message.chat_id == chat_id, Message.hidden)).all()
        assert hidden == [user.id]


def test_old_rows_are_carried_forward_and_the_triggers_keep_count(engine):
    """The revisions that move data (vectors gain their chat and sign bits, memories their last
    message, replies lose their inline reasoning) do so on PostgreSQL, and the hand-made tables'
    triggers work there."""
    _migrate(engine, "97f31f672fdd")
    vector = [0.5, -0.25, 0.0, 1.0]
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO chat (id, name, mode, settings, st_header, next_speaker, created_at, updated_at,"
                " last_message_at) VALUES (7, 'Old', 'roleplay', '{}', '{}', 0, :t, :t, :t)"
            ),
            {"t": "2024-01-01T00:00:00+00:00"},
        )
        conn.execute(
            text(
                "INSERT INTO message (id, chat_id, role, kind, name, content, swipes, active_swipe, hidden, status,"
                " st_extra, created_at, updated_at) VALUES (1, 7, 'assistant', 'message', 'A', :c, :s, 0, false,"
                " 'ok', '{}', :t, :t)"
            ),
            {
                "c": "<think>Weigh it.</think>Said.",
                "s": json.dumps([{"content": "<think>Weigh it.</think>Said.", "status": "ok"}]),
                "t": "2024-01-01T00:00:00+00:00",
            },
        )
        conn.execute(
            text(
                "INSERT INTO memory_chunk (id, chat_id, content, message_ids, fingerprint, message_count, status,"
                " first_message_at, last_message_at, created_at) VALUES (3, 7, 'Said.', :ids, '', 2, 'embedded',"
                " :t, :t, :t)"
            ),
            {"ids": json.dumps([1, 5]), "t": "2024-01-01T00:00:00+00:00"},
        )
        conn.execute(
            text(
                "INSERT INTO memory_vector (id, chunk_id, space_id, \"window\", embedding) VALUES (11, 3, 's', 0, :e)"
            ),
            {"e": pack(vector)},
        )
    upgrade_database(engine)
    with engine.begin() as conn:
        assert conn.execute(text("SELECT chat_id, code FROM memory_vector WHERE id = 11")).one() == (
            7,
            sign_code(vector),
        )
        assert conn.execute(text("SELECT last_message_id FROM memory_chunk WHERE id = 3")).scalar_one() == 5
        content, swipes = conn.execute(text("SELECT content, swipes FROM message WHERE id = 1")).one()
        assert content == "Said." and swipes == [
            {"content": "Said.", "status": "ok", "reasoning": "Weigh it."}
        ]
        # The chunk that was there before the count table is counted; new ones and deletions follow.
        assert conn.execute(text("SELECT chunks FROM memory_chunk_count WHERE chat_id = 7")).scalar_one() == 1
        conn.execute(
            text(
                "INSERT INTO memory_chunk (id, chat_id, content, message_ids, fingerprint, message_count, status,"
                " first_message_at, last_message_at, created_at) VALUES (4, 7, 'More.', '[]', '', 1, 'waiting',"
                " now(), now(), now())"
            )
        )
        assert conn.execute(text("SELECT chunks FROM memory_chunk_count WHERE chat_id = 7")).scalar_one() == 2
        conn.execute(text("DELETE FROM memory_chunk WHERE id = 3"))  # its vector goes by cascade
        assert conn.execute(text("SELECT chunks FROM memory_chunk_count WHERE chat_id = 7")).scalar_one() == 1
        assert conn.execute(text("SELECT chat_id, vector_id FROM memory_tombstone")).all() == [(7, 11)]
        conn.execute(
            text(
                "INSERT INTO chat (id, name, mode, settings, st_header, next_speaker, variables,"
                " lore_timed, lore_last_scan, created_at, updated_at, last_message_at) VALUES"
                " (8, 'New', 'roleplay', '{}', '{}', 0, '{}', '{}', '{}', now(), now(), now())"
            )
        )
        conn.execute(text("UPDATE memory_chunk SET chat_id = 8 WHERE id = 4"))
        counts = conn.execute(text("SELECT chat_id, chunks FROM memory_chunk_count ORDER BY chat_id")).all()
        assert counts == [(7, 0), (8, 1)]


def test_the_command_line_migrates_the_database_sugo_database_url_names(postgres_url, monkeypatch, tmp_path):
    """`alembic upgrade head` (migrations/env.py without the app's connection) follows
    SUGO_DATABASE_URL, and leaves the data folder without a SQLite file."""
    monkeypatch.setenv("SUGO_DATABASE_URL", postgres_url)
    monkeypatch.setenv("SUGO_DATA_DIR", str(tmp_path / "data"))
    cfg = alembic_config()
    command.upgrade(cfg, "head")
    engine = make_engine(postgres_url)
    try:
        with engine.connect() as conn:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    finally:
        engine.dispose()
    assert version == ScriptDirectory.from_config(cfg).get_current_head()
    assert not (tmp_path / "data" / "sugo.db").exists()


def test_sugo_database_url_is_optional_and_only_postgresql(monkeypatch):
    monkeypatch.delenv("SUGO_DATABASE_URL", raising=False)
    assert load_settings().database_url is None
    url = "postgresql+psycopg://sugo:pw@db.internal:5432/sugo"
    monkeypatch.setenv("SUGO_DATABASE_URL", url)
    assert load_settings().database_url == url
    for bad, named in (
        ("sqlite:///data/sugo.db", "sqlite"),
        ("postgresql://sugo:hunter2@db/sugo", "postgresql"),
    ):
        monkeypatch.setenv("SUGO_DATABASE_URL", bad)
        with pytest.raises(ValueError, match="starts with postgresql\\+psycopg://") as refused:
            load_settings()
        assert f"(not {named})" in str(refused.value) and "hunter2" not in str(refused.value)
