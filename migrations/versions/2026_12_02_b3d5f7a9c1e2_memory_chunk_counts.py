"""memory chunk counts: each chat's number of memories, kept by triggers, so the word pass of every
reply's recall reads one row instead of counting a 100,000-memory chat's index (issue 23)

Revision ID: b3d5f7a9c1e2
Revises: 7a9c1e3b5d0f
Create Date: 2026-12-02 14:30:00

The count weighs a word by how rare it is among the chat's memories (recall/core/lexical.py
chat_weights). Triggers keep it exact whoever inserts or deletes a chunk (the memory job, imports,
Clear all, a chat deleted by cascade). SQLite triggers here; another database's migration gives the
same table its own triggers.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "b3d5f7a9c1e2"
down_revision: str | None = "7a9c1e3b5d0f"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE memory_chunk_count (chat_id INTEGER NOT NULL PRIMARY KEY, chunks INTEGER NOT NULL)"
    )
    op.execute(
        "INSERT INTO memory_chunk_count (chat_id, chunks) SELECT chat_id, count(*) FROM memory_chunk GROUP BY chat_id"
    )
    if op.get_bind().dialect.name == "postgresql":
        _triggers_postgresql()
        return
    op.execute(
        "CREATE TRIGGER memory_chunk_counted AFTER INSERT ON memory_chunk BEGIN "
        "INSERT INTO memory_chunk_count (chat_id, chunks) VALUES (NEW.chat_id, 1) "
        "ON CONFLICT (chat_id) DO UPDATE SET chunks = chunks + 1; END"
    )
    op.execute(
        "CREATE TRIGGER memory_chunk_uncounted AFTER DELETE ON memory_chunk BEGIN "
        "UPDATE memory_chunk_count SET chunks = chunks - 1 WHERE chat_id = OLD.chat_id; END"
    )
    # A chunk never moves to another chat, but should one ever be updated so, the counts follow.
    op.execute(
        "CREATE TRIGGER memory_chunk_recounted AFTER UPDATE OF chat_id ON memory_chunk "
        "WHEN NEW.chat_id != OLD.chat_id BEGIN "
        "UPDATE memory_chunk_count SET chunks = chunks - 1 WHERE chat_id = OLD.chat_id; "
        "INSERT INTO memory_chunk_count (chat_id, chunks) VALUES (NEW.chat_id, 1) "
        "ON CONFLICT (chat_id) DO UPDATE SET chunks = chunks + 1; END"
    )


def _triggers_postgresql() -> None:
    """The same three triggers on PostgreSQL, over one function (its triggers call functions)."""
    op.execute(
        "CREATE FUNCTION memory_chunk_count_follow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF TG_OP IN ('DELETE', 'UPDATE') THEN "
        "UPDATE memory_chunk_count SET chunks = chunks - 1 WHERE chat_id = OLD.chat_id; END IF; "
        "IF TG_OP IN ('INSERT', 'UPDATE') THEN "
        "INSERT INTO memory_chunk_count (chat_id, chunks) VALUES (NEW.chat_id, 1) "
        "ON CONFLICT (chat_id) DO UPDATE SET chunks = memory_chunk_count.chunks + 1; END IF; "
        "RETURN NULL; END $$"
    )
    op.execute("CREATE TRIGGER memory_chunk_counted AFTER INSERT ON memory_chunk "
               "FOR EACH ROW EXECUTE FUNCTION memory_chunk_count_follow()")  # fmt: skip
    op.execute("CREATE TRIGGER memory_chunk_uncounted AFTER DELETE ON memory_chunk "
               "FOR EACH ROW EXECUTE FUNCTION memory_chunk_count_follow()")  # fmt: skip
    op.execute("CREATE TRIGGER memory_chunk_recounted AFTER UPDATE OF chat_id ON memory_chunk FOR EACH ROW "
               "WHEN (NEW.chat_id IS DISTINCT FROM OLD.chat_id) EXECUTE FUNCTION memory_chunk_count_follow()")  # fmt: skip


def downgrade() -> None:
    postgresql = op.get_bind().dialect.name == "postgresql"
    for trigger in ("memory_chunk_recounted", "memory_chunk_uncounted", "memory_chunk_counted"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}" + (" ON memory_chunk" if postgresql else ""))
    if postgresql:
        op.execute("DROP FUNCTION IF EXISTS memory_chunk_count_follow()")
    op.execute("DROP TABLE IF EXISTS memory_chunk_count")
