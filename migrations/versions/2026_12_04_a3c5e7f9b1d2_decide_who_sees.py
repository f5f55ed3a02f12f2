"""Decide who sees new messages (issue 27): a message whose audience the user set by hand is never
decided again, and each chat remembers the last message decided

Revision ID: a3c5e7f9b1d2
Revises: f2b4d6e8a0c1
Create Date: 2026-12-04 14:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a3c5e7f9b1d2"
down_revision: str | None = "f2b4d6e8a0c1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("message", sa.Column("audience_manual", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("scene_state", sa.Column("visibility_through_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("scene_state", "visibility_through_id")
    op.drop_column("message", "audience_manual")
