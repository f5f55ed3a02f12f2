"""a group member's own "new start" (issue 27): it reads the chat from that message on

Revision ID: d6f8b0c2e4a5
Revises: c5e7a9b1d3f4
Create Date: 2026-12-04 15:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d6f8b0c2e4a5"
down_revision: str | None = "c5e7a9b1d3f4"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chat_character", sa.Column("start_message_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("chat_character", "start_message_id")
