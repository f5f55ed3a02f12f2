"""persona deliberate tools: a persona's override of Deliberate Tool Mode (issue 24)

Revision ID: b9d1f3a5c7e9
Revises: d5f7a9b1c3e6
Create Date: 2026-12-02 18:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b9d1f3a5c7e9"
down_revision: str | None = "d5f7a9b1c3e6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("persona") as batch_op:
        batch_op.add_column(sa.Column("deliberate_tools", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("persona") as batch_op:
        batch_op.drop_column("deliberate_tools")
