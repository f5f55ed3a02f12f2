"""scene_part_names: a saved recap part keeps who it named and its timeframe, so a scene resumed
after a restart combines its parts with every participant they named (issue 14)

Revision ID: 4e6a8c0b2d1f
Revises: 7c9e1b3d5f8a
Create Date: 2026-12-01 06:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "4e6a8c0b2d1f"
down_revision: str | None = "7c9e1b3d5f8a"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("scene_recap_part") as batch:
        batch.add_column(sa.Column("participants", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("timeframe", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("scene_recap_part") as batch:
        batch.drop_column("timeframe")
        batch.drop_column("participants")
