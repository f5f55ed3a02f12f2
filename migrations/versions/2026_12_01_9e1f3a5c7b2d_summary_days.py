"""summary days: Conversation chats' day and week summaries, and the days whose summary failed

Revision ID: 9e1f3a5c7b2d
Revises: a1f3c5e7b9d2
Create Date: 2026-12-01 02:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "9e1f3a5c7b2d"
down_revision: str | None = "a1f3c5e7b9d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _summary_table(name: str, key: str) -> None:
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column(key, sa.Date(), nullable=False),
        sa.Column("summary", sa.String(), nullable=False),
        sa.Column("key_details", sa.JSON(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name=f"fk_{name}_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=f"pk_{name}"),
        sa.UniqueConstraint("chat_id", key, name=f"uq_{name}_chat_{key}"),
    )


def upgrade() -> None:
    _summary_table("summary_day", "day")
    _summary_table("summary_week", "week")
    op.create_table(
        "summary_day_failure",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_summary_day_failure_chat_id_chat",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_summary_day_failure"),
        sa.UniqueConstraint("chat_id", "kind", "day", name="uq_summary_day_failure_chat_kind_day"),
    )


def downgrade() -> None:
    op.drop_table("summary_day_failure")
    op.drop_table("summary_week")
    op.drop_table("summary_day")
