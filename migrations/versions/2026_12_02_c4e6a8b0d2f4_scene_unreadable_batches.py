"""scene unreadable batches: the batch whose scene-check answer could not be read, kept on the chat's
check state and on a Prepare run, so "Treat this batch as having no scene end" survives a restart

Revision ID: c4e6a8b0d2f4
Revises: 4e6a8c0b2d1f
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c4e6a8b0d2f4"
down_revision: str | None = "4e6a8c0b2d1f"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("scene_state") as batch_op:
        batch_op.add_column(sa.Column("unreadable_through_id", sa.Integer(), nullable=True))
    with op.batch_alter_table("scene_run") as batch_op:
        batch_op.add_column(sa.Column("unreadable_through_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scene_run") as batch_op:
        batch_op.drop_column("unreadable_through_id")
    with op.batch_alter_table("scene_state") as batch_op:
        batch_op.drop_column("unreadable_through_id")
