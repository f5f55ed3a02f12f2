"""summary entry review reason: why a model-written entry waits for review (a refusal or an unrelated answer)

Revision ID: 8d1f3b5a7c9e
Revises: c4e6a8b0d2f4
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "8d1f3b5a7c9e"
down_revision: str | None = "c4e6a8b0d2f4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("summary_entry", sa.Column("review_reason", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("summary_entry", "review_reason")
