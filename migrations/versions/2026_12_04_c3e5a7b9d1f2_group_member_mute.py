"""a group chat's members can be muted: a muted member never answers by itself, only when asked for
by name (issue 27, SillyTavern's disabled_members)

Revision ID: c3e5a7b9d1f2
Revises: b7d9f1a3c5e8
Create Date: 2026-12-04 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c3e5a7b9d1f2"
down_revision: str | None = "b7d9f1a3c5e8"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chat_character") as batch_op:
        batch_op.add_column(sa.Column("muted", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("chat_character") as batch_op:
        batch_op.drop_column("muted")
