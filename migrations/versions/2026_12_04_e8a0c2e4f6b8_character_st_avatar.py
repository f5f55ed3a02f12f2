"""a character remembers the file name its card was imported from: SillyTavern's avatar key, by which
its group files and group chats name members (issue 27)

Revision ID: e8a0c2e4f6b8
Revises: d6f8a0c2e4b6
Create Date: 2026-12-04 03:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e8a0c2e4f6b8"
down_revision: str | None = "d6f8a0c2e4b6"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("character", sa.Column("st_avatar", sa.String(length=255), nullable=True))


def downgrade() -> None:
    op.drop_column("character", "st_avatar")
