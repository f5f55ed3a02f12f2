"""summary entries: Chat Summary recaps of a chat's messages

Revision ID: 5c1d2e3f4a5b
Revises: b70b620b5912
Create Date: 2026-12-01 00:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5c1d2e3f4a5b"
down_revision: str | None = "b70b620b5912"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "summary_entry",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("content", sa.String(), nullable=False),
        sa.Column("first_message_id", sa.Integer(), nullable=False),
        sa.Column("last_message_id", sa.Integer(), nullable=False),
        sa.Column("first_position", sa.Integer(), nullable=False),
        sa.Column("last_position", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("awaiting_review", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_summary_entry_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_summary_entry"),
    )
    op.create_index("ix_summary_entry_chat_first", "summary_entry", ["chat_id", "first_message_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_summary_entry_chat_first", table_name="summary_entry")
    op.drop_table("summary_entry")
