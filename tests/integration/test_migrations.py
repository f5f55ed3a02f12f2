"""Migrations: they bring an old database forward without losing rows, and they match the models."""

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text

from app.memory.recall.core.lexical import chat_term, stem
from app.models import metadata
from app.platform.db import make_engine
from app.platform.migrate import alembic_config, include_name, upgrade_database

FIRST_REVISION = "dbf415ff1540"


def test_upgrade_from_the_first_schema_keeps_data(tmp_path):
    engine = make_engine(tmp_path / "old.db")
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, FIRST_REVISION)
        conn.execute(
            text(
                "insert into chat (id, name, mode, settings, st_header, next_speaker, created_at, updated_at,"
                " last_message_at) values (1, 'Old', 'roleplay', '{}', '{}', 0, '2024-01-01', '2024-01-01',"
                " '2024-01-01')"
            )
        )
        conn.execute(
            text(
                "insert into message (chat_id, role, name, content, swipes, active_swipe, hidden, status,"
                " st_extra, created_at, updated_at) values (1, 'user', 'U', 'hello', '[]', 0, 0, 'ok', '{}',"
                " '2024-01-01', '2024-01-01')"
            )
        )
    upgrade_database(engine)
    with engine.connect() as conn:
        assert conn.execute(text("select content, kind from message")).one() == ("hello", "message")
        assert conn.execute(text("select price_input_per_m from connection")).all() == []


def test_models_and_migrations_agree(tmp_path):
    engine = make_engine(tmp_path / "new.db")
    upgrade_database(engine)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"include_name": include_name, "compare_type": False})
        assert compare_metadata(ctx, metadata) == []


def test_memory_words_are_indexed_again_with_snowball_stems(tmp_path):
    """A memory indexed by the light stemmer ("adoption" kept whole) is found by its Snowball stem
    after the upgrade, as a query is now stemmed; and only once."""
    engine = make_engine(tmp_path / "old.db")
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "9a3b5c7d1e2f")
        conn.execute(
            text(
                "insert into chat (id, name, mode, settings, st_header, next_speaker, created_at, updated_at,"
                " last_message_at) values (7, 'Old', 'roleplay', '{}', '{}', 0, '2024-01-01', '2024-01-01',"
                " '2024-01-01')"
            )
        )
        conn.execute(
            text(
                "insert into memory_chunk (id, chat_id, content, message_ids, fingerprint, message_count,"
                " status, first_message_at, last_message_at, created_at) values (3, 7,"
                " 'Caroline: The adoption agency called.', '[]', '', 1, 'waiting', '2024-01-01', '2024-01-01',"
                " '2024-01-01')"
            )
        )
        conn.execute(
            text(
                "insert into fts_memory_chunk (rowid, body) values (3, 'c7qcaroline c7qadoption c7qagency c7qcall')"
            )
        )

    def found(conn, word):
        return conn.execute(
            text("select rowid from fts_memory_chunk where fts_memory_chunk match :w"), {"w": f'"{word}"'}
        ).all()

    upgrade_database(engine)
    with engine.connect() as conn:
        assert found(conn, "c7qadopt") == [(3,)]
        assert found(conn, "c7qadoption") == []
        name = chat_term(7, stem("caroline"))
        assert (
            conn.execute(text("select doc from fts_memory_vocab where term = :t"), {"t": name}).scalar() == 1
        )
