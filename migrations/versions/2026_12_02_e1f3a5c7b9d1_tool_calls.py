"""tool calls: the active version's tool calls mirrored on the message, and a connection's tools mode
(issue 24)

Revision ID: e1f3a5c7b9d1
Revises: b3d5f7a9c1e2
Create Date: 2026-12-02 17:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e1f3a5c7b9d1"
down_revision: str | None = "b3d5f7a9c1e2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("message") as batch_op:
        batch_op.add_column(sa.Column("tool_calls", sa.JSON(), nullable=True))
    with op.batch_alter_table("connection") as batch_op:
        batch_op.add_column(sa.Column("tools_mode", sa.String(), nullable=False, server_default="auto"))
        batch_op.add_column(sa.Column("tools_refused", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("connection") as batch_op:
        batch_op.drop_column("tools_refused")
        batch_op.drop_column("tools_mode")
    with op.batch_alter_table("message") as batch_op:
        batch_op.drop_column("tool_calls")
