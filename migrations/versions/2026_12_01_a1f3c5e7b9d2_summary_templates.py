"""summary templates: the user's saved Summary Prompts (global)

Revision ID: a1f3c5e7b9d2
Revises: 7d2e4f6a8b9c
Create Date: 2026-12-01 02:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a1f3c5e7b9d2"
down_revision: str | None = "7d2e4f6a8b9c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "summary_template",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("text", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_summary_template"),
        sa.UniqueConstraint("name", name="uq_summary_template_name"),
    )


def downgrade() -> None:
    op.drop_table("summary_template")
