"""memory search index: growing vector ids with sign codes, a revision bumped on deletions, FTS5

Revision ID: a1c0de5e4a11
Revises: 97f31f672fdd
Create Date: 2026-11-30 07:40:00

Recall must answer in well under 60 ms on chats of 100,000 chunks, so:
- memory_vector ids never repeat (AUTOINCREMENT) and each row carries its chat and the sign bits of
  its vector: a search keeps those bits in memory and loads only rows newer than it has;
- a trigger notes each deleted vector in memory_tombstone, so that cache drops just those;
- fts_memory_chunk (FTS5) finds the chunks sharing rare words with a query without reading them all,
  and fts_memory_vocab says how many chunks hold each word.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a1c0de5e4a11"
down_revision: str | None = "97f31f672fdd"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

def _sign_code(blob: bytes) -> bytes:
    from app.memory.recall.vectors import sign_code, unpack

    return sign_code(unpack(blob))


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _upgrade_postgresql(bind)
        return
    op.create_table(
        "memory_vector_new",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("chunk_id", sa.Integer(), nullable=False),
        sa.Column("space_id", sa.String(), nullable=False),
        sa.Column("window", sa.Integer(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),
        sa.Column("code", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["chunk_id"], ["memory_chunk.id"], name="fk_memory_vector_chunk_id_memory_chunk",
                                ondelete="CASCADE"),  # fmt: skip
        sa.PrimaryKeyConstraint("id", name="pk_memory_vector"),
        sqlite_autoincrement=True,
    )
    rows = bind.execute(sa.text(
        "SELECT v.id, c.chat_id, v.chunk_id, v.space_id, v.window, v.embedding "
        "FROM memory_vector v JOIN memory_chunk c ON c.id = v.chunk_id ORDER BY v.id"
    )).all()  # fmt: skip
    for row in rows:
        bind.execute(
            sa.text("INSERT INTO memory_vector_new (id, chat_id, chunk_id, space_id, window, embedding, code) "
                    "VALUES (:id, :chat_id, :chunk_id, :space_id, :window, :embedding, :code)"),
            {**row._mapping, "code": _sign_code(row.embedding)},
        )  # fmt: skip
    op.drop_table("memory_vector")
    op.rename_table("memory_vector_new", "memory_vector")
    op.create_index("ix_memory_vector_chunk_id", "memory_vector", ["chunk_id"])
    op.create_index("ix_memory_vector_chat_space", "memory_vector", ["chat_id", "space_id", "id"])
    op.create_index("ix_memory_chunk_chat_time", "memory_chunk", ["chat_id", "first_message_at", "id"])

    # One row per deleted vector, so a search index drops just those; the sweep empties it and
    # records how far in memory_tombstone_floor (an index behind that floor reloads).
    op.execute("CREATE TABLE memory_tombstone (id INTEGER PRIMARY KEY AUTOINCREMENT, chat_id INTEGER NOT NULL, "
               "vector_id INTEGER NOT NULL)")  # fmt: skip
    op.execute("CREATE INDEX ix_memory_tombstone_chat ON memory_tombstone (chat_id, id)")
    op.execute("CREATE TABLE memory_tombstone_floor (id INTEGER PRIMARY KEY CHECK (id = 1), floor INTEGER NOT NULL)")
    op.execute("INSERT INTO memory_tombstone_floor (id, floor) VALUES (1, 0)")
    op.execute(
        "CREATE TRIGGER memory_vector_deleted AFTER DELETE ON memory_vector BEGIN "
        "INSERT INTO memory_tombstone (chat_id, vector_id) VALUES (OLD.chat_id, OLD.id); END"
    )
    # Contentless: the indexed text is the chunk's words as lexical.index_text gives them (stemmed,
    # no stopwords, prefixed with the chat), which SQLite cannot compute, so the app writes it; only
    # removal is a trigger.
    op.execute("CREATE VIRTUAL TABLE fts_memory_chunk USING fts5(body, content='', contentless_delete=1, "
               "tokenize='unicode61 remove_diacritics 0')")  # fmt: skip
    op.execute("CREATE VIRTUAL TABLE fts_memory_vocab USING fts5vocab(fts_memory_chunk, 'row')")
    op.execute(
        "CREATE TRIGGER memory_chunk_fts_delete AFTER DELETE ON memory_chunk BEGIN "
        "DELETE FROM fts_memory_chunk WHERE rowid = OLD.id; END"
    )
    from app.memory.recall.core.lexical import index_text

    for chunk_id, chat_id, content in bind.execute(sa.text("SELECT id, chat_id, content FROM memory_chunk")).all():
        bind.execute(sa.text("INSERT INTO fts_memory_chunk (rowid, body) VALUES (:id, :body)"),
                     {"id": chunk_id, "body": index_text(content, chat_id)})  # fmt: skip


def _upgrade_postgresql(bind) -> None:
    """The same schema on PostgreSQL, less the FTS5 word index (PostgreSQL's own comes with its
    storage module). No table copy: PostgreSQL adds the columns in place, its serial ids never
    repeat (what AUTOINCREMENT buys on SQLite), and a copy's primary key would clash by name with
    the old table's."""
    op.add_column("memory_vector", sa.Column("chat_id", sa.Integer(), nullable=True))
    op.add_column("memory_vector", sa.Column("code", sa.LargeBinary(), nullable=True))
    rows = bind.execute(sa.text(
        "SELECT v.id, c.chat_id, v.embedding FROM memory_vector v JOIN memory_chunk c ON c.id = v.chunk_id"
    )).all()  # fmt: skip
    for row in rows:
        bind.execute(sa.text("UPDATE memory_vector SET chat_id = :chat_id, code = :code WHERE id = :id"),
                     {"id": row.id, "chat_id": row.chat_id, "code": _sign_code(row.embedding)})  # fmt: skip
    op.alter_column("memory_vector", "chat_id", nullable=False)
    op.alter_column("memory_vector", "code", nullable=False)
    op.drop_index("ix_memory_vector_space_id", "memory_vector")
    op.create_index("ix_memory_vector_chat_space", "memory_vector", ["chat_id", "space_id", "id"])
    op.create_index("ix_memory_chunk_chat_time", "memory_chunk", ["chat_id", "first_message_at", "id"])

    op.execute("CREATE TABLE memory_tombstone (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
               "chat_id INTEGER NOT NULL, vector_id INTEGER NOT NULL)")  # fmt: skip
    op.execute("CREATE INDEX ix_memory_tombstone_chat ON memory_tombstone (chat_id, id)")
    op.execute("CREATE TABLE memory_tombstone_floor (id INTEGER PRIMARY KEY CHECK (id = 1), floor BIGINT NOT NULL)")
    op.execute("INSERT INTO memory_tombstone_floor (id, floor) VALUES (1, 0)")
    op.execute(
        "CREATE FUNCTION memory_vector_deleted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO memory_tombstone (chat_id, vector_id) VALUES (OLD.chat_id, OLD.id); RETURN NULL; END $$"
    )
    op.execute(
        "CREATE TRIGGER memory_vector_deleted AFTER DELETE ON memory_vector "
        "FOR EACH ROW EXECUTE FUNCTION memory_vector_deleted()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS memory_vector_deleted ON memory_vector")
        op.execute("DROP FUNCTION IF EXISTS memory_vector_deleted()")
    else:
        for trigger in ("memory_chunk_fts_delete", "memory_vector_deleted"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.execute("DROP TABLE IF EXISTS fts_memory_vocab")
    op.execute("DROP TABLE IF EXISTS fts_memory_chunk")
    op.execute("DROP TABLE IF EXISTS memory_tombstone_floor")
    op.execute("DROP TABLE IF EXISTS memory_tombstone")
    op.drop_index("ix_memory_chunk_chat_time", "memory_chunk")
    op.drop_index("ix_memory_vector_chat_space", "memory_vector")
    with op.batch_alter_table("memory_vector") as batch:
        batch.drop_column("code")
        batch.drop_column("chat_id")
    op.create_index("ix_memory_vector_space_id", "memory_vector", ["space_id"])
