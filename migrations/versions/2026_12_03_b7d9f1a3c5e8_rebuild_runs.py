"""Memory Recall's rebuilds as rows: progress, Stop and a resume seen by every server (issue 26)

Revision ID: b7d9f1a3c5e8
Revises: a2c4e6f8b0d3
Create Date: 2026-12-03 10:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b7d9f1a3c5e8"
down_revision: str | None = "a2c4e6f8b0d3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rebuild_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("making", sa.Boolean(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("last_chunk_id", sa.Integer(), nullable=True),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["chat_id"], ["chat.id"], name="fk_rebuild_run_chat_id_chat", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_rebuild_run"),
    )
    op.create_index("ix_rebuild_run_chat", "rebuild_run", ["chat_id", "id"])
    op.create_index("ix_rebuild_run_status", "rebuild_run", ["status"])


def downgrade() -> None:
    op.drop_index("ix_rebuild_run_status", "rebuild_run")
    op.drop_index("ix_rebuild_run_chat", "rebuild_run")
    op.drop_table("rebuild_run")
