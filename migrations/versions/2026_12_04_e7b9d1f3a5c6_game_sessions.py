"""a Game chat's sessions (issue 27): a later session names the game's first one

Revision ID: e7b9d1f3a5c6
Revises: d6f8b0c2e4a5
Create Date: 2026-12-04 17:25:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "e7b9d1f3a5c6"
down_revision: str | None = "d6f8b0c2e4a5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chat", sa.Column("game_root_id", sa.Integer(), nullable=True))
    op.create_index("ix_chat_game_root_id", "chat", ["game_root_id"])


def downgrade() -> None:
    op.drop_index("ix_chat_game_root_id", table_name="chat")
    op.drop_column("chat", "game_root_id")
