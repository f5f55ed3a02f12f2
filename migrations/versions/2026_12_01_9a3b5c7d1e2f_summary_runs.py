"""summary runs: Backfill Summary and automatic summary runs, persisted so a restart resumes them

Revision ID: 9a3b5c7d1e2f
Revises: 9e1f3a5c7b2d
Create Date: 2026-12-01 02:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "9a3b5c7d1e2f"
down_revision: str | None = "9e1f3a5c7b2d"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "summary_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("current", sa.String(), nullable=False),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["chat_id"], ["chat.id"], name="fk_summary_run_chat_id_chat", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_summary_run"),
    )
    op.create_index("ix_summary_run_chat", "summary_run", ["chat_id", "kind", "id"])
    op.create_index("ix_summary_run_status", "summary_run", ["status"])


def downgrade() -> None:
    op.drop_index("ix_summary_run_status", table_name="summary_run")
    op.drop_index("ix_summary_run_chat", table_name="summary_run")
    op.drop_table("summary_run")
