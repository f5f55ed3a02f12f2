"""summary entry review reason: why a model-written entry waits for review (a refusal or an unrelated answer)

Revision ID: 4e6a8c0b2d1f
Revises: 7c9e1b3d5f8a
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "4e6a8c0b2d1f"
down_revision: str | None = "7c9e1b3d5f8a"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("summary_entry", sa.Column("review_reason", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("summary_entry", "review_reason")
