"""The decision model's activity (issue 27): Peek Prompt → Advanced Memory activity

Revision ID: c5e7a9b1d3f4
Revises: b4d6f8a0c2e3
Create Date: 2026-12-04 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c5e7a9b1d3f4"
down_revision: str | None = "b4d6f8a0c2e3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "memory_activity",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("questions", sa.Integer(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_memory_activity_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_memory_activity"),
    )
    op.create_index("ix_memory_activity_chat", "memory_activity", ["chat_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_memory_activity_chat", table_name="memory_activity")
    op.drop_table("memory_activity")
