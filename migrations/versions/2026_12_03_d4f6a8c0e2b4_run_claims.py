"""run claims in the database: which chat each kind of background run (and the reply being written)
works, per server, with a heartbeat and a Stop asked from another server (issue 26)

Revision ID: d4f6a8c0e2b4
Revises: c2e4a6b8d0f1
Create Date: 2026-12-03 04:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d4f6a8c0e2b4"
down_revision: str | None = "c2e4a6b8d0f1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_claim",
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("chat_id", sa.Integer(), nullable=False),
        sa.Column("token", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("server", sa.String(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stop_requested", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "chat_id", name="pk_run_claim"),
    )
    op.create_index("ix_run_claim_holder", "run_claim", ["holder"])


def downgrade() -> None:
    op.drop_index("ix_run_claim_holder", "run_claim")
    op.drop_table("run_claim")
