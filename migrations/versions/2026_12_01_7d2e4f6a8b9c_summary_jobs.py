"""summary jobs: Generate runs of Chat Summary entries, with the reason a run failed

Revision ID: 7d2e4f6a8b9c
Revises: 5c1d2e3f4a5b
Create Date: 2026-12-01 01:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "7d2e4f6a8b9c"
down_revision: str | None = "5c1d2e3f4a5b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "summary_job",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("last_n", sa.Integer(), nullable=True),
        sa.Column("start", sa.Integer(), nullable=True),
        sa.Column("end", sa.Integer(), nullable=True),
        sa.Column("first_message_id", sa.Integer(), nullable=False),
        sa.Column("last_message_id", sa.Integer(), nullable=False),
        sa.Column("first_position", sa.Integer(), nullable=False),
        sa.Column("last_position", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("entry_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_summary_job_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_summary_job"),
    )
    op.create_index("ix_summary_job_chat", "summary_job", ["chat_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_summary_job_chat", table_name="summary_job")
    op.drop_table("summary_job")
