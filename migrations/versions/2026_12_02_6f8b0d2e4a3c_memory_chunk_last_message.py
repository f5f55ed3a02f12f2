"""memory chunk last message: the newest message of a memory, so the prompt's recall can leave out the
memories of messages still in the recent-message window (memories are now made whatever the window)

Revision ID: 6f8b0d2e4a3c
Revises: 8d1f3b5a7c9e
Create Date: 2026-12-02 11:00:00
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "6f8b0d2e4a3c"
down_revision: str | None = "8d1f3b5a7c9e"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE, never a batch copy: memory_chunk's triggers keep the word index in step.
    op.add_column("memory_chunk", sa.Column("last_message_id", sa.Integer(), nullable=True))
    op.create_index("ix_memory_chunk_chat_last_message", "memory_chunk", ["chat_id", "last_message_id"])
    # Filled in Python, not with SQLite's json_each, so the same step runs on any database.
    conn = op.get_bind()
    # PostgreSQL's json type has no equality: its text is compared there.
    has_messages = "CAST(message_ids AS TEXT) != '[]'" if conn.dialect.name == "postgresql" else "message_ids != '[]'"
    rows = conn.execute(sa.text(f"SELECT id, message_ids FROM memory_chunk WHERE {has_messages}")).all()
    updates = []
    for chunk_id, raw in rows:
        ids = [i for i in (json.loads(raw) if isinstance(raw, str) else raw or []) if isinstance(i, int)]
        if ids:
            updates.append({"id": chunk_id, "last": max(ids)})
    if updates:
        conn.execute(sa.text("UPDATE memory_chunk SET last_message_id = :last WHERE id = :id"), updates)


def downgrade() -> None:
    op.drop_index("ix_memory_chunk_chat_last_message", table_name="memory_chunk")
    op.drop_column("memory_chunk", "last_message_id")
