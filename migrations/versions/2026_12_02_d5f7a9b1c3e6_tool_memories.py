"""tool memories: long-term memories (per character or global) and each chat's short-term memory,
written by the memory tools and on the Memories page (issue 24)

Revision ID: d5f7a9b1c3e6
Revises: a7c9e1b3d5f8
Create Date: 2026-12-02 17:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d5f7a9b1c3e6"
down_revision: str | None = "a7c9e1b3d5f8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "long_term_memory",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("character_id", sa.Integer(), nullable=True),
        sa.Column("content", sa.String(), nullable=False),
        sa.Column("created_in_chat_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["character_id"],
            ["character.id"],
            name="fk_long_term_memory_character_id_character",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["created_in_chat_id"],
            ["chat.id"],
            name="fk_long_term_memory_created_in_chat_id_chat",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_long_term_memory"),
    )
    op.create_index("ix_long_term_memory_character", "long_term_memory", ["character_id", "id"])
    op.create_table(
        "short_term_memory",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("content", sa.String(), nullable=False),
        sa.Column("expires_after_replies", sa.Integer(), nullable=True),
        sa.Column("replies_seen", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chat_id"], ["chat.id"], name="fk_short_term_memory_chat_id_chat", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_short_term_memory"),
    )
    op.create_index("ix_short_term_memory_chat", "short_term_memory", ["chat_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_short_term_memory_chat", table_name="short_term_memory")
    op.drop_table("short_term_memory")
    op.drop_index("ix_long_term_memory_character", table_name="long_term_memory")
    op.drop_table("long_term_memory")
